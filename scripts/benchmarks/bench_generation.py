#!/usr/bin/env python
"""Generated tokens against scored tokens, before and after, in one run: CPU seconds per token of the synthetic
suffixes ``controls`` writes (``query.generate.continuations``) and of the suffixes it scores
(``query.conditional.bits_per_byte``), with this tree's code and with the code of an earlier commit, on the same
passages of the same books (docs/benchmarks.md).

Per book, at a preset of ``ControlsConfig``: ``audit.synthetic_controls.book_passages`` writes the suffixes (each
version into its own empty controls cache), then ``passage_scores`` scores the real and synthetic suffixes of this
tree's passages with each version of ``bits_per_byte`` (their largest difference is printed: the two must agree).
Every function runs once on a small input before it is timed, so the LM head's one-time preparation counts in
neither. CPU seconds are the process's (all threads); on a shared machine compare the ratios of one run.

Example::

    python scripts/benchmarks/bench_generation.py /work/shared/corpus/members/2719.txt --before 3407f3b --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchmarks.common import timed  # noqa: E402


def old_module(rev: str, path: str, name: str) -> types.ModuleType:
    """The module at ``path`` as it was at commit ``rev`` of this repository."""
    show = ["git", "-C", str(ROOT), "show", f"{rev}:{path}"]
    source = subprocess.run(show, capture_output=True, text=True, check=True)
    module = sys.modules[name] = types.ModuleType(name)
    exec(compile(source.stdout, f"{rev}:{path}", "exec"), module.__dict__)
    return module


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("books", nargs="+", help="text files")
    ap.add_argument("--before", required=True, help="the commit whose generate.py and conditional.py to compare")
    ap.add_argument("--preset", default="fast", help="a preset of ControlsConfig (default, fast)")
    ap.add_argument("--model", default=None, help="generator and target (default: the embedded Gemma)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args(argv)
    import numpy as np
    import torch

    from docaudit.audit import synthetic_controls as sc
    from docaudit.config import SEED, ControlsConfig, ModelConfig
    from docaudit.corpus.documents import load_documents
    from docaudit.query import conditional, generate
    from docaudit.query.models import load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    versions = {
        "after": (generate.continuations, conditional.bits_per_byte),
        "before": (
            old_module(args.before, "docaudit/query/generate.py", "generate_before").continuations,
            old_module(args.before, "docaudit/query/conditional.py", "conditional_before").bits_per_byte,
        ),
    }
    config = ControlsConfig.preset(args.preset)
    lm = load_model(ModelConfig(model=args.model))  # the embedded model's converted folder stays in the user's cache
    prompt = list(lm.tokenizer("A warm-up prompt of a few tokens.", add_special_tokens=False).input_ids)
    for write, score in versions.values():
        write(lm, [prompt], 2, 2, {"temperature": 1.0, "seed": 0, "batch_size": 2})
        score(lm, [("A warm-up context.", " And its suffix.")], 2)
    rows = []
    for doc in load_documents(args.books):
        row = {"book": doc.id, "preset": args.preset, "threads": torch.get_num_threads()}
        passages = {}
        for name, (write, _) in versions.items():
            os.environ["DOCAUDIT_CACHE"] = tempfile.mkdtemp(prefix=f"bench-generation-{name}-")
            sc.continuations = write
            (passages[name], _), row[f"generate_cpu_s_{name}"], row[f"generate_wall_s_{name}"] = timed(
                sc.book_passages, doc.text, doc.sha256, lm, config, SEED
            )
        values = {}
        for name, (_, score) in versions.items():
            sc.bits_per_byte = score
            (real, synthetic, scored), row[f"score_cpu_s_{name}"], row[f"score_wall_s_{name}"] = timed(
                sc.passage_scores, lm, passages["after"], config.batch_size
            )
            values[name] = np.concatenate([real, synthetic.ravel()])
        n = len(passages["after"])
        row |= {
            "passages": n,
            "tokens_generated": n * config.samples * config.suffix_tokens,
            "tokens_scored": scored,
            "score_max_abs_difference": float(np.nanmax(np.abs(values["after"] - values["before"]))),
            "load_average": os.getloadavg()[0],
        }
        for name in versions:
            generated = row[f"generate_cpu_s_{name}"] / row["tokens_generated"]
            row[f"generated_tokens_per_cpu_s_{name}"] = round(1 / generated, 2)
            row[f"scored_tokens_per_cpu_s_{name}"] = round(scored / row[f"score_cpu_s_{name}"], 2)
            row[f"generated_over_scored_{name}"] = round(generated * row[f"scored_tokens_per_cpu_s_{name}"], 2)
            row[f"book_cpu_s_{name}"] = round(row[f"generate_cpu_s_{name}"] + row[f"score_cpu_s_{name}"], 1)
        row["generated_after_over_scored_before"] = round(
            row["generate_cpu_s_after"] / row["tokens_generated"] * row["scored_tokens_per_cpu_s_before"], 2
        )
        row = {k: round(v, 2) if isinstance(v, float) and "difference" not in k else v for k, v in row.items()}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
