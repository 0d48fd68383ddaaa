#!/usr/bin/env python
"""End-to-end cost of every querying command beside the querier's own rate, in one run on one loaded model, and
the estimate ``--dry-run`` gives for it.

Each command (``score``, ``sequence``, ``report``, ``evaluate`` with the meta-classifier; default methods) runs
through docaudit's API on excerpts of the shared corpus's books, with a fresh statistics cache, while a hook on the
model's trunk counts its forward passes and the tokens each one carries (windows x length, padding and BOS
included), and a wrapper on the querier's backend calls times the model passes. A command's rate is the tokens
that went through the model, over all its passes (main and extra), per wall-clock second of the whole command; the
querier's rate is the same count for ``Querier.compute`` over one long document on the same model.
``over_querier`` is their ratio: 1.0 means the command costs only its model passes. ``passes_s`` is the time in
model passes and ``other_share`` the rest's share of the command's wall time (the goal: at most 10%);
``rest_ms_per_token`` is what the run itself recorded of its work beside the passes, loading and forests, per token
of its passes (``audit.costs.measured_run``; the documented defaults in ``config/rules.py`` come from it).

Estimates: the model's load time, the querier's scored tokens per second and the tokenizer's bytes per token are
measured at the start and kept in the cache's ``rates`` entries (as a real run keeps them; only these: the rest of
each command is estimated at its documented rate, or with ``--rates`` at what an earlier run measured), then each
command's cost model
(``docaudit.audit.costs.command_plan``, what ``--dry-run`` prints) is computed from the documents' lengths before
it runs; ``estimate_over_actual`` compares it with the command's wall time (the goal: within 1.5x either way).
The load is measured once and estimated once (``load``), outside the commands, which reuse the loaded model.

Examples::

    python scripts/benchmarks/bench_commands.py                 # embedded Gemma-3-270M
    python scripts/benchmarks/bench_commands.py --tiny --scale 0.2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import numpy as np  # noqa: E402

from benchmarks.common import CORPUS, cpu_name, tiny_llama  # noqa: E402

COMMANDS = ("score", "sequence", "report", "evaluate")
VARIANTS = {"score": "score", "sequence": "sequence", "report": "report", "evaluate": "evaluate+meta+blind+beyond"}


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


class PassTimer:
    """Seconds spent in the querier's model passes (``Querier.compute_many`` and ``Querier.compute``)."""

    def __init__(self):
        from docaudit.query.querier import Querier

        self.seconds, self.saved = 0.0, (Querier.compute_many, Querier.compute)
        for name, method in zip(("compute_many", "compute"), self.saved):
            setattr(Querier, name, self._timed(method))

    def _timed(self, method):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed

    def remove(self) -> None:
        from docaudit.query.querier import Querier

        Querier.compute_many, Querier.compute = self.saved


def estimate_s(request) -> tuple[float, dict]:
    """The request's estimated seconds as ``--dry-run`` computes them (``api.estimate``), less loading the model
    (the commands reuse the loaded one), and each step's."""
    from docaudit import api

    plan = api.estimate(request)[0].plan()
    steps = {s.name: s.seconds for s in plan.steps if s.name != "loading the model"}
    return round(sum(steps.values()), 2), {k: round(v, 2) for k, v in steps.items()}


def whole_books(folder: Path, group: str, n: int, skip: int = 0) -> Path:
    """Copies of ``n`` whole books of the corpus's ``group`` (after the first ``skip``)."""
    folder.mkdir(parents=True)
    for book in sorted((CORPUS / group).glob("*.txt"))[skip : skip + n]:
        shutil.copyfile(book, folder / book.name)
    return folder


def run_commands(
    lm,
    work: Path,
    scale: float,
    commands,
    earlier: Path | None = None,
    save: Path | None = None,
    issue: bool = False,
) -> dict:
    from docaudit import api
    from docaudit.audit.specs import EvaluationSpec, ReportSpec
    from docaudit.config import ContaminationConfig, MetaConfig, QueryConfig
    from docaudit.query import rates

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
    snippets = ContaminationConfig(snippets=n(10))
    evaluation, ev_query = EvaluationSpec(MetaConfig(folds=2), folds=2), QueryConfig()
    if issue:  # the sizes of the issue's runs: whole books, 10 snippets of 128 words, 6 + 6 books at 512 tokens
        sets["books"] = work / "books-issue"
        sets["books"].mkdir()
        for group in ("members", "nonmembers"):
            for book in sorted((CORPUS / group).glob("*.txt"))[10:12]:
                shutil.copyfile(book, sets["books"] / book.name)
        sets["cal_m"] = whole_books(work / "cal_m-issue", "members", 5)
        sets["cal_n"] = whole_books(work / "cal_n-issue", "nonmembers", 5)
        sets["ev_m"] = whole_books(work / "ev_m-issue", "members", 6, skip=5)
        sets["ev_n"] = whole_books(work / "ev_n-issue", "nonmembers", 6, skip=5)
        snippets = ContaminationConfig(snippets=10, snippet_words=128)
        evaluation, ev_query = EvaluationSpec(), QueryConfig(max_tokens=512)
    model = api.ModelSpec(lm)
    requests = {
        "score": api.ScoreRequest([sets["score"]], model),
        "sequence": api.SequenceRequest([sets["seq_m"]], [sets["seq_n"]], models=model),
        "report": api.ReportRequest(
            [sets["books"]], [sets["cal_m"]], [sets["cal_n"]], work / "report-out", models=model,
            spec=ReportSpec(snippets),
        ),
        "evaluate": api.EvaluateRequest(
            [sets["ev_m"]], [sets["ev_n"]], models=model, query=ev_query, spec=evaluation
        ),
    }  # fmt: skip
    runs = {
        "score": api.score,
        "sequence": api.sequence,
        "report": api.report,
        "evaluate": api.evaluate,
    }
    counter = Forwards(getattr(lm.model, "base_model", lm.model))  # the trunk: every pass goes through it
    timer = PassTimer()
    out = {}
    try:
        from docaudit.query.querier import Querier

        querier = Querier(lm, QueryConfig(gp=False), cache=None)
        text = " ".join(p.read_text() for p in sorted(sets["ev_m"].iterdir()))
        ids = querier.token_ids(text, "0" * 64)
        # the tokenizer's bytes per token, as a real run keeps it (the sizes an estimate starts from are bytes)
        rates.record_query(lm.config, 0, 0.0, whole=(len(text.encode("utf-8")), len(ids)))
        ids = ids[: max(2048, round(8192 * scale))]
        querier.compute(ids[:200])  # warm-up
        seconds = 0.0
        while seconds < 2 * rates.MIN_SECONDS:  # long enough to be kept as the rate, as a real query's is
            counter.reset()
            t = time.perf_counter()
            querier.compute(ids)
            seconds = time.perf_counter() - t
            if seconds < 2 * rates.MIN_SECONDS:
                ids = np.concatenate([ids, ids])
        out["querier"] = _row(counter, seconds)
        kept = work / "rates-measured"  # one rates folder for every command: what each run measures is kept
        rates.record_query(lm.config, len(ids) - 1, seconds)  # as a real query records its rate
        if earlier is not None:  # the machine's rates an earlier run measured: forests and each command's rest
            for name in (rates.FOREST_KEY, rates.OTHER_KEY):
                entry = earlier / rates._path(name).name
                if entry.exists():
                    shutil.copy(entry, rates._path(name))
        shutil.copytree(rates.cache_root() / rates.RATES_FOLDER, kept)
        planned = {}
        for name in commands:
            total, steps = estimate_s(requests[name])
            planned[name] = {"estimate_s": total, "estimate_steps": steps}
        for name in commands:
            os.environ["DOCAUDIT_CACHE"] = str(work / f"cache-{name}")  # every command starts from an empty cache
            (work / f"cache-{name}").mkdir()
            (work / f"cache-{name}" / rates.RATES_FOLDER).symlink_to(kept)
            counter.reset()
            timer.seconds = 0.0
            t, cpu = time.perf_counter(), time.process_time()
            runs[name](requests[name])
            out[name] = _row(counter, time.perf_counter() - t)
            out[name]["cpu_s"] = round(time.process_time() - cpu, 2)
            out[name]["over_querier"] = out[name]["tokens_per_s"] / out["querier"]["tokens_per_s"]
            out[name]["passes_s"] = round(timer.seconds, 2)
            out[name]["other_share"] = round(1 - timer.seconds / out[name]["seconds"], 3)
            out[name] |= planned[name]
            measured = rates.measured(rates.OTHER_KEY, f"{VARIANTS[name]} s/token")  # recorded by the run itself
            out[name]["rest_ms_per_token"] = None if measured is None else round(measured * 1e3, 4)
            out[name]["estimate_over_actual"] = round(planned[name]["estimate_s"] / out[name]["seconds"], 2)
    finally:
        counter.handle.remove()
        timer.remove()
    if save is not None:
        shutil.copytree(work / "rates-measured", save, dirs_exist_ok=True)
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
    ap.add_argument(
        "--issue-sizes",
        action="store_true",
        help="evaluate 6 + 6 whole books at --max-tokens 512 (5 folds), report 10 snippets of 128 words of 4 "
        "books calibrated on 5 + 5 whole books.",
    )
    ap.add_argument("--commands", default=",".join(COMMANDS), help="Comma-separated subset of the commands.")
    ap.add_argument("--json", default=None, help="Write the result as JSON to this file ('-': stdout).")
    ap.add_argument("--save-rates", type=Path, default=None, help="Keep the rates the commands measured here.")
    ap.add_argument(
        "--rates",
        type=Path,
        default=None,
        help="Estimate from rates an earlier run kept (--save-rates), as a user's "
        "second run does, instead of the querier's rate and the documented rest.",
    )
    args = ap.parse_args(argv)
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    if unknown := set(commands) - set(COMMANDS):
        ap.error(f"unknown commands: {', '.join(sorted(unknown))}")
    import transformers

    from docaudit.config import ModelConfig
    from docaudit.config.rules import LOAD_SECONDS
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
        config = ModelConfig(model=model)
        if model is None:  # the embedded GGUF is converted once before the load is timed (a first use only)
            load_model(config)
        estimated_load = LOAD_SECONDS[config.backend]  # the documented load (a measurement here would be the first's)
        t = time.perf_counter()
        lm = load_model(config)
        load = {"seconds": round(time.perf_counter() - t, 2), "estimate_s": round(estimated_load, 2)}
        rows = run_commands(lm, work, args.scale, commands, args.rates, args.save_rates, args.issue_sizes)
    result = {
        "model": lm.identity,
        "cpu": cpu_name(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "scale": args.scale,
        "issue_sizes": args.issue_sizes,
        "load": load,
        **rows,
    }
    if args.json == "-":
        print(json.dumps(result))
    elif args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    if args.json != "-":
        print(f"model {result['model']}, {result['cpu']}, load average {result['loadavg']}")
        print(f"loading the model: {load['seconds']:.1f} s, estimated {load['estimate_s']:.1f} s")
        print(
            f"{'':<10}{'seconds':>9}{'forwards':>10}{'tokens':>9}{'tok/fwd':>9}{'tok/s':>9}{'/ querier':>11}"
            f"{'passes s':>10}{'other':>7}{'estimate':>10}{'est/act':>9}"
        )
        for name, r in rows.items():
            more = ""
            if "over_querier" in r:
                more = (
                    f"{r['over_querier']:>11.2f}{r['passes_s']:>10.1f}{r['other_share']:>7.0%}"
                    f"{r['estimate_s']:>10.1f}{r['estimate_over_actual']:>9.2f}"
                )
            print(
                f"{name:<10}{r['seconds']:>9.1f}{r['forwards']:>10}{r['model_tokens']:>9}"
                f"{r['tokens_per_forward']:>9.0f}{r['tokens_per_s']:>9.0f}{more}"
            )
    return result


if __name__ == "__main__":
    main()
