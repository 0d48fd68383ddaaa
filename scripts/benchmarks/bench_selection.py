#!/usr/bin/env python
"""The meta-classifier's model selection (``--norm``/``--features auto``) with small and full forests, on a
controlled target: AUC and time of the whole k-fold evaluation with ``select_trees`` = 500 (every forest of the
inner search as large as the final one) against the default.

A small GPT-2 is trained on a random half of 24 excerpts of the shared corpus's books (the lab's controlled
design: membership is assigned at random, so the other half are non-members of the same distribution); every
excerpt is queried once; then ``classifier.evaluate`` runs on the same statistics, for several fold seeds, with
each number of selection trees. The forest that scores is always ``n_estimators`` (500) trees: only the inner
search's ranking of the ten (normalization, features) candidates changes.

Example::

    python scripts/benchmarks/bench_selection.py --seeds 0,1,2 --json selection.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchmarks.common import CORPUS, cpu_name  # noqa: E402


def excerpts(n: int, words: int) -> list[str]:
    """``words`` words from the middle of each of the first ``n`` member books of the corpus."""
    out = []
    for path in sorted((CORPUS / "members").glob("*.txt"))[:n]:
        text = path.read_text(encoding="utf-8").replace("\r\n", "\n").split(" ")
        mid = len(text) // 2
        out.append(" ".join(text[mid : mid + words]))
    return out


def controlled_stats(work: Path, n: int, words: int, epochs: int):
    """TokenStats and labels of ``n`` excerpts, half of them (at random) the training data of a small target."""
    import numpy as np
    import torch

    from docaudit.config import ModelConfig, QueryConfig, TargetConfig
    from docaudit.lab.experiment import split_members
    from docaudit.lab.target import train_target
    from docaudit.query.models import load_model
    from docaudit.query.querier import Querier

    texts = dict(zip([f"d{i:02d}" for i in range(n)], excerpts(n, words)))
    split = split_members(list(texts), seed=0)
    members = [texts[k] for k in sorted(texts) if split[k] == 1]
    config = TargetConfig(
        layers=2, width=64, heads=4, positions=64, vocab_size=512, epochs=epochs, learning_rate=3e-3, batch_size=8
    )
    torch.set_num_threads(1)
    model_dir = train_target(members, list(texts.values()), work / "target", config)
    querier = Querier(load_model(ModelConfig(model=str(model_dir))), QueryConfig(context=32), cache=None)
    keys = sorted(texts)
    stats = querier.stats_many([(texts[k], None) for k in keys], progress=False)
    return stats, np.array([split[k] for k in keys])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2", help="Fold seeds (comma-separated).")
    ap.add_argument("--select-trees", default="500,100", help="Selection forest sizes to compare.")
    ap.add_argument("--documents", type=int, default=24, help="Excerpts in the pool (half of them members).")
    ap.add_argument("--words", type=int, default=150, help="Words per excerpt.")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument(
        "--epochs", type=int, default=30, help="Training epochs of the target (fewer: a weaker membership signal)."
    )
    ap.add_argument("--json", default=None, help="Write the result as JSON to this file.")
    args = ap.parse_args(argv)
    from sklearn.metrics import roc_auc_score

    from docaudit.config import MetaConfig
    from docaudit.methods.meta import classifier

    seeds = [int(s) for s in args.seeds.split(",")]
    sizes = [int(s) for s in args.select_trees.split(",")]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="docaudit-bench-selection-") as tmp:
        stats, labels = controlled_stats(Path(tmp), args.documents, args.words, args.epochs)
    rows = []
    for seed in seeds:
        for trees in sizes:
            meta = replace(MetaConfig(), folds=args.folds, select_trees=trees)
            wall, cpu = time.perf_counter(), time.process_time()
            ev = classifier.evaluate(stats, labels, meta, seed, progress=False)
            row = {
                "seed": seed,
                "select_trees": trees,
                "pooled_auc": round(float(roc_auc_score(ev.labels, ev.scores)), 4),
                "fold_mean_auc": round(float(ev.summary["auc_mean"]), 4),
                "configs": ev.configs,
                "wall_s": round(time.perf_counter() - wall, 2),
                "cpu_s": round(time.process_time() - cpu, 2),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {
        "epochs": args.epochs,
        "cpu": cpu_name(),
        "loadavg": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "rows": rows,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
