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
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench.common import cpu_name  # noqa: E402


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
    ap.add_argument(
        "--across-books",
        action="store_true",
        help="generation only: the books one decoding loop each, then together (ControlsConfig.generation_rows)",
    )
    args = ap.parse_args(argv)
    if args.across_books:
        return across_books(args)
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
