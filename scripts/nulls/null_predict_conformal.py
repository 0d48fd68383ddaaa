"""How often does a ``predict`` p-value fall below 0.05 for a document that is a non-member, and how often for a
member? Where the truth is known: synthetic document features, members shifted by ``--shift`` (0: no signal), 30
known members and 30 known non-members, docaudit's forest settings (depth 5, leaves of 3; fewer trees).

Per repetition (an independent data set), a new non-member and a new member are judged by
- full conformal (``inference.conformal.FullConformal``: the forest refit with the document added as a non-member,
  out-of-bag scores), what ``predict`` prints now;
- cross-conformal on the same 5 chunk folds as ``train`` (``inference.conformal.cross_conformal_p``), factor 1 and
  factor 2 (the latter what ``predict`` printed before);
- a naive rank against the non-members' in-sample scores of the forest fit on all training documents (what a
  p-value from the final classifier alone would be), to show that the check can fail.

    python scripts/nulls/null_predict_conformal.py --repetitions 600 --shift 0 --trees 50
    python scripts/nulls/null_predict_conformal.py --repetitions 600 --shift 0.7 --trees 50

600 repetitions see a doubled rate (0.10 against 0.05) with power above 0.99 (one-sided binomial test at 5%).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from scipy.stats import binomtest
from sklearn.ensemble import RandomForestClassifier

from docaudit.inference.conformal import FullConformal, conformal_p, cross_conformal_p
from docaudit.metrics import chunk_folds

VARIANTS = ("full_conformal", "cross_conformal_x1", "cross_conformal_x2", "in_sample_naive")


def forest(trees: int, seed: int) -> RandomForestClassifier:
    return RandomForestClassifier(n_estimators=trees, max_depth=5, min_samples_leaf=3, random_state=seed, n_jobs=1)


def one(rng, shift: float, n: int, dims: int, trees: int, seed: int) -> dict[str, np.ndarray]:
    """The p-values of a new non-member and a new member under each variant."""
    X = np.r_[rng.normal(shift, 1, (n, dims)), rng.normal(0, 1, (n, dims))]
    y = np.r_[np.ones(n), np.zeros(n)].astype(int)
    new = np.r_[rng.normal(0, 1, (1, dims)), rng.normal(shift, 1, (1, dims))]
    keys = [f"{seed}-non", f"{seed}-mem"]
    out = {"full_conformal": FullConformal(forest(trees, seed), seed).fit(X, y).p_values(new, keys)}
    book, held = [], []
    for train, test in chunk_folds(y, 5, seed):
        model = forest(trees, seed).fit(X[train], y[train])
        book.append(model.predict_proba(new)[:, 1])
        held.append(model.predict_proba(X[test][y[test] == 0])[:, 1])
    out["cross_conformal_x1"] = cross_conformal_p(book, held)
    out["cross_conformal_x2"] = cross_conformal_p(book, held, factor=2)
    final = forest(trees, seed).fit(X, y)
    null = final.predict_proba(X[y == 0])[:, 1]
    out["in_sample_naive"] = np.array([conformal_p(s, null) for s in final.predict_proba(new)[:, 1]])
    return out


def run(repetitions: int, shift: float, n: int = 30, dims: int = 5, trees: int = 50, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    below = {v: [0, 0] for v in VARIANTS}
    for rep in range(repetitions):
        for variant, p in one(rng, shift, n, dims, trees, seed * 100_000 + rep).items():
            below[variant][0] += int(p[0] < 0.05)
            below[variant][1] += int(p[1] < 0.05)
    result = {"repetitions": repetitions, "shift": shift, "n_members": n, "n_nonmembers": n, "trees": trees}
    for variant, (non, mem) in below.items():
        test = binomtest(non, repetitions, 0.05, alternative="greater")
        low, high = binomtest(non, repetitions).proportion_ci(0.95)
        result[variant] = {
            "nonmember_rate": non / repetitions,
            "nonmember_rate_ci95": [round(low, 4), round(high, 4)],
            "p_rate_above_0.05": test.pvalue,
            "member_rate": mem / repetitions,
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repetitions", type=int, default=600)
    parser.add_argument("--shift", type=float, default=0.0)
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(run(args.repetitions, args.shift, trees=args.trees, seed=args.seed), indent=2))


if __name__ == "__main__":
    main()
