"""Where the truth is known, how often does ``dataset-test`` give p < 0.05?

- null: suspects and known non-members drawn from one distribution (4 correlated detector scores);
- reversed: the suspects are the *less* member-like set (one detector scores them 1 sd lower);
- self-check: Maini et al.'s false-positive check (two halves of the non-members) under the null.

Prints one JSON line per set size.

    python scripts/null_dataset_test.py --sizes 12,30,100 --repetitions 1000
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from docaudit.audit.dataset_level import dataset_test

FEATURES = 4


def scores(n: int, shift: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` documents' detector scores: a shared factor plus noise (detectors agree, as loss, zlib, Min-K% do),
    the first detector moved by ``shift``."""
    x = rng.normal(size=(n, 1)) + 0.5 * rng.normal(size=(n, FEATURES))
    x[:, 0] += shift
    return x


def run(n: int, repetitions: int, seed: int = 0, level: float = 0.05, report_every: int | None = None) -> dict:
    """The rates over ``repetitions`` simulated pairs of sets of ``n``; with ``report_every``, the running result
    is printed every that many repetitions."""
    null, reversed_p, self_check = [], [], []
    for r in range(repetitions):
        if report_every and r and r % report_every == 0:
            print(json.dumps(summary(n, null, reversed_p, self_check, level)), flush=True)
        rng = np.random.default_rng([seed, n, r])
        nonmember = scores(n, 0.0, rng)
        res = dataset_test(scores(n, 0.0, rng), nonmember, seed=r)
        null.append(res.p_value)
        self_check.append(res.self_check_p_value)
        reversed_p.append(dataset_test(scores(n, -1.0, rng), nonmember, seed=r).p_value)
    return summary(n, null, reversed_p, self_check, level)


def summary(n, null, reversed_p, self_check, level) -> dict:
    return {
        "n_per_set": n,
        "repetitions": len(null),
        "null_rate_p_below_level": float(np.mean(np.array(null) < level)),
        "self_check_rate_p_below_level": float(np.mean(np.array(self_check) < level)),
        "reversed_median_p": float(np.median(reversed_p)),
        "reversed_rate_p_below_level": float(np.mean(np.array(reversed_p) < level)),
        "level": level,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="12,30,100")
    parser.add_argument("--repetitions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for n in (int(v) for v in args.sizes.split(",")):
        print(json.dumps(run(n, args.repetitions, args.seed, report_every=10)), flush=True)


if __name__ == "__main__":
    main()
