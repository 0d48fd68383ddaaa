#!/usr/bin/env python
"""Is ``predict``'s p-value valid for a document read to the token budget when its features drift with length?

Where the truth is known: document features whose level rises with the tokens queried (a longer text gives the
model more context, so its tokens score higher and look more member-like), members shifted by ``--shift``. The
classifier's known non-members have mixed lengths: ``--at-cap`` of them read to the budget (``--cap`` tokens),
``--below`` shorter (uniform between a quarter of the budget and the budget). The judged document is a never-trained
document read to the budget, so under H0 it is exchangeable with the known non-members OF ITS LENGTH, not with all
of them. Each trial refits docaudit's full-conformal forest (``inference.conformal.FullConformal``) once and takes:

- ``all``: the rank among every known non-member (the rule before length classes, which only gated documents
  shorter or longer than every known non-member);
- ``class``: the rank among the known non-members of the document's length class (``inference.conformal.length_class``,
  what ``predict`` prints for a classifier saved with token counts).

At ``--alpha`` each rule's exact rate is ``floor(alpha (n + 1)) / (n + 1)`` for the ``n`` it ranks among; the
script prints the rates with Clopper-Pearson intervals and the one-sided binomial p-value of "the rate is twice
the exact one".

    python scripts/nulls/null_predict_length.py --trials 2000 --json null-predict-length.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
from scipy.stats import binomtest  # noqa: E402
from sklearn.ensemble import RandomForestClassifier  # noqa: E402

from docaudit.inference.conformal import FullConformal, conformal_p, length_class  # noqa: E402


def features(lengths: np.ndarray, shift: float, slope: float, rng: np.random.Generator, width: int = 4) -> np.ndarray:
    """One row per document: ``slope`` per doubling of its tokens, ``shift`` for a member, unit noise."""
    level = slope * np.log2(lengths / lengths.min(initial=1))[:, None] + shift
    return level + rng.normal(size=(len(lengths), width))


def lengths(n_cap: int, n_below: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    return np.r_[np.full(n_cap, cap), rng.integers(cap // 4, cap, size=n_below)]


def trial(t: int, args) -> tuple[float, float, int]:
    """One never-trained document read to the budget: its p-value among all known non-members and among those of
    its class, and the size of its class."""
    rng = np.random.default_rng(t)
    member_len = lengths(args.members // 2, args.members - args.members // 2, args.cap, rng)
    nonmember_len = lengths(args.at_cap, args.below, args.cap, rng)
    scale = np.r_[member_len, nonmember_len, args.cap]
    rows = features(scale, 0.0, args.slope, rng)
    rows[: args.members] += args.shift
    X, y = rows[:-1], np.r_[np.ones(args.members), np.zeros(len(nonmember_len))].astype(int)
    classes = [length_class(int(n), args.cap) for n in scale[:-1]]
    forest = RandomForestClassifier(n_estimators=args.trees, min_samples_leaf=3, random_state=t, n_jobs=1)
    fitted = FullConformal(forest, seed=t).fit(X, y, classes)
    by_class = fitted.p_values(rows[-1:], [f"trial {t}"], [length_class(args.cap, args.cap)])[0]
    score, null = fitted.scores_[0]
    return conformal_p(score, null), float(by_class), fitted.compared_[0]


def rate(p: np.ndarray, n: int, alpha: float) -> dict:
    exact = np.floor(alpha * (n + 1)) / (n + 1)
    hits = int((p <= alpha + 1e-12).sum())
    ci = binomtest(hits, len(p)).proportion_ci()
    doubled = binomtest(hits, len(p), min(1.0, 2 * exact), alternative="less").pvalue if exact > 0 else None
    return {"trials": len(p), "hits": hits, "rate": hits / len(p), "ci95": [ci.low, ci.high], "exact": exact,
            "p_vs_doubled": doubled}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--members", type=int, default=30)
    parser.add_argument("--at-cap", type=int, default=40, help="known non-members read to the budget")
    parser.add_argument("--below", type=int, default=20, help="known non-members shorter than the budget")
    parser.add_argument("--cap", type=int, default=1024, help="the token budget (--max-tokens)")
    parser.add_argument("--slope", type=float, default=0.5, help="feature level per doubling of the tokens queried")
    parser.add_argument("--shift", type=float, default=1.0, help="the members' shift")
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    got = np.array([trial(t, args) for t in range(args.trials)])
    n_all = args.at_cap + args.below
    out = {
        "settings": vars(args) | {"json": None},
        "load_average": os.getloadavg(),
        "all": rate(got[:, 0], n_all, args.alpha),
        "class": rate(got[:, 1], int(got[0, 2]), args.alpha),
        "class_size": int(got[0, 2]),
    }
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
