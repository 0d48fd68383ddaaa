#!/usr/bin/env python
"""Cost of the paired synthetic-control test per book: tokens generated and scored, and CPU seconds of the
generation and of the scoring, at a preset of ``ControlsConfig`` (docs/benchmarks.md).

Each book goes through ``audit.synthetic_controls.book_passages`` (the generator writes the synthetic suffixes;
the run uses its own empty cache folder, so nothing comes from an earlier run) and ``passage_scores`` under the
target. CPU seconds are the process's (all threads); the wall time and the load average say how shared the machine
was.

Example::

    python scripts/bench_controls.py --preset fast /work/shared/corpus/members/1005.txt --json bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _timed(fn, *args):
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn(*args)
    return out, round(time.process_time() - cpu, 2), round(time.perf_counter() - wall, 2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("books", nargs="+", help="text files")
    ap.add_argument("--preset", default="fast", help="a preset of ControlsConfig (default, fast)")
    ap.add_argument("--model", default=None, help="generator and target (default: the embedded Gemma)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args(argv)
    os.environ["DOCAUDIT_CACHE"] = tempfile.mkdtemp(prefix="bench-controls-")
    import torch

    from docaudit.audit.synthetic_controls import book_passages, passage_scores
    from docaudit.config import SEED, ControlsConfig, ModelConfig
    from docaudit.corpus.documents import load_documents
    from docaudit.query.models import load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    config = ControlsConfig.preset(args.preset)
    lm = load_model(ModelConfig(model=args.model))
    rows = []
    for doc in load_documents(args.books):
        (passages, _), gen_cpu, gen_wall = _timed(book_passages, doc.text, doc.sha256, lm, config, SEED)
        (_, _, scored), score_cpu, score_wall = _timed(passage_scores, lm, passages, config.batch_size)
        row = {
            "book": doc.id,
            "preset": args.preset,
            "passages": len(passages),
            "tokens_generated": len(passages) * config.samples * config.suffix_tokens,
            "tokens_scored": scored,
            "generate_cpu_s": gen_cpu,
            "generate_wall_s": gen_wall,
            "score_cpu_s": score_cpu,
            "score_wall_s": score_wall,
            "threads": torch.get_num_threads(),
            "load_average": os.getloadavg()[0],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
