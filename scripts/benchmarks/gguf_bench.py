"""The querier on a quantized Llama-shaped GGUF against its limit (``bench_querier.py --preset``).

Variants, each in its own process (so that its peak resident memory is its own), on the same token ids, context
and stride:

- ``llamacpp``: docaudit's llama.cpp backend on the Q4_K_M file (every statistic of every position);
- ``transformers``: docaudit's transformers backend on the float32 dequantization of the same file;
- ``ceiling``: llama.cpp's raw forward over the same windows, all positions' logits and nothing else.

A variant process prints one JSON object: ``tokens_per_s`` (median over ``repeats``) and ``peak_rss_mb`` (the
process's high-water mark: model and querying together)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchmarks.common import cpu_name, peak_rss_mb  # noqa: E402

GGUF_VARIANTS = ("llamacpp", "transformers", "ceiling")
STATISTICS = ("logp", "max_logp", "mu", "sigma")  # per scored position, compared between the two queriers


def _querier(gguf: Path, backend: str, context: int, stride: int | None):
    from docaudit.config import ModelConfig, QueryConfig
    from docaudit.query.models import load_model
    from docaudit.query.querier import Querier

    lm = load_model(ModelConfig(model=str(gguf), backend=backend))
    return Querier(lm, QueryConfig(context=context, stride=stride, gp=False), cache=None)


def run_variant(
    variant: str, gguf: Path, ids: np.ndarray, context: int, stride: int | None, repeats: int, save: Path | None = None
) -> dict:
    """Time one variant in this process (a warm-up window first); a querier variant's statistics of the last run
    are written to ``save`` (``.npz``), for the agreement between the backends."""
    from docaudit.query.stats import scored_spans

    querier = _querier(gguf, "transformers" if variant == "transformers" else "llamacpp", context, stride)
    if variant == "ceiling":
        backend, bos = querier.backend, querier.bos
        spans = scored_spans(len(ids), context, querier.stride)
        windows = [[bos] * (bos is not None) + ids[s:e].tolist() for s, _, e in spans]

        def run(_ids):
            for window in windows if len(_ids) == len(ids) else windows[:1]:
                backend._decode(window)
    else:

        def run(_ids):
            return querier.compute(_ids)

    run(ids[: context + 1])
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        stats = run(ids)
        times.append(time.perf_counter() - t)
    if save is not None and stats is not None:
        np.savez(save, **{name: getattr(stats, name) for name in STATISTICS})
    return {
        "tokens_per_s": (len(ids) - 1) / statistics.median(times),
        "seconds": [round(t, 4) for t in times],
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "threads": _threads(),
    }


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def token_ids(gguf: Path, texts: list[str], n: int) -> np.ndarray:
    """The first ``n`` tokens of the texts under the GGUF's tokenizer (without special tokens)."""
    from docaudit.query.backends.llamacpp import gguf_tokenizer
    from docaudit.untrusted import sha256_untrusted

    tokenizer = gguf_tokenizer(gguf, sha256_untrusted(gguf, "weights"))
    parts, have = [], 0
    for text in texts:
        parts.append(np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int32))
        have += len(parts[-1])
        if have >= n:
            break
    return np.concatenate(parts)[:n]


def agreement(a: dict, b: dict) -> dict:
    """How far the llama.cpp querier's statistics ``a`` are from the transformers querier's ``b`` on the same
    positions: max and mean absolute difference per statistic, the loss (mean -log p) of each, and, as the scale
    the differences are read against, the spread of log p over positions and the mean absolute difference of log p
    when one of them is shifted by one position (what a misaligned window would give)."""
    out = {}
    for name in STATISTICS:
        d = np.abs(a[name].astype(np.float64) - b[name])
        out[name] = {"max_abs_diff": float(d.max()), "mean_abs_diff": float(d.mean())}
    out["loss"] = {"llamacpp": float(-a["logp"].mean()), "transformers": float(-b["logp"].mean())}
    out["logp_std"] = float(b["logp"].std())
    out["logp_shifted_mean_abs_diff"] = float(np.abs(a["logp"][1:].astype(np.float64) - b["logp"][:-1]).mean())
    return out


def run_preset(gguf: Path, texts: list[str], args) -> dict:
    """Every variant in its own process on the same ids; ratios to the ceiling and between the backends."""
    ids = token_ids(gguf, texts, args.tokens)
    out = {
        "model": gguf.name,
        "preset": args.preset,
        "file_mb": round(gguf.stat().st_size / 2**20, 1),
        "tokens": int(len(ids)),
        "context": args.context,
        "stride": args.stride or args.context - 1,
        "repeats": args.repeats,
        "cpu": cpu_name(),
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
    }
    with tempfile.TemporaryDirectory(prefix="docaudit-bench-") as tmp:
        np.save(Path(tmp) / "ids.npy", ids)
        for v in args.gguf_variants:
            cmd = [sys.executable, __file__, v, str(gguf), str(Path(tmp) / "ids.npy"), str(args.context)]
            cmd += [str(args.stride or args.context - 1), str(args.repeats), str(Path(tmp) / f"{v}.npz")]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"variant {v} failed:\n{done.stderr[-3000:]}")
            out[v] = json.loads(done.stdout.strip().splitlines()[-1])
        if {"llamacpp", "transformers"} <= out.keys():
            saved = {v: dict(np.load(Path(tmp) / f"{v}.npz")) for v in ("llamacpp", "transformers")}
            out["agreement"] = agreement(saved["llamacpp"], saved["transformers"])
    out["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    if "ceiling" in out:
        for v in ("llamacpp", "transformers"):
            if v in out:
                out[v]["over_ceiling"] = out[v]["tokens_per_s"] / out["ceiling"]["tokens_per_s"]
    if {"llamacpp", "transformers"} <= out.keys():
        out["llamacpp_over_transformers"] = out["llamacpp"]["tokens_per_s"] / out["transformers"]["tokens_per_s"]
        out["llamacpp_memory_share"] = out["llamacpp"]["peak_rss_mb"] / out["transformers"]["peak_rss_mb"]
    return out


def print_preset(r: dict) -> None:
    print(f"model   {r['model']} ({r['file_mb']} MB), {r['cpu']}, load {r['loadavg_before']} -> {r['loadavg_after']}")
    print(f"tokens  {r['tokens']}  C={r['context']} S={r['stride']}  {r['repeats']} repeats")
    print(f"{'variant':<14}{'tokens/s':>10}{'peak RSS MB':>13}{'/ ceiling':>11}")
    for v in GGUF_VARIANTS:
        if v in r:
            ratio = r[v].get("over_ceiling")
            print(
                f"{v:<14}{r[v]['tokens_per_s']:>10.1f}{r[v]['peak_rss_mb']:>13.0f}"
                + (f"{ratio:>11.2f}" if ratio else "")
            )
    if "agreement" in r:
        g = r["agreement"]
        print(
            f"llama.cpp vs transformers: log p max |diff| {g['logp']['max_abs_diff']:.2e}, mean "
            f"{g['logp']['mean_abs_diff']:.2e} (shifted by one position: {g['logp_shifted_mean_abs_diff']:.2e}); "
            f"loss {g['loss']['llamacpp']:.4f} vs {g['loss']['transformers']:.4f}"
        )
    if "llamacpp_over_transformers" in r:
        print(
            f"llama.cpp / transformers: {r['llamacpp_over_transformers']:.2f}x the speed at "
            f"{r['llamacpp_memory_share']:.2f} of the peak memory"
        )


def _variant_main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("variant", "gguf", "ids", "context", "stride", "repeats", "save"):
        ap.add_argument(name)
    a = ap.parse_args()
    ids = np.load(a.ids)
    save = None if a.variant == "ceiling" else Path(a.save)
    print(json.dumps(run_variant(a.variant, Path(a.gguf), ids, int(a.context), int(a.stride), int(a.repeats), save)))


if __name__ == "__main__":
    _variant_main()
