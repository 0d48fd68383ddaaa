#!/usr/bin/env python
"""Throughput and memory of docaudit's querier, against the raw model forward and a reference-style loop.

Three variants run in one process on the same model, token ids, context C and stride S, interleaved
(``--repeats`` rounds, the order rotated every round; medians reported):

- ``forward``: the model's plain forward over the same windows with the same batching, returning the logits and
  nothing else -- the limit for anything that needs the model's output distribution;
- ``querier``: ``docaudit.query.querier.Querier.compute``, producing every statistic (log p, log p_max, Min-K%++ mu and
  sigma, the float64 GP column sums);
- ``naive``: how public reference implementations query: one window at a time (batch 1), the loss asked from the
  model through ``labels=``, the full softmax moved to the host, and a per-token Python loop computing the same
  statistics. It runs on the first windows only (``--naive-tokens``) and is reported in tokens/s.

Memory: the peak resident set size while the querier runs (Linux: the high-water mark is reset just before it),
next to the resident size of the loaded model.

Examples::

    python scripts/benchmarks/bench_querier.py                    # embedded Gemma-3-270M, a book from the shared corpus
    python scripts/benchmarks/bench_querier.py --tiny --json
    python scripts/benchmarks/bench_querier.py --variants querier --tiny --tokens 500000     # memory on a long document
    python scripts/benchmarks/bench_querier.py --preset llama-1b --tokens 1024 --json bench-1b.json  # 1B on CPU
    python scripts/benchmarks/bench_querier.py --llama7b-shaped --dtype bfloat16 --device cuda --peak-tflops 989
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.common import (  # noqa: E402
    cpu_name,
    default_documents,
    peak_rss_mb,
    read_documents,
    reset_peak_rss,
    rss_mb,
)
from benchmarks.gguf_bench import GGUF_VARIANTS, print_preset, run_preset  # noqa: E402
from benchmarks.llama_gguf import PRESETS, build  # noqa: E402
from benchmarks.synthetic import build_synthetic, matmul_params, touch_parameters  # noqa: E402
from docaudit.config import DTYPES, QUANTIZE, ModelConfig, QueryConfig
from docaudit.query.backends.transformers import _batches
from docaudit.query.models import load_model
from docaudit.query.querier import Querier
from docaudit.query.stats import scored_spans

VARIANTS = ("forward", "querier", "naive")


def token_ids(querier: Querier, texts: list[str], n: int) -> np.ndarray:
    """The first ``n`` tokens of the documents' concatenation (tokenized document by document)."""
    parts, have = [], 0
    for text in texts:
        ids = querier.lm.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        parts.append(np.asarray(ids, dtype=np.int32))
        have += len(ids)
        if have >= n:
            break
    ids = np.concatenate(parts)[:n]
    if len(ids) < n:
        print(f"note: the documents give only {len(ids)} tokens (asked for {n})", file=sys.stderr)
    return ids


# ----------------------------------------------------------------------------------------------- variants
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def batched_windows(querier: Querier, ids: np.ndarray):
    """The querier's windows (same layout, same BOS handling, same batches) as id tensors."""
    C, S = querier.query.context, querier.stride
    ids_t = torch.as_tensor(ids, dtype=torch.long, device=querier.device)
    out = []
    for batch in _batches(scored_spans(len(ids), C, S), querier.batch_size):
        windows = torch.stack([ids_t[s:e] for s, _, e in batch])
        if querier.bos is not None:
            windows = torch.nn.functional.pad(windows, (1, 0), value=querier.bos)
        out.append(windows)
    return out


@torch.inference_mode()
def run_forward(model, batches, device) -> None:
    for windows in batches:
        logits = model(input_ids=windows, use_cache=False).logits
        del logits
    sync(device)


@torch.inference_mode()
def run_querier(querier: Querier, ids: np.ndarray) -> None:
    querier.compute(ids)
    sync(querier.device)


def naive_spans(querier: Querier, n_ids: int, n_tokens: int):
    spans, scored = [], 0
    for span in scored_spans(n_ids, querier.query.context, querier.stride):
        spans.append(span)
        scored += span[2] - span[1]
        if scored >= n_tokens:
            break
    return spans, scored


def run_naive(model, ids: np.ndarray, spans, bos: int | None, vocab: int) -> None:
    """Reference-implementation style querying (what users would otherwise run)."""
    gp = torch.zeros(vocab, dtype=torch.float64)
    out = {"logp": [], "max_logp": [], "mu": [], "sigma": []}
    prefix = [] if bos is None else [bos]
    device = next(model.parameters()).device
    for start, first, end in spans:
        x = torch.tensor([prefix + ids[start:end].tolist()], dtype=torch.long, device=device)
        with torch.no_grad():
            logits = model(input_ids=x, labels=x).logits[0, len(prefix) :].float()
        probs = torch.softmax(logits, dim=-1).cpu()
        log_probs = torch.log_softmax(logits, dim=-1).cpu()
        for t in range(first, end):
            p, lp = probs[t - 1 - start], log_probs[t - 1 - start]
            out["logp"].append(lp[int(ids[t])].item())
            out["max_logp"].append(lp.max().item())
            mu = (p * lp).sum().item()
            out["mu"].append(mu)
            out["sigma"].append(math.sqrt(max((p * (lp - mu) ** 2).sum().item(), 0.0)))
            gp += p.double()
    return out


# ----------------------------------------------------------------------------------------------- main
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", default=None, help="Hub id, local HF directory or .gguf file (default: embedded Gemma-3-270M)."
    )
    ap.add_argument("--tiny", action="store_true", help="A small Llama built from its config (random weights).")
    ap.add_argument("--llama7b-shaped", action="store_true", help="Llama-2-7B's shape with random weights (for a GPU).")
    ap.add_argument(
        "--docs",
        nargs="*",
        type=Path,
        default=None,
        help="Document files, concatenated in order (default: the shared corpus's books).",
    )
    ap.add_argument("--tokens", type=int, default=2048, help="Tokens to query (default 2048).")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--stride", type=int, default=None, help="Default: context - 1.")
    ap.add_argument(
        "--backend",
        choices=("transformers", "llamacpp"),
        default="transformers",
        help="What runs the model (llamacpp: the .gguf in process; only the querier variant).",
    )
    ap.add_argument(
        "--kv-cache", choices=("f32", "f16"), default="f32", help="llamacpp: precision of the K/V cache (default f32)."
    )
    ap.add_argument("--dtype", choices=DTYPES, default="float32")
    ap.add_argument("--quantize", choices=QUANTIZE, default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="Comma-separated subset of forward,querier,naive.")
    ap.add_argument("--naive-tokens", type=int, default=512, help="Scored tokens for the naive loop (first windows).")
    ap.add_argument(
        "--batch-size", type=int, default=None, help="Windows per batch (default: the querier's automatic size)."
    )
    ap.add_argument("--chunk-rows", type=int, default=None, help="Override the querier's LM-head chunk (rows).")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice).")
    ap.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="Peak dense TFLOP/s of the device at this precision, for model FLOP utilisation.",
    )
    ap.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        help="Print one JSON object instead of the table (to FILE when given).",
    )
    ap.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="A Llama-shaped random-weight GGUF built once into the cache (float32, then Q4_K_M by llama.cpp's "
        "quantizer); variants llamacpp, transformers (float32 dequantization) and ceiling (raw llama.cpp forward).",
    )
    ap.add_argument(
        "--gguf-variants",
        default=",".join(GGUF_VARIANTS),
        help="With --preset: a subset of llamacpp,transformers,ceiling.",
    )
    args = ap.parse_args(argv)
    args.gguf_variants = [v.strip() for v in args.gguf_variants.split(",") if v.strip()]
    if unknown := set(args.gguf_variants) - set(GGUF_VARIANTS):
        ap.error(f"unknown --gguf-variants: {', '.join(sorted(unknown))}")
    if args.tiny and args.llama7b_shaped:
        ap.error("--tiny and --llama7b-shaped are exclusive")
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if unknown := set(args.variants) - set(VARIANTS):
        ap.error(f"unknown variants: {', '.join(sorted(unknown))}")
    if args.backend != "transformers":
        if args.tiny or args.llama7b_shaped:
            ap.error("--backend llamacpp queries a .gguf (--model PATH.gguf or the embedded default)")
        args.variants = ["querier"]  # forward and naive need the torch module
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()

    paths = args.docs or default_documents()
    texts = read_documents(paths, chars_needed=6 * args.tokens + 10_000)
    if args.preset:
        from docaudit.query.cache import cache_root

        gguf = build(args.preset, cache_root(), texts)["q4_k_m"]
        result = run_preset(gguf, texts, args)
        emit(result, args.json, lambda: print_preset(result))
        return result
    t0 = time.perf_counter()
    if args.tiny or args.llama7b_shaped:
        lm = build_synthetic("tiny" if args.tiny else "llama7b", texts[:4], args)
    else:
        lm = load_model(
            ModelConfig(
                model=args.model,
                dtype=args.dtype,
                device=args.device,
                quantize=args.quantize,
                backend=args.backend,
                kv_cache=args.kv_cache,
            )
        )
    load_s = time.perf_counter() - t0
    torch_model = isinstance(lm.model, torch.nn.Module)
    if torch_model:
        touch_parameters(lm.model)
    gc.collect()
    model_rss = rss_mb()

    querier = Querier(lm, QueryConfig(context=args.context, stride=args.stride, batch_size=args.batch_size, gp=True))
    if args.chunk_rows:
        querier.backend.chunk_rows = args.chunk_rows
    ids = token_ids(querier, texts, args.tokens)
    del texts
    n_scored = len(ids) - 1
    device = querier.device

    batches = batched_windows(querier, ids) if "forward" in args.variants else None
    nspans, naive_scored = naive_spans(querier, len(ids), args.naive_tokens)
    runners = {
        "forward": lambda: run_forward(lm.model, batches, device),
        "querier": lambda: run_querier(querier, ids),
        "naive": lambda: run_naive(lm.model, ids, nspans, querier.bos, lm.vocab_size),
    }
    tokens_of = {"forward": n_scored, "querier": n_scored, "naive": naive_scored}

    # Warm-up on one window each (first-call costs: allocator, kernels, oneDNN weight packing).
    warm_ids = ids[: min(len(ids), args.context + 1)]
    run_querier(querier, warm_ids)
    if "forward" in args.variants:
        run_forward(lm.model, batched_windows(querier, warm_ids), device)
    querier.release_buffers()
    gc.collect()

    times = {v: [] for v in args.variants}
    peak = peak_reset = None
    order = list(args.variants)
    if "querier" in order:  # the querier runs first, so its peak memory is measured on its own
        order.remove("querier")
        order.insert(0, "querier")
    for rep in range(args.repeats):
        for v in order[rep % len(order) :] + order[: rep % len(order)]:
            if v == "querier" and peak is None:
                gc.collect()
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                rss_before = rss_mb()
                peak_reset = reset_peak_rss()
            t = time.perf_counter()
            runners[v]()
            times[v].append(time.perf_counter() - t)
            if v == "querier" and peak is None:
                peak = peak_rss_mb()
                gpu_peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None

    med = {v: statistics.median(ts) for v, ts in times.items()}
    tps = {v: tokens_of[v] / med[v] for v in med}
    result = {
        "model": lm.identity,
        "backend": args.backend,
        "kv_cache": args.kv_cache if args.backend == "llamacpp" else None,
        "device": str(device) if device.type != "cpu" else f"cpu ({cpu_name()}, {torch.get_num_threads()} threads)",
        "dtype": args.dtype,
        "quantize": args.quantize,
        "tokens": int(len(ids)),
        "scored_tokens": n_scored,
        "context": args.context,
        "stride": querier.stride,
        "batch_size": querier.batch_size,
        "chunk_rows": querier.backend.chunk_rows,
        "vocab_size": lm.vocab_size,
        "repeats": args.repeats,
        "naive_tokens": naive_scored if "naive" in med else None,
        "forward_tokens_per_s": tps.get("forward"),
        "querier_tokens_per_s": tps.get("querier"),
        "naive_tokens_per_s": tps.get("naive"),
        "querier_over_forward": tps["querier"] / tps["forward"] if {"querier", "forward"} <= tps.keys() else None,
        "querier_over_naive": tps["querier"] / tps["naive"] if {"querier", "naive"} <= tps.keys() else None,
        "forward_over_naive": tps["forward"] / tps["naive"] if {"forward", "naive"} <= tps.keys() else None,
        "seconds": {v: [round(t, 4) for t in ts] for v, ts in times.items()},
        "model_rss_mb": round(model_rss, 1),
        "querier_rss_before_mb": round(rss_before, 1) if peak is not None else None,
        "querier_peak_rss_mb": round(peak, 1) if peak is not None else None,
        "querier_peak_over_model_mb": round(peak - model_rss, 1) if peak is not None else None,
        "peak_rss_reset": peak_reset,
        "querier_gpu_peak_mb": round(gpu_peak, 1) if peak is not None and gpu_peak is not None else None,
        "load_s": round(load_s, 2),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "torch": torch.__version__,
        "params": matmul_params(lm.model) if torch_model else None,
        "param_mb": round(
            sum(p.numel() * p.element_size() for p in lm.model.parameters()) / 2**20
            if torch_model
            else lm.model.path.stat().st_size / 2**20,
            1,
        ),
    }
    if args.peak_tflops and torch_model:
        flops = 2 * result["params"]
        result["peak_tflops"] = args.peak_tflops
        for v in tps:
            result[f"{v}_mfu"] = flops * tps[v] / (args.peak_tflops * 1e12)
    emit(result, args.json, lambda: print_table(result, tps))
    return result


def emit(result: dict, json_to: str | None, table) -> None:
    """The result as one JSON object (stdout for ``-``, else the file) or as a table."""
    if json_to is None:
        table()
    elif json_to == "-":
        print(json.dumps(result))
    else:
        Path(json_to).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {json_to}")


def print_table(r: dict, tps: dict) -> None:
    size = f"{r['params'] / 1e6:.1f} M matmul params" if r["params"] else f"{r['param_mb']} MB file"
    print(f"model   {r['model']}  ({size}, vocab {r['vocab_size']}, backend {r['backend']})")
    print(f"device  {r['device']}  dtype {r['dtype']}{'  quantize ' + r['quantize'] if r['quantize'] else ''}")
    print(
        f"tokens  {r['tokens']}  C={r['context']} S={r['stride']} batch={r['batch_size']} windows, "
        f"head chunk={r['chunk_rows']} rows, {r['repeats']} repeats, load {r['loadavg']}"
    )
    print()
    print(
        f"{'variant':<10}{'tokens':>9}{'median s':>11}{'tokens/s':>11}" + (f"{'MFU':>8}" if "peak_tflops" in r else "")
    )
    for v in tps:
        n = r["naive_tokens"] if v == "naive" else r["scored_tokens"]
        line = f"{v:<10}{n:>9}{statistics.median(r['seconds'][v]):>11.3f}{tps[v]:>11.1f}"
        if "peak_tflops" in r:
            line += f"{r[f'{v}_mfu']:>8.1%}"
        print(line)
    print()
    for k in ("querier_over_forward", "querier_over_naive", "forward_over_naive"):
        if r[k] is not None:
            print(f"{k.replace('_over_', ' / '):<20}{r[k]:.2f}")
    if r["querier_peak_rss_mb"] is not None:
        print(
            f"memory: model {r['model_rss_mb']:.0f} MB resident; querier peak {r['querier_peak_rss_mb']:.0f} MB "
            f"(+{r['querier_peak_over_model_mb']:.0f} MB)" + ("" if r["peak_rss_reset"] else " [peak since start]")
        )


if __name__ == "__main__":
    main()
