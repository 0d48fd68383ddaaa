"""The statement per book (``inference.combine``): Holm's adjusted p-values against a slow reference, and a null
simulation through the combination function itself: under "never seen", dependent p-values (independent, strongly
correlated, and a mixture of a conformal rank p-value with uniform ones) give "evidence" at most alpha of the time,
sized to see a doubled rate; min-p without correction, the broken variant, fails the same check."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from docaudit.inference.combine import holm, statement
from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE, NO_EVIDENCE

ALPHA = 0.05
# 2,000 books: a true 5% gives at most 5% + 3 s.e. (6.5%) with probability 0.999; a doubled rate (10%) stays under it
# with probability below 1e-12, so the check can see a doubled rate
BOOKS = 2000
LIMIT = ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / BOOKS)


def holm_reference(ps: list[float]) -> list[float]:
    """Holm's procedure as defined: reject H_(i) at level a iff every p_(j), j <= i, is at most a / (m - j + 1); the
    adjusted p-value is the smallest a that rejects it, searched over the candidate levels."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    candidates = sorted({min(1.0, (m - j) * ps[order[j]]) for j in range(m)} | {1.0})
    adjusted = [1.0] * m
    for i in range(m):
        for a in candidates:
            if all(ps[order[j]] <= a / (m - j) + 1e-15 for j in range(i + 1)):
                adjusted[order[i]] = a
                break
    return adjusted


@pytest.mark.parametrize("m", [1, 2, 3, 5])
def test_holm_matches_the_definition(m):
    rng = np.random.default_rng(m)
    for _ in range(200):
        ps = list(rng.choice([0.001, 0.01, 0.02, 0.04, 0.3, 1.0], m)) if rng.random() < 0.3 else list(rng.random(m))
        assert np.allclose(holm(ps), holm_reference(ps))


def test_statement_words():
    assert statement({"a": 0.01, "b": 0.5}, ALPHA).verdict == EVIDENCE  # 2 * 0.01 <= 0.05
    said = statement({"a": 0.03, "b": 0.5}, ALPHA)
    assert said.verdict == NO_EVIDENCE and said.p_value == pytest.approx(0.06) and said.m == 2
    said = statement({"a": None, "b": None}, ALPHA)
    assert said.verdict == INCONCLUSIVE and said.p_value is None and said.adjusted == {"a": None, "b": None}
    # an inconclusive test contributes nothing but is counted: 0.03 alone would be evidence, with it it is not
    said = statement({"a": 0.03, "b": None}, ALPHA)
    assert said.verdict == NO_EVIDENCE and said.m == 2 and said.adjusted["b"] is None


def null_p_values(kind: str, m: int, rng: np.random.Generator) -> np.ndarray:
    """``BOOKS`` rows of m p-values, each uniform (valid) under the null, jointly dependent as ``kind`` says."""
    if kind == "independent":
        return rng.random((BOOKS, m))
    if kind == "correlated":  # Gaussian copula, correlation 0.9 between every pair of tests
        cov = np.full((m, m), 0.9) + 0.1 * np.eye(m)
        z = rng.multivariate_normal(np.zeros(m), cov, size=BOOKS)
        return stats.norm.sf(z)
    if kind == "negative":  # two tests that never agree: p and 1 - p, the others independent
        u = rng.random((BOOKS, m))
        u[:, 1] = 1 - u[:, 0]
        return u
    if kind == "rank":  # a conformal rank p-value among 20 library texts, the others sharing its latent score
        latent = rng.normal(size=(BOOKS, 21))
        p0 = (1 + (latent[:, 1:] >= latent[:, :1]).sum(1)) / 21
        others = stats.norm.sf(0.95 * latent[:, :1] + np.sqrt(1 - 0.95**2) * rng.normal(size=(BOOKS, m - 1)))
        return np.column_stack([p0, others])
    raise ValueError(kind)


def evidence_rate(ps: np.ndarray, combine) -> float:
    return float(np.mean([combine(row) for row in ps]))


def holm_evidence(row) -> bool:
    return statement({str(i): p for i, p in enumerate(row)}, ALPHA).verdict == EVIDENCE


def min_p_evidence(row) -> bool:
    """The broken variant: the smallest p-value of the tests run, no correction."""
    return min(row) <= ALPHA


@pytest.mark.parametrize(
    ("kind", "m"), list(itertools.product(["independent", "correlated", "negative", "rank"], [2, 4]))
)
def test_the_statement_holds_its_level_under_dependence(kind, m):
    rng = np.random.default_rng([7, m, len(kind)])
    ps = null_p_values(kind, m, rng)
    assert evidence_rate(ps, holm_evidence) <= LIMIT


def test_the_check_fails_on_min_p_without_correction():
    """The same check sees the broken variant: with independent or negatively dependent tests min-p's rate is far
    above 5% + 3 s.e."""
    rng = np.random.default_rng(11)
    assert evidence_rate(null_p_values("independent", 4, rng), min_p_evidence) > LIMIT
    assert evidence_rate(null_p_values("negative", 2, rng), min_p_evidence) > LIMIT
    # and a doubled rate is seen: 10% evidence among 2,000 books is above the limit
    doubled = np.where(rng.random((BOOKS, 1)) < 2 * ALPHA, 0.001, 0.9)
    assert evidence_rate(doubled, lambda row: row[0] <= ALPHA) > LIMIT
