#!/usr/bin/env python
"""``controls``' work per book through llama.cpp, rows side by side against one row at a time, and against the
transformers path, in one run on the same embedded Gemma: CPU seconds of the synthetic suffixes it writes
(``audit.synthetic_controls.book_passages``) and of the suffixes it scores (``passage_scores``), per generated and
per scored token (docs/benchmarks.md, "llama.cpp rows side by side").

Three ways, each into its own empty cache folder: ``llamacpp`` (this tree: ``llama_rows``, many rows per decode
call, logits only where used), ``llamacpp_before`` (the backend's ``sample`` of commit ``--before``, one token of
one row per decode call, and every suffix scored as one whole window with every position's logits, as
``conditional`` did there) and ``transformers`` (the GGUF converted once, ``query.decode`` and the trunk with the
prepared LM head). Every way runs once on a small input first. CPU seconds are the process's (all threads); on a
shared machine compare the ratios of one run, and read the load average printed with them.

Example::

    python scripts/benchmarks/bench_llama_rows.py /work/shared/corpus/members/10031.txt --before c2c6ad7
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import types
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchmarks.common import cpu_name, timed  # noqa: E402


def old_backend_class(rev: str):
    """The ``LlamaCppBackend`` class of ``docaudit/query/backends/llamacpp.py`` at commit ``rev`` (its registration
    run against an emptied slot of the registry, then the registry restored)."""
    from docaudit.query.backends.base import BACKENDS

    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:docaudit/query/backends/llamacpp.py"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    held = BACKENDS.pop("llamacpp")
    module = sys.modules["llamacpp_before"] = types.ModuleType("llamacpp_before")
    try:
        exec(compile(source, f"{rev}:llamacpp.py", "exec"), module.__dict__)
    finally:
        BACKENDS["llamacpp"] = held
    return module.LlamaCppBackend


@contextmanager
def one_row_at_a_time(old):
    """This tree's llama.cpp backend with the sampling of ``old`` and the whole-window scoring of every suffix."""
    from docaudit.query.backends.base import Backend
    from docaudit.query.backends.llamacpp import LlamaCppBackend

    saved = {name: LlamaCppBackend.__dict__[name] for name in ("sample", "suffix_logprob")}
    LlamaCppBackend.sample, LlamaCppBackend._step = old.sample, old._step
    LlamaCppBackend.suffix_logprob = Backend.suffix_logprob
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(LlamaCppBackend, name, value)
        del LlamaCppBackend._step


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("book", help="a text file")
    ap.add_argument("--before", required=True, help="the commit whose llama.cpp sampling to compare")
    ap.add_argument("--preset", default="fast", help="a preset of ControlsConfig (default: fast)")
    ap.add_argument("--ways", default="llamacpp,llamacpp_before,transformers", help="the ways to run, in order")
    ap.add_argument("--threads", type=int, help="torch threads, and so llama.cpp's (default: torch's)")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args(argv)
    import torch

    from docaudit.audit import synthetic_controls as sc
    from docaudit.config import SEED, ControlsConfig, ModelConfig
    from docaudit.corpus.documents import load_documents
    from docaudit.query.conditional import bits_per_byte
    from docaudit.query.cpus import available_cpus
    from docaudit.query.generate import continuations
    from docaudit.query.models import load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    config = ControlsConfig.preset(args.preset)
    [doc] = load_documents([args.book])
    ways = [(way, way.split("_")[0]) for way in args.ways.split(",")]
    models = {model: load_model(ModelConfig(backend=model)) for model in dict.fromkeys(m for _, m in ways)}
    old = old_backend_class(args.before)
    for lm in models.values():
        prompt = list(lm.tokenizer("A warm-up prompt of a few tokens.", add_special_tokens=False).input_ids)
        continuations(lm, [prompt], 2, 2, {"temperature": 1.0, "seed": 0, "batch_size": 2})
        bits_per_byte(lm, [("A warm-up context.", " And its suffix.")], 2)
    rows, written = [], {}
    for way, model in ways:
        os.environ["DOCAUDIT_CACHE"] = tempfile.mkdtemp(prefix=f"bench-llama-rows-{way}-")
        lm = models[model]
        with one_row_at_a_time(old) if way == "llamacpp_before" else _nothing():
            (passages, _), gen_cpu, gen_wall = timed(sc.book_passages, doc.text, doc.sha256, lm, config, SEED)
            (real, synthetic, n_scored), score_cpu, score_wall = timed(
                sc.passage_scores, lm, passages, config.batch_size
            )
        written[way] = passages
        generated = len(passages) * config.samples * config.suffix_tokens
        row = {
            "way": way,
            "book": doc.id,
            "preset": args.preset,
            "generated_tokens": generated,
            "scored_tokens": n_scored,
            "generate_cpu_s": round(gen_cpu, 1),
            "generate_wall_s": round(gen_wall, 1),
            "score_cpu_s": round(score_cpu, 1),
            "score_wall_s": round(score_wall, 1),
            "book_cpu_s": round(gen_cpu + score_cpu, 1),
            "generated_ms_cpu_per_token": round(1e3 * gen_cpu / generated, 2),
            "scored_ms_cpu_per_token": round(1e3 * score_cpu / n_scored, 2),
            "generated_over_scored": round(gen_cpu / generated / (score_cpu / n_scored), 2),
            "load_average": round(os.getloadavg()[0], 2),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    by = {r["way"]: r for r in rows}

    def ratio(a: str, b: str, key: str) -> float | None:
        return round(by[a][key] / by[b][key], 2) if a in by and b in by else None

    summary = {
        "cpu": cpu_name(),
        "cpus_available": available_cpus(),
        "torch_threads": torch.get_num_threads(),
        "same_suffixes_rows_and_before": written.get("llamacpp") == written.get("llamacpp_before"),
        "generation_speedup_over_before": ratio("llamacpp_before", "llamacpp", "generate_cpu_s"),
        "scoring_speedup_over_before": ratio("llamacpp_before", "llamacpp", "score_cpu_s"),
        "book_cpu_llamacpp_over_transformers": ratio("llamacpp", "transformers", "book_cpu_s"),
    }
    print(json.dumps(summary), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    return 0


@contextmanager
def _nothing():
    yield


if __name__ == "__main__":
    sys.exit(main())
