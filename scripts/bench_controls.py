#!/usr/bin/env python
"""Cost of the paired synthetic-control test per book: tokens generated and scored, and CPU seconds of the
generation and of the scoring, at a preset of ``ControlsConfig`` (docs/benchmarks.md).

Each book goes through ``audit.synthetic_controls.book_passages`` (the generator writes the synthetic suffixes;
the run uses its own empty cache folder, its ``models`` folder linked to the default cache's so the embedded model
is not assembled again, so no suffix comes from an earlier run) and ``passage_scores`` under the target, through
``--backend``. CPU seconds are the process's (all threads, llama.cpp's included); the wall time and the load
average say how shared the machine was. Each row also has the book's contrast with its interval and its rank
p-value among the texts of the library stored for the embedded model (computed through transformers: for another
backend that rank compares engines, so it is a diagnostic, not the test ``controls`` runs).

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
    ap.add_argument("--backend", default="transformers", help="transformers (default) or llamacpp")
    ap.add_argument("--threads", type=int, help="torch threads, llama.cpp's too (default: torch's)")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args(argv)
    default_models = Path.home() / ".cache" / "docaudit" / "models"
    os.environ["DOCAUDIT_CACHE"] = tempfile.mkdtemp(prefix="bench-controls-")
    if default_models.is_dir():
        (Path(os.environ["DOCAUDIT_CACHE"]) / "models").symlink_to(default_models)
    import numpy as np
    import torch

    from docaudit.audit.controls_library import read_library
    from docaudit.audit.synthetic_controls import BookControls, book_passages, judge, passage_scores
    from docaudit.config import CONTROLS_NULL, SEED, ControlsConfig, ModelConfig
    from docaudit.corpus.documents import load_documents
    from docaudit.inference.controls import block_mean, contrasts, dependent_interval
    from docaudit.query.models import load_model
    from docaudit.untrusted import load_untrusted_json

    if args.threads:
        torch.set_num_threads(args.threads)
    config = ControlsConfig.preset(args.preset)
    lm, load_cpu, load_wall = _timed(load_model, ModelConfig(model=args.model, backend=args.backend))
    stored = load_untrusted_json(CONTROLS_NULL, "controls library")["key"]  # its own key: read whatever the backend
    library = read_library(CONTROLS_NULL, stored, config.block)
    rows = []
    for doc in load_documents(args.books):
        (passages, _), gen_cpu, gen_wall = _timed(book_passages, doc.text, doc.sha256, lm, config, SEED)
        (real, synthetic, scored), score_cpu, score_wall = _timed(passage_scores, lm, passages, config.batch_size)
        delta, placebo = contrasts(real, synthetic)
        book = BookControls(doc.id, str(doc.path), doc.sha256, len(passages), deltas=delta.tolist())
        book.contrast, book.placebo = block_mean(delta, config.block), block_mean(placebo, config.block)
        judge([book], library, config, SEED)
        row = {
            "book": doc.id,
            "backend": args.backend,
            "preset": args.preset,
            "contrast": round(float(np.mean(delta)), 5),
            "interval": [round(x, 5) for x in dependent_interval(delta)],
            "p_value_in_stored_library": book.p_value,
            "load_cpu_s": load_cpu,
            "load_wall_s": load_wall,
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
