#!/usr/bin/env python
"""The querier on a Llama-7B-shaped model (random weights built from its config, no download) in float32,
bfloat16, int8 and int4 (bitsandbytes), on the same windows: tokens/s, model FLOP utilization, peak GPU memory,
and agreement with float32 (run by ``scripts/benchmarks/gpu_check.sh``; ``--shape tiny --device cpu`` for a quick
check).

The model is built once, seeded, and saved in bfloat16, so every variant loads the same weights through docaudit's
own loader (float32 holds them exactly; int8 and int4 are quantized from them at load time). The documents are
``--documents`` pieces of ``--doc-tokens`` tokens of real text (the shared corpus's books, else this repository's
docs). Each variant runs in its own process, so its peak GPU memory (``torch.cuda.max_memory_allocated``, reset
after loading and one warm-up document: the querying's peak, weights included) is its own; the timed pass over all
documents is repeated ``--repeats`` times and the median taken.

- tokens/s: scored tokens per second of the querier (every statistic, results on the host);
- MFU: 2 x parameters used in matrix products x tokens/s over the GPU's peak dense bfloat16 FLOP/s (taken from a
  table by ``torch.cuda.get_device_name()`` for A100, H100 and H200, else ``--peak-tflops``), for every variant;
- agreement with float32 on the same positions: max and mean |difference of log p|, and the Spearman rank
  correlation (and Kendall's tau) over documents of two per-document scores, the mean log p and Min-K% (k = 20%).

    python scripts/benchmarks/bench_gpu.py --json gpu.json                     # on a CUDA machine
    python scripts/benchmarks/bench_gpu.py --shape tiny --device cpu           # float32 and bfloat16 on the CPU
"""

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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import numpy as np  # noqa: E402

VARIANTS = {  # name -> (dtype, quantize)
    "float32": ("float32", None),
    "bfloat16": ("bfloat16", None),
    "int8": ("bfloat16", "int8"),
    "int4": ("bfloat16", "int4"),
}
QUANTIZED = ("int8", "int4")
CPU_SKIP = "bitsandbytes int8/int4 are measured on CUDA only: on the CPU they run other kernels, far slower"

# Peak dense bfloat16 tensor FLOP/s (no sparsity), from NVIDIA's data sheets; the most specific name first.
PEAK_BF16_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM (reported as "NVIDIA H100 80GB HBM3")
    ("H200", 989.0),
    ("A100", 312.0),
)
MIN_K = 0.2


def peak_tflops(device_name: str, given: float | None) -> float | None:
    """``given``, else the table's entry for ``device_name``, else None."""
    if given:
        return given
    return next((tflops for key, tflops in PEAK_BF16_TFLOPS if key.lower() in device_name.lower()), None)


def document_texts(paths: list[Path] | None, chars: int) -> list[str]:
    """About ``chars`` characters of real text: the given files, else the shared corpus's books, else this
    repository's README and docs."""
    from benchmarks.common import CORPUS

    if not paths:
        paths = sorted((CORPUS / "members").glob("*.txt")) or [
            ROOT / "README.md",
            *sorted((ROOT / "docs").glob("*.md")),
        ]
    texts, have = [], 0
    for p in paths:
        texts.append(p.read_text(encoding="utf-8", errors="replace"))
        have += len(texts[-1])
        if have >= chars:
            break
    return texts


# ----------------------------------------------------------------------------------------------- child processes
def build(shape: str, device: str, folder: str, documents: int, doc_tokens: int, docs: list[str]) -> dict:
    """Save the random-weight model (bfloat16) and its tokenizer to ``folder/model``, and the documents' token ids
    (``documents`` x ``doc_tokens``) to ``folder/ids.npy``."""
    import torch
    import transformers

    from benchmarks.synthetic import save_synthetic

    transformers.utils.logging.set_verbosity_error()
    texts = document_texts([Path(d) for d in docs], 8 * documents * doc_tokens + 50_000)
    kind = "tiny" if shape == "tiny" else "llama7b"
    model_dir = save_synthetic(kind, texts[:4], Path(folder) / "model", "bfloat16", device)
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    ids = np.concatenate([np.asarray(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts])
    need = documents * doc_tokens
    if len(ids) < need:
        raise SystemExit(f"error: the documents give {len(ids)} tokens, {need} are needed")
    np.save(Path(folder) / "ids.npy", ids[:need].reshape(documents, doc_tokens).astype(np.int32))
    config = transformers.AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters()) - model.get_input_embeddings().weight.numel()
    return {"matmul_params": int(params), "vocab": int(config.vocab_size)}


def variant(name: str, folder: str, device: str, context: int, repeats: int) -> dict:
    """Load the saved model as ``name``, query every document once to warm up, then ``repeats`` timed passes;
    the last pass's log p saved to ``folder/NAME.npy``."""
    import torch
    import transformers

    from docaudit.config import ModelConfig, QueryConfig
    from docaudit.query.models import load_model
    from docaudit.query.querier import Querier

    transformers.utils.logging.set_verbosity_error()
    dtype, quantize = VARIANTS[name]
    started = time.perf_counter()
    lm = load_model(ModelConfig(model=str(Path(folder) / "model"), dtype=dtype, device=device, quantize=quantize))
    querier = Querier(lm, QueryConfig(context=context, gp=False), cache=None)
    load_s = time.perf_counter() - started
    docs = np.load(Path(folder) / "ids.npy")
    cuda = querier.device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(querier.device)

    querier.compute(docs[0])
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats(querier.device)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        stats = [querier.compute(ids) for ids in docs]
        sync()
        times.append(time.perf_counter() - t)
    np.save(Path(folder) / f"{name}.npy", np.stack([s.logp for s in stats]))
    scored = sum(s.n_scored for s in stats)
    return {
        "tokens_per_s": scored / statistics.median(times),
        "seconds": [round(t, 4) for t in times],
        "scored_tokens": scored,
        "load_s": round(load_s, 2),
        "peak_gpu_mb": round(torch.cuda.max_memory_allocated(querier.device) / 2**20, 1) if cuda else None,
        "batch_size": querier.batch_size,
    }


def _child(args: list[str], what: str) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: {what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------------- comparison
def scores(logp: np.ndarray) -> dict[str, np.ndarray]:
    """Per-document scores from ``[documents, scored]`` log p: the mean, and Min-K% (mean of the lowest 20%)."""
    k = max(1, int(MIN_K * logp.shape[1]))
    return {"mean_logp": logp.mean(axis=1), "min_k": np.sort(logp, axis=1)[:, :k].mean(axis=1)}


def agreement(logp: np.ndarray, reference: np.ndarray) -> dict:
    """How far a variant's log p are from float32's on the same positions, and how alike the documents' ranks."""
    from scipy.stats import kendalltau, spearmanr

    d = np.abs(logp.astype(np.float64) - reference)
    out = {"max_abs_diff_logp": float(d.max()), "mean_abs_diff_logp": float(d.mean())}
    ours, theirs = scores(logp), scores(reference)
    for name in ours:
        out[f"spearman_{name}"] = float(spearmanr(ours[name], theirs[name]).statistic)
        out[f"kendall_{name}"] = float(kendalltau(ours[name], theirs[name]).statistic)
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=("llama7b", "tiny"), default="llama7b")
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu for a quick check.")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"A subset of {','.join(VARIANTS)}.")
    ap.add_argument("--documents", type=int, default=16, help="Documents (default 16).")
    ap.add_argument("--doc-tokens", type=int, default=1024, help="Tokens per document (default 1024).")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peak-tflops", type=float, default=None, help="The device's peak dense bf16 TFLOP/s.")
    ap.add_argument("--docs", nargs="*", type=Path, default=None, help="Text files for the documents.")
    ap.add_argument("--json", default=None, help="Write the JSON object to FILE too.")
    args = ap.parse_args(argv)
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if unknown := set(args.variants) - set(VARIANTS):
        ap.error(f"unknown variants: {', '.join(sorted(unknown))}")
    if args.documents < 2 or args.doc_tokens <= args.context:
        ap.error("--documents must be at least 2 and --doc-tokens larger than --context")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    import torch

    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit(f"error: no CUDA device (torch {torch.__version__} sees none): the GPU check needs one")
    device_name = torch.cuda.get_device_name(torch.device(args.device)) if cuda else "cpu"
    skipped = {v: CPU_SKIP for v in args.variants if v in QUANTIZED and not cuda}
    variants = ["float32"] + [v for v in args.variants if v != "float32" and v not in skipped]
    peak = peak_tflops(device_name, args.peak_tflops)
    result = {
        "shape": args.shape,
        "device": device_name,
        "torch": torch.__version__,
        "peak_bf16_tflops": peak,
        "documents": args.documents,
        "doc_tokens": args.doc_tokens,
        "context": args.context,
        "repeats": args.repeats,
        "skipped": skipped,
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
    }
    with tempfile.TemporaryDirectory(prefix="docaudit-gpu-") as tmp:
        made = _child(
            [
                "--build",
                args.shape,
                args.device,
                tmp,
                str(args.documents),
                str(args.doc_tokens),
                *map(str, args.docs or []),
            ],
            "building the model",
        )
        result.update(made)
        result["variants"] = {}
        for v in variants:
            row = _child(["--variant", v, tmp, args.device, str(args.context), str(args.repeats)], f"variant {v}")
            row["mfu"] = 2 * made["matmul_params"] * row["tokens_per_s"] / (peak * 1e12) if peak else None
            result["variants"][v] = row
        reference = np.load(Path(tmp) / "float32.npy")
        for v in variants:
            result["variants"][v]["vs_float32"] = agreement(np.load(Path(tmp) / f"{v}.npy"), reference)
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    print_table(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return result


def print_table(r: dict) -> None:
    print(
        f"{r['shape']} ({r['matmul_params'] / 1e6:,.1f} M matmul parameters) on {r['device']}, peak bf16 "
        f"{r['peak_bf16_tflops'] or 'unknown (--peak-tflops)'} TFLOP/s; {r['documents']} x {r['doc_tokens']} "
        f"tokens, C={r['context']}"
    )
    head = ("variant", "tokens/s", "MFU", "peak GPU MB", "max|dlogp|", "rho(mean)", "rho(MinK)")
    print("".join(f"{h:>12}" for h in head))
    for v, row in r["variants"].items():
        a = row["vs_float32"]
        cells = (v, f"{row['tokens_per_s']:.1f}", f"{row['mfu']:.1%}" if row["mfu"] is not None else "-")
        cells += (row["peak_gpu_mb"] or "-", f"{a['max_abs_diff_logp']:.2e}", f"{a['spearman_mean_logp']:.3f}")
        cells += (f"{a['spearman_min_k']:.3f}",)
        print("".join(f"{c:>12}" for c in cells))
    for v, why in r["skipped"].items():
        print(f"{v}: skipped ({why})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--build"]:
        shape, device, folder, documents, doc_tokens, *docs = sys.argv[2:]
        print(json.dumps(build(shape, device, folder, int(documents), int(doc_tokens), docs)))
    elif sys.argv[1:2] == ["--variant"]:
        name, folder, device, context, repeats = sys.argv[2:7]
        print(json.dumps(variant(name, folder, device, int(context), int(repeats))))
    else:
        main()
