"""llama.cpp with and without its repacked weight buffers (``--llama-repack on`` / ``off``) on the same GGUF file,
windows and thread count, alternated within one run so that both see the same load: tokens per second of docaudit's
llama.cpp backend (every statistic of every position), and how far the two layouts' log-probabilities lie apart.

``--llama-repack auto`` turns repacking off on a CPU with AMX, where llama.cpp's AMX path crashes on a quantized
file; this measures what that costs on the CPU it runs on (named in the output with its flags).

    python scripts/benchmarks/bench_llama_repack.py [--gguf FILE] [--context 128] [--tokens 1024] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchmarks.common import CORPUS, cpu_name  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", type=Path, help="GGUF file (default: the embedded Gemma-3-270M Q4_K_M)")
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--book", type=Path, default=CORPUS / "members" / "1005.txt")
    args = parser.parse_args(argv)

    from docaudit.config import ModelConfig, QueryConfig
    from docaudit.corpus.documents import load_document
    from docaudit.query.backends.llamacpp import cpu_has_amx
    from docaudit.query.models import load_model
    from docaudit.query.querier import Querier
    from docaudit.query.sources import embedded_gguf

    gguf = args.gguf or embedded_gguf()[0]
    text = load_document(args.book).text
    queriers, ids = {}, None
    for setting in ("on", "off"):
        lm = load_model(ModelConfig(model=str(gguf), backend="llamacpp", llama_repack=setting))
        queriers[setting] = Querier(lm, QueryConfig(context=args.context, gp=False), cache=None)
        ids = np.asarray(lm.tokenizer(text, add_special_tokens=False)["input_ids"][: args.tokens])
    times = {s: [] for s in queriers}
    stats = {}
    for repeat in range(args.repeats + 1):  # the first round warms up
        for setting, querier in queriers.items():
            began = time.perf_counter()
            stats[setting] = querier.compute(ids)
            if repeat:
                times[setting].append(time.perf_counter() - began)
    rate = {s: len(ids) / statistics.median(t) for s, t in times.items()}
    diff = np.abs(stats["on"].logp - stats["off"].logp)
    result = {
        "cpu": cpu_name(),
        "amx": cpu_has_amx(),
        "load_average": os.getloadavg(),
        "gguf": gguf.name,
        "tokens": len(ids),
        "context": args.context,
        "tokens_per_s": {s: round(r, 1) for s, r in rate.items()},
        "off_over_on": round(rate["off"] / rate["on"], 3),
        "logp_abs_diff": {"max": float(diff.max()), "mean": float(diff.mean())},
    }
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
