#!/usr/bin/env python
"""Peak memory of the llama.cpp backend querying one long document, against the document's length.

The document (the shared corpus's books concatenated, their token ids repeated when the books give fewer than the
longest length asked for) is queried at each length N in its own process, on the same Llama-shaped Q4_K_M GGUF
built as ``bench_querier.py --preset`` builds it (random weights, llama.cpp's own quantizer), with C = 128 and
S = 127 by default. Per length:

- ``peak_rss_mb``: the process's peak resident size over its life (``ru_maxrss`` of the child, from ``wait4``):
  loading and querying together;
- ``load_peak_mb`` and ``model_rss_mb``: the peak while loading the model and querying one window, and the
  resident size after them (the backend's buffers allocated); ``rss_after_mb``: the resident size after the
  imports, the tokenizer, opening llama.cpp's context and the first window;
- ``query_peak_mb``: the peak while ``Querier.compute`` queries the document (the kernel's mark reset just before);
- ``document_arrays_mb``: what must grow with N: the token ids passed in, the backend's ``[scored, 4]`` float32
  results and the TokenStats made from them (token ids, four float32 columns), which exist together at the end
  of ``compute``; measured from the arrays themselves;
- ``query_peak_less_document_mb``: ``query_peak_mb`` less ``document_arrays_mb``: the model's and the backend's
  memory while querying, which must not depend on N.

The run is **flat** when ``query_peak_less_document_mb`` varies by at most ``--tolerance-mb`` over the lengths;
the growth of the query's peak per added token is printed beside the arrays' own bytes per token. Linux only
(``/proc/self/status``, ``/proc/self/clear_refs``).

    python scripts/benchmarks/bench_memory.py                                    # llama-tiny at 2k, 50k and 500k tokens
    python scripts/benchmarks/bench_memory.py --preset llama-1b --tokens 2000,50000 --json memory-1b.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import numpy as np  # noqa: E402

from benchmarks.common import cpu_name, default_documents, read_documents, reset_peak_rss  # noqa: E402
from benchmarks.llama_gguf import PRESETS, build  # noqa: E402


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise OSError(f"no {field} in /proc/self/status")


def child(gguf: str, ids_path: str, n: int, context: int, threads: int) -> dict:
    """Load the model, query one window, then the whole document of ``n`` tokens; the resident sizes on the way."""
    import torch

    torch.set_num_threads(threads)
    from docaudit.config import ModelConfig, QueryConfig
    from docaudit.query.models import load_model
    from docaudit.query.querier import Querier

    steps = {"imports": _status_mb("VmRSS")}
    lm = load_model(ModelConfig(model=gguf, backend="llamacpp"))
    steps["tokenizer"] = _status_mb("VmRSS")  # the GGUF's tokenizer and vocabulary, no weights yet
    querier = Querier(lm, QueryConfig(context=context), None)
    steps["llama_cpp_context"] = _status_mb("VmRSS")  # the weights (memory-mapped) and llama.cpp's buffers
    ids = np.load(ids_path, mmap_mode="r")[:n].copy()
    querier.compute(ids[: context + 1])  # the backend's work buffers at their steady size
    model_rss, load_peak = _status_mb("VmRSS"), _status_mb("VmHWM")
    steps["first_window"] = model_rss
    reset = reset_peak_rss()
    before = _status_mb("VmRSS")
    started = time.perf_counter()
    stats = querier.compute(ids)
    seconds = time.perf_counter() - started
    query_peak = _status_mb("VmHWM")
    columns = (stats.token_ids, stats.logp, stats.max_logp, stats.mu, stats.sigma)
    results = stats.n_scored * 4 * np.dtype(np.float32).itemsize  # the backend's [scored, 4] rows
    arrays = ids.nbytes + sum(a.nbytes for a in columns) + results
    return {
        "tokens": int(len(ids)),
        "scored": stats.n_scored,
        "seconds": round(seconds, 2),
        "tokens_per_s": round(stats.n_scored / seconds, 1),
        "rss_after_mb": {k: round(v, 1) for k, v in steps.items()},
        "load_peak_mb": round(load_peak, 1),
        "model_rss_mb": round(model_rss, 1),
        "rss_before_query_mb": round(before, 1),
        "query_peak_mb": round(query_peak, 1) if reset else None,
        "document_arrays_mb": round(arrays / 2**20, 2),
        "threads": threads,
    }


def _spawn(args: list[str], what: str) -> tuple[dict, int]:
    """This script with ``args`` in a process of its own: its JSON line and its peak RSS in KB (``wait4``). A
    child's ``ru_maxrss`` counts the launching process's resident size at the start too, so this process stays
    small (no torch, no model): the model is built and the document tokenized in a child as well."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, __file__, *args], stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"error: {what} failed:\n{err.read()[-3000:]}")
        return json.loads(out.read().strip().splitlines()[-1]), usage.ru_maxrss


def run_child(gguf: str, ids_path: Path, n: int, context: int, threads: int) -> dict:
    """``child`` in a process of its own; its peak RSS is the kernel's for that process."""
    launcher = _status_mb("VmRSS")
    row, maxrss_kb = _spawn(["--child", gguf, str(ids_path), str(n), str(context), str(threads)], f"the {n}-token run")
    row["peak_rss_mb"] = round(maxrss_kb / 1024, 1)  # KB on Linux
    row["launcher_rss_mb"] = round(launcher, 1)
    if row["query_peak_mb"] is not None:
        row["query_peak_less_document_mb"] = round(row["query_peak_mb"] - row["document_arrays_mb"], 1)
    return row


def prepare(preset: str, n: int, docs: list[str], ids_path: str) -> dict:
    """Build the preset's GGUF (once, into the cache) and save ``n`` token ids of the documents under its
    tokenizer, repeated when the documents give fewer."""
    import transformers

    from benchmarks.gguf_bench import token_ids
    from docaudit.query.cache import cache_root

    transformers.utils.logging.set_verbosity_error()
    texts = read_documents([Path(d) for d in docs] if docs else default_documents(), chars_needed=5 * n)
    gguf = build(preset, cache_root(), texts)["q4_k_m"]
    ids = token_ids(gguf, texts, n)
    np.save(ids_path, np.resize(ids, n).astype(np.int32))
    return {"gguf": str(gguf), "distinct": int(len(ids)), "file_mb": round(gguf.stat().st_size / 2**20, 1)}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="llama-tiny", help="The GGUF (default llama-tiny).")
    ap.add_argument("--tokens", default="2000,50000,500000", help="Comma-separated document lengths in tokens.")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp's threads (default 1: memory is measured).")
    ap.add_argument("--docs", nargs="*", type=Path, default=None, help="Document files (default: the shared corpus).")
    ap.add_argument(
        "--tolerance-mb",
        type=float,
        default=16.0,
        help="Largest spread of the query's peak less the document's arrays over the lengths for 'flat' "
        "(default 16 MB).",
    )
    ap.add_argument("--json", nargs="?", const="-", default=None, help="One JSON object (to FILE when given).")
    args = ap.parse_args(argv)
    try:
        args.tokens = sorted({int(t) for t in args.tokens.split(",") if t.strip()})
    except ValueError:
        ap.error(f"--tokens must be comma-separated integers, got {args.tokens!r}")
    if not args.tokens or args.tokens[0] <= args.context:
        ap.error(f"--tokens: every length must exceed the context ({args.context})")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="docaudit-bench-") as tmp:
        ids_path = Path(tmp) / "ids.npy"
        docs = [str(d) for d in args.docs or []]
        made, _ = _spawn(["--prepare", args.preset, str(args.tokens[-1]), str(ids_path), *docs], "building the model")
        result = {
            "model": Path(made["gguf"]).name,
            "preset": args.preset,
            "file_mb": made["file_mb"],
            "context": args.context,
            "stride": args.context - 1,
            "threads": args.threads,
            "document_tokens_from_text": made["distinct"],
            "cpu": cpu_name(),
            "loadavg_before": [round(x, 2) for x in os.getloadavg()],
            "runs": [run_child(made["gguf"], ids_path, n, args.context, args.threads) for n in args.tokens],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        }
    summarize(result, args.tolerance_mb)
    if args.json is None:
        print_table(result)
    elif args.json == "-":
        print(json.dumps(result))
    else:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")
    return result


def summarize(r: dict, tolerance_mb: float) -> None:
    """Spread of the model's and backend's memory over the lengths, and bytes per token of the growth."""
    runs = r["runs"]
    r["tolerance_mb"] = tolerance_mb
    if any(x["query_peak_mb"] is None for x in runs):
        r["flat"] = None  # the peak mark could not be reset: only the lifetime peaks are comparable
        return
    rest = [x["query_peak_less_document_mb"] for x in runs]
    r["query_peak_less_document_spread_mb"] = round(max(rest) - min(rest), 1)
    r["flat"] = r["query_peak_less_document_spread_mb"] <= tolerance_mb
    if len(runs) > 1:
        first, last = runs[0], runs[-1]
        added = last["tokens"] - first["tokens"]
        r["query_peak_growth_bytes_per_token"] = round(
            (last["query_peak_mb"] - first["query_peak_mb"]) * 2**20 / added, 1
        )
        r["document_arrays_bytes_per_token"] = round(
            (last["document_arrays_mb"] - first["document_arrays_mb"]) * 2**20 / added, 1
        )


def print_table(r: dict) -> None:
    print(f"model   {r['model']} ({r['file_mb']} MB), {r['cpu']}, load {r['loadavg_before']} -> {r['loadavg_after']}")
    print(f"C={r['context']} S={r['stride']}; the document repeats its first {r['document_tokens_from_text']} tokens")
    head = ("tokens", "tokens/s", "peak RSS", "load peak", "model", "query peak", "doc arrays", "query - doc")
    print("".join(f"{h:>12}" for h in head) + "   (MB)")
    for x in r["runs"]:
        cells = (x["tokens"], x["tokens_per_s"], x["peak_rss_mb"], x["load_peak_mb"], x["model_rss_mb"])
        cells += (x["query_peak_mb"], x["document_arrays_mb"], x.get("query_peak_less_document_mb"))
        print("".join(f"{c:>12}" for c in cells))
    if r["flat"] is None:
        print("the peak-RSS mark cannot be reset here: only the lifetime peaks are measured")
        return
    verdict = "flat" if r["flat"] else "NOT flat"
    print(
        f"query peak less the document's arrays: spread {r['query_peak_less_document_spread_mb']} MB ({verdict} "
        f"within {r['tolerance_mb']} MB)"
    )
    if "query_peak_growth_bytes_per_token" in r:
        print(
            f"query peak growth {r['query_peak_growth_bytes_per_token']} bytes per added token; the document's "
            f"arrays {r['document_arrays_bytes_per_token']}"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        gguf, ids_path, n, context, threads = sys.argv[2:7]
        print(json.dumps(child(gguf, ids_path, int(n), int(context), int(threads))))
    elif sys.argv[1:2] == ["--prepare"]:
        preset, n, ids_path, *docs = sys.argv[2:]
        print(json.dumps(prepare(preset, int(n), docs, ids_path)))
    else:
        main()
