#!/usr/bin/env python
"""End-to-end cost of every querying command beside the querier's own rate, in one run on one loaded model.

Each command (``score``, ``sequence``, ``report``, ``evaluate``, default methods) runs through docaudit's API on
excerpts of the shared corpus's books, with a fresh cache, while a hook on the model's trunk counts its forward
passes and the tokens each one carries (windows x length, padding and BOS included). A command's rate is the
tokens that went through the model, over all its passes (main and extra), per wall-clock second of the whole
command; the querier's rate is the same count for ``Querier.compute`` over one long document on the same model.
``over_querier`` is their ratio: 1.0 means the command costs only its model passes.

Examples::

    python scripts/bench_commands.py                 # embedded Gemma-3-270M
    python scripts/bench_commands.py --tiny --scale 0.2 --json out.json
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
sys.path.insert(0, str(ROOT / "scripts"))

from bench.common import CORPUS, cpu_name, tiny_llama  # noqa: E402

COMMANDS = ("score", "sequence", "report", "evaluate")


class Forwards:
    """Forward passes of a torch module and the tokens in each (``input_ids.numel()``)."""

    def __init__(self, module):
        self.calls, self.tokens = 0, 0
        self.handle = module.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None:
            self.calls += 1
            self.tokens += int(ids.numel())

    def reset(self) -> None:
        self.calls, self.tokens = 0, 0


def write_excerpts(folder: Path, group: str, n: int, words: int, offset: int = 2000) -> Path:
    """``n`` files of ``words`` consecutive words from the corpus's ``group`` books (one per book, cycling)."""
    books = sorted((CORPUS / group).glob("*.txt"))
    folder.mkdir(parents=True)
    for i in range(n):
        text = books[i % len(books)].read_text(encoding="utf-8").split()
        start = offset + (i // len(books)) * words
        (folder / f"{group}-{i:03d}.txt").write_text(" ".join(text[start : start + words]) + "\n", encoding="utf-8")
    return folder


def run_commands(lm, work: Path, scale: float, commands) -> dict:
    from docaudit import api
    from docaudit.config import QueryConfig

    def n(x: int) -> int:
        return max(2, round(x * scale))

    sets = {
        "score": write_excerpts(work / "score", "members", 2, n(400)),
        "seq_m": write_excerpts(work / "seq_m", "members", n(20), 64),
        "seq_n": write_excerpts(work / "seq_n", "nonmembers", n(20), 64),
        "books": write_excerpts(work / "books", "members", n(4), max(1200, n(3000))),
        "cal_m": write_excerpts(work / "cal_m", "members", n(4), max(1200, n(3000)), offset=40000),
        "cal_n": write_excerpts(work / "cal_n", "nonmembers", n(4), max(1200, n(3000))),
        "ev_m": write_excerpts(work / "ev_m", "members", n(20), n(1500)),
        "ev_n": write_excerpts(work / "ev_n", "nonmembers", n(20), n(1500)),
    }
    runs = {
        "score": lambda: api.score([sets["score"]], lm),
        "sequence": lambda: api.sequence([sets["seq_m"]], [sets["seq_n"]], model=lm),
        "report": lambda: api.report(
            [sets["books"]], [sets["cal_m"]], [sets["cal_n"]], work / "report-out", model=lm, snippets=n(10)
        ),
        "evaluate": lambda: api.evaluate([sets["ev_m"]], [sets["ev_n"]], model=lm, folds=2, meta=None),
    }
    counter = Forwards(getattr(lm.model, "base_model", lm.model))  # the trunk: every pass goes through it
    out = {}
    try:
        from docaudit.query.querier import Querier

        querier = Querier(lm, QueryConfig(gp=False), cache=None)
        text = " ".join(p.read_text() for p in sorted(sets["ev_m"].iterdir()))
        ids = querier.token_ids(text, "0" * 64)[: max(2048, round(8192 * scale))]
        querier.compute(ids[:200])  # warm-up
        counter.reset()
        t = time.perf_counter()
        querier.compute(ids)
        seconds = time.perf_counter() - t
        out["querier"] = _row(counter, seconds)
        for name in commands:
            os.environ["DOCAUDIT_CACHE"] = str(work / f"cache-{name}")  # every command starts from an empty cache
            counter.reset()
            t = time.perf_counter()
            runs[name]()
            out[name] = _row(counter, time.perf_counter() - t)
            out[name]["over_querier"] = out[name]["tokens_per_s"] / out["querier"]["tokens_per_s"]
    finally:
        counter.handle.remove()
    return out


def _row(counter: Forwards, seconds: float) -> dict:
    return {
        "seconds": round(seconds, 3),
        "forwards": counter.calls,
        "model_tokens": counter.tokens,
        "tokens_per_forward": counter.tokens / counter.calls if counter.calls else 0.0,
        "tokens_per_s": counter.tokens / seconds if seconds > 0 else 0.0,
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="Hub id or local directory (default: embedded Gemma-3-270M).")
    ap.add_argument("--tiny", action="store_true", help="A small Llama built from its config (random weights).")
    ap.add_argument("--scale", type=float, default=1.0, help="Scale of the document sets (default 1).")
    ap.add_argument("--commands", default=",".join(COMMANDS), help="Comma-separated subset of the commands.")
    ap.add_argument("--json", default=None, help="Write the result as JSON to this file ('-': stdout).")
    args = ap.parse_args(argv)
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    if unknown := set(commands) - set(COMMANDS):
        ap.error(f"unknown commands: {', '.join(sorted(unknown))}")
    import transformers

    from docaudit.config import ModelConfig
    from docaudit.query.models import load_model

    transformers.utils.logging.set_verbosity_error()
    with tempfile.TemporaryDirectory(prefix="docaudit-bench-commands-") as tmp:
        work = Path(tmp)
        os.environ["DOCAUDIT_CACHE"] = str(work / "cache-load")
        model = args.model
        if args.tiny:
            books = sorted((CORPUS / "members").glob("*.txt"))[:3]
            texts = [b.read_text(encoding="utf-8")[:300_000] for b in books]
            model = str(tiny_llama(work / "tiny", texts, 4096, 128, 384, kv_heads=2, positions=2048))
        lm = load_model(ModelConfig(model=model))
        rows = run_commands(lm, work, args.scale, commands)
    result = {
        "model": lm.identity,
        "cpu": cpu_name(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "scale": args.scale,
        **rows,
    }
    if args.json == "-":
        print(json.dumps(result))
    elif args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    if args.json != "-":
        print(f"model {result['model']}, {result['cpu']}, load {result['loadavg']}")
        print(f"{'':<10}{'seconds':>9}{'forwards':>10}{'tokens':>9}{'tok/fwd':>9}{'tok/s':>9}{'/ querier':>11}")
        for name, r in rows.items():
            ratio = f"{r['over_querier']:>11.2f}" if "over_querier" in r else ""
            print(
                f"{name:<10}{r['seconds']:>9.1f}{r['forwards']:>10}{r['model_tokens']:>9}"
                f"{r['tokens_per_forward']:>9.0f}{r['tokens_per_s']:>9.0f}{ratio}"
            )
    return result


if __name__ == "__main__":
    main()
