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

    python scripts/benchmarks/bench_controls.py --preset fast /work/shared/corpus/members/1005.txt --json bench.json
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

from benchmarks.common import cpu_name  # noqa: E402


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
    ap.add_argument(
        "--across-books",
        action="store_true",
        help="generation only: the books one decoding loop each, then together (ControlsConfig.generation_rows)",
    )
    args = ap.parse_args(argv)
    if args.across_books:
        return across_books(args)
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


def fresh_controls(cache: Path, name: str) -> str:
    """A cache folder whose controls entries start empty, its converted models, tokenizers, weight hashes and
    measured rates those of ``cache`` (linked: nothing converted again, the rates kept for later estimates)."""
    folder = Path(tempfile.mkdtemp(prefix=f"bench-controls-{name}-"))
    for kind in ("models", "tokenizers", "weights-hash", "rates"):
        (cache / kind).mkdir(parents=True, exist_ok=True)
        (folder / kind).symlink_to(cache / kind)
    return str(folder)


def across_books(args) -> int:
    """Generated tokens per second (wall and CPU) of the books written one at a time (a decoding loop holds one
    book's passages) and together (``generation_rows``: several books' passages as rows of one loop), each into an
    empty cache folder, in one process on one loaded model; the passages must come out the same."""
    import torch

    from docaudit.audit.synthetic_controls import passages_of_books
    from docaudit.config import SEED, ControlsConfig, ModelConfig
    from docaudit.corpus.documents import load_documents
    from docaudit.query.cache import cache_root
    from docaudit.query.models import load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    config = ControlsConfig.preset(args.preset)
    lm = load_model(ModelConfig(model=args.model))
    docs = load_documents(args.books)
    rows, written = [], {}
    start = cache_root()
    alone = replace(config, generation_rows=config.passages * config.samples)
    for name, settings, groups in (("alone", alone, [[d] for d in docs]), ("together", config, [docs])):
        os.environ["DOCAUDIT_CACHE"] = fresh_controls(start, name)
        cpu, wall = time.process_time(), time.perf_counter()
        out = [p for group in groups for _, p, _, _ in passages_of_books(group, lm, settings, SEED)]
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        written[name] = out
        tokens = sum(len(p) for p in out) * config.samples * config.suffix_tokens
        row = {
            "way": name,
            "books": len(docs),
            "rows_per_loop": settings.generation_prompts * config.samples,
            "tokens_generated": tokens,
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1),
            "tokens_per_wall_s": round(tokens / wall, 2),
            "tokens_per_cpu_s": round(tokens / cpu, 2),
            "threads": torch.get_num_threads(),
            "load_average": os.getloadavg()[0],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    same = written["alone"] == written["together"]
    gains = {"gain_wall": round(rows[0]["wall_s"] / rows[1]["wall_s"], 2)}
    gains["gain_cpu"] = round(rows[0]["cpu_s"] / rows[1]["cpu_s"], 2)
    print(json.dumps({"same_passages": same, **gains, "cpu": cpu_name()}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
