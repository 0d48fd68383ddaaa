#!/usr/bin/env python
"""Seconds per tree of the meta-classifier's random forest (depth 5, at least 3 documents per leaf, HistFE's 1,000
features) fit on one job and on every core, by the number of training documents, in one run: where threads start
to pay, which sets ``MetaConfig.parallel_from``.

Example::

    python scripts/benchmarks/bench_forest_jobs.py --documents 8,16,32,64,128,512 --json forest_jobs.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier


def seconds_per_tree(n: int, jobs: int, trees: int, features: int, repeats: int) -> float:
    """The best of ``repeats`` fits of ``trees`` trees on ``n`` random documents, per tree."""
    rng = np.random.default_rng(n)
    X, y = rng.random((n, features)), np.arange(n) % 2
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        RandomForestClassifier(trees, max_depth=5, min_samples_leaf=3, random_state=0, n_jobs=jobs).fit(X, y)
        best = min(best, time.perf_counter() - start)
    return best / trees


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", default="8,16,32,64,128,512", help="Comma-separated training set sizes.")
    ap.add_argument("--trees", type=int, default=100, help="Trees per forest (default 100, the search's).")
    ap.add_argument("--features", type=int, default=1000, help="Features per document (default: HistFE's 1,000).")
    ap.add_argument("--repeats", type=int, default=5, help="Fits per cell; the fastest is kept (default 5).")
    ap.add_argument("--json", default=None, help="Write the rows as JSON to this file.")
    args = ap.parse_args(argv)
    rows = []
    for n in (int(x) for x in args.documents.split(",")):
        one = seconds_per_tree(n, 1, args.trees, args.features, args.repeats)
        every = seconds_per_tree(n, -1, args.trees, args.features, args.repeats)
        rows.append({"documents": n, "one_job_ms": one * 1e3, "all_cores_ms": every * 1e3, "ratio": every / one})
        print(f"{n:>6} documents: one job {one * 1e3:6.2f} ms/tree, {os.cpu_count()} cores {every * 1e3:6.2f} "
              f"ms/tree, cores / one {every / one:.2f}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"loadavg": os.getloadavg(), "rows": rows}, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()
