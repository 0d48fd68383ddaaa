"""Null simulation of ``audit``'s statement per book (Holm–Bonferroni over the tests run, ``inference.combine``):
under "the model never saw this book" each test's p-value is valid (uniform here); the tests are dependent in
several ways (independent, Gaussian copula at correlations 0.5, 0.9 and 0.99, two tests that never agree, a
conformal rank p-value among 20 library texts sharing its latent score with the others, and tests of which some
answer "inconclusive"). Prints the share of books given "evidence of membership" with its 95% interval, beside
min-p without correction (the broken variant). 20,000 books per row: a true 5% lies within 4.7–5.3%."""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from docaudit.inference.combine import statement
from docaudit.inference.verdicts import EVIDENCE


def dependent(kind: str, m: int, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "independent":
        return rng.random((n, m))
    if kind.startswith("copula"):
        rho = float(kind.split()[1])
        cov = np.full((m, m), rho) + (1 - rho) * np.eye(m)
        return stats.norm.sf(rng.multivariate_normal(np.zeros(m), cov, size=n))
    if kind == "never agree":
        u = rng.random((n, m))
        u[:, 1] = 1 - u[:, 0]
        return u
    if kind == "rank among 20":
        latent = rng.normal(size=(n, 21))
        p0 = (1 + (latent[:, 1:] >= latent[:, :1]).sum(1)) / 21
        rest = stats.norm.sf(0.95 * latent[:, :1] + np.sqrt(1 - 0.95**2) * rng.normal(size=(n, m - 1)))
        return np.column_stack([p0, rest])
    if kind == "half inconclusive":  # each test inconclusive with probability 1/2 (NaN), the others independent
        u = rng.random((n, m))
        u[rng.random((n, m)) < 0.5] = np.nan
        return u
    raise ValueError(kind)


def rate(hits: np.ndarray) -> str:
    k, n = int(hits.sum()), len(hits)
    ci = stats.binomtest(k, n).proportion_ci()
    return f"{100 * k / n:.2f}% ({100 * ci.low:.1f}–{100 * ci.high:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--books", type=int, default=20_000)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    kinds = ["independent", "copula 0.5", "copula 0.9", "copula 0.99", "never agree", "rank among 20",
             "half inconclusive"]  # fmt: skip
    print("| dependence | tests | Holm–Bonferroni: evidence (95%) | min-p, no correction (95%) |")
    print("|---|---|---|---|")
    for kind in kinds:
        for m in (2, 3, 5):
            rng = np.random.default_rng([args.seed, m, len(kind)])
            ps = dependent(kind, m, args.books, rng)
            holm = np.array([
                statement({str(i): None if np.isnan(p) else p for i, p in enumerate(row)}, args.alpha).verdict
                == EVIDENCE
                for row in ps
            ])  # fmt: skip
            naive = np.nanmin(np.where(np.isnan(ps), 1.0, ps), axis=1) <= args.alpha
            print(f"| {kind} | {m} | {rate(holm)} | {rate(naive)} |")


if __name__ == "__main__":
    main()
