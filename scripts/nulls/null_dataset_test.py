"""Where the truth is known, how often does ``dataset-test`` give p < 0.05?

- null: suspects and known non-members drawn from one distribution (4 correlated detector scores);
- skewed null: as null, with the shared factor drawn from a distribution with a long tail towards non-member-like
  scores (minus an exponential), and ``--nonmember-ratio`` times as many non-members as suspects (few suspects
  against many known non-members is the common case; it is where a t-test on the halves went wrong);
- reversed: the suspects are the *less* member-like set (one detector scores them 1 sd lower).

Each rate comes with its 95% Clopper-Pearson interval. With ``--splits 1`` the p-value is one split's, the unit
whose validity the combination (twice the median over splits) rests on. Prints one JSON line per set size.

    python scripts/nulls/null_dataset_test.py --sizes 10 --repetitions 540 --splits 1 --scenarios null,skewed
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from scipy.stats import binomtest

from docaudit.audit.dataset_level import dataset_test

FEATURES = 4


def scores(n: int, shift: float, rng: np.random.Generator, skewed: bool = False) -> np.ndarray:
    """``n`` documents' detector scores: a shared factor plus noise (detectors agree, as loss, zlib, Min-K% do),
    the first detector moved by ``shift``; ``skewed``: the shared factor is minus an exponential."""
    factor = -rng.exponential(size=(n, 1)) if skewed else rng.normal(size=(n, 1))
    x = factor + 0.5 * rng.normal(size=(n, FEATURES))
    x[:, 0] += shift
    return x


SCENARIOS = ("null", "skewed", "reversed")


def run(n: int, repetitions: int, seed: int = 0, splits: int = 10, ratio: int = 10, scenarios=SCENARIOS) -> dict:
    """The rates of p < 0.05 over ``repetitions`` simulated pairs of sets of ``n`` (the skewed null: ``n`` suspects
    against ``ratio * n`` non-members), for each of ``scenarios``."""
    p = {name: [] for name in scenarios}
    for r in range(repetitions):
        rng = np.random.default_rng([seed, n, r])
        nonmember = scores(n, 0.0, rng)
        suspects = {"null": scores(n, 0.0, rng), "reversed": scores(n, -1.0, rng)}
        many, few = scores(ratio * n, 0.0, rng, skewed=True), scores(n, 0.0, rng, skewed=True)
        for name in scenarios:
            pair = (few, many) if name == "skewed" else (suspects[name], nonmember)
            p[name].append(dataset_test(*pair, seed=r, n_splits=splits).p_value)
    out = {"n_per_set": n, "repetitions": repetitions, "splits": splits, "nonmember_ratio_skewed": ratio}
    out |= {name: rate(values, 0.05) for name, values in p.items()}
    if "reversed" in p:
        out["reversed_median_p"] = float(np.median(p["reversed"]))
    return out


def rate(p_values, level: float) -> dict:
    """The share of p-values below ``level`` with its 95% Clopper-Pearson interval."""
    hits = int(np.sum(np.asarray(p_values) < level))
    interval = binomtest(hits, len(p_values)).proportion_ci(0.95)
    return {"rate": hits / len(p_values), "count": hits, "ci95": [interval.low, interval.high]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="12,30")
    parser.add_argument("--repetitions", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--nonmember-ratio", type=int, default=10)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args()
    for n in (int(v) for v in args.sizes.split(",")):
        out = run(n, args.repetitions, args.seed, args.splits, args.nonmember_ratio, args.scenarios.split(","))
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
