#!/usr/bin/env python
"""Throughput of ``extract``'s p_z against the raw model forward over the same examples.

Two variants run in one process on the same model and the same examples (a real book's ids cut as ``extract``
cuts them: 50-token prefix, 50-token suffix, stride 10, the BOS before each), with the same batching, interleaved
over ``--repeats`` rounds (medians reported):

- ``forward``: ``model(input_ids).logits`` over each batch of examples, returning the logits and nothing else --
  the limit for anything that needs the model's output distribution (what the authors' code runs before their
  ``compute_logprob_batch``);
- ``extract``: ``docaudit.query.extraction.pz``: the trunk, the LM head on the 50 suffix-predicting positions only,
  each row reduced to greedy and top-40 log p_z.

With ``--backend llamacpp`` (the embedded GGUF through llama.cpp) the variants are llama.cpp's: ``forward``
decodes each example alone with every position's logits (the raw eval), ``alone`` adds the reduction of its suffix
rows (how ``extract`` ran before examples went side by side), ``extract`` is ``pz``: examples side by side, the LM
head on the suffix-predicting rows alone.

Examples::

    python scripts/benchmarks/bench_extract.py                    # embedded Gemma-3-270M, a book from the shared corpus
    python scripts/benchmarks/bench_extract.py --tiny --examples 400   # a tiny random GPT-2 (the tests' kind)
    python scripts/benchmarks/bench_extract.py --backend llamacpp      # the embedded GGUF through llama.cpp
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.common import cpu_name, default_documents, read_documents  # noqa: E402
from docaudit.config import ExtractConfig, ModelConfig  # noqa: E402
from docaudit.query.extraction import example_starts, position_logp, pz  # noqa: E402
from docaudit.query.models import load_model, opened_backend  # noqa: E402
from docaudit.query.stats import bos_per_window  # noqa: E402


def forward(lm, ids: np.ndarray, starts: np.ndarray, width: int, batch_size: int) -> None:
    bos = bos_per_window(lm.tokenizer)
    head = [] if bos is None else [bos]
    with torch.inference_mode():
        for lo in range(0, len(starts), batch_size):
            rows = [head + ids[s : s + width].tolist() for s in starts[lo : lo + batch_size]]
            lm.model(input_ids=torch.tensor(rows, device=lm.device)).logits.float()


def llama_variants(lm, ids: np.ndarray, starts: np.ndarray, config: ExtractConfig) -> dict:
    """llama.cpp's raw eval of each example alone, the same with its suffix rows reduced, and ``pz``."""
    bos = bos_per_window(lm.tokenizer)
    windows = [([] if bos is None else [bos]) + ids[s : s + config.example_tokens].tolist() for s in starts]
    backend = opened_backend(lm, len(windows[0]))
    suffix = config.suffix_tokens
    rows = slice(len(windows[0]) - suffix - 1, len(windows[0]) - 1)

    def alone(reduce: bool) -> None:
        for window in windows:
            z = backend.logits(window, slice(None) if not reduce else rows)
            if reduce:
                position_logp(torch.from_numpy(z), torch.tensor(window[rows.start + 1 :]), config.top_k, 1.0)

    return {
        "forward": lambda: alone(False),
        "alone": lambda: alone(True),
        "extract": lambda: pz(lm, ids, starts, config.prefix_tokens, suffix, (config.top_k, 1.0, config.batch_size)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny random GPT-2 instead of the embedded Gemma")
    parser.add_argument("--backend", default="transformers", choices=["transformers", "llamacpp"])
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config = ExtractConfig(batch_size=args.batch_size)
    if args.tiny:
        from conftest import make_model

        model = ModelConfig(model=str(make_model(Path(tempfile.mkdtemp()), "gpt2", width=64)), device="cpu")
    else:
        model = ModelConfig(device="cpu", backend=args.backend)
    lm = load_model(model)
    text = " ".join(read_documents(default_documents(), 60 * (args.examples * config.stride + 200)))
    ids = np.asarray(lm.tokenizer(text, add_special_tokens=False).input_ids, dtype=np.int64)
    starts = example_starts(len(ids), config.example_tokens, config.stride)[: args.examples]
    width = config.example_tokens
    tokens = len(starts) * (width + int(bos_per_window(lm.tokenizer) is not None))
    run = {
        "forward": lambda: forward(lm, ids, starts, width, args.batch_size),
        "extract": lambda: pz(lm, ids, starts, config.prefix_tokens, config.suffix_tokens, (40, 1.0, args.batch_size)),
    }
    if args.backend == "llamacpp":
        run = llama_variants(lm, ids, starts, config)
    run["extract"]()  # warm: the prepared head, the first allocations
    times = {name: [] for name in run}
    for r in range(args.repeats):
        for name in list(run)[r % len(run) :] + list(run)[: r % len(run)]:
            began = time.perf_counter()
            run[name]()
            times[name].append(time.perf_counter() - began)
            print(f"round {r}: {name} {times[name][-1]:.1f} s", file=sys.stderr, flush=True)
    rates = {name: tokens / statistics.median(t) for name, t in times.items()}
    result = {
        "model": "tiny GPT-2" if args.tiny else "embedded Gemma-3-270M",
        "backend": args.backend,
        "engine_threads": getattr(lm.opened.get("backend", (None, None))[1], "threads", None),
        "cpu": cpu_name(),
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
        "examples": len(starts),
        "tokens": tokens,
        "batch_size": args.batch_size,
        "tokens_per_s": rates,
        "ratio_extract_to_forward": rates["extract"] / rates["forward"],
        **({"ratio_extract_to_alone": rates["extract"] / rates["alone"]} if "alone" in rates else {}),
        "seconds": times,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
