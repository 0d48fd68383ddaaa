"""Benchmark: querying on 1 and 2 Ray workers of a local instance against one process (docs/benchmarks.md).

A small Llama (random weights, 4 layers, hidden 256, vocabulary 8,192) saved to a temporary folder is queried over
the same passages of real books three times, each into a fresh cache: in this process on one thread, then on a
pool of 1 and of 2 Ray actors (one thread each). The actors are started and have loaded the model before the
clock starts (their start-up is reported apart). The TokenStats must be identical. Besides tokens/s (wall clock,
which on a shared machine depends on the other jobs), the CPU seconds per 1,000 tokens of the querying processes
(the driver alone; the workers, summed) show what Ray adds per token. Prints one JSON line.
    python scripts/bench_ray.py [--docs 40] [--chars 12000] [--context 128]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import numpy as np  # noqa: E402
import psutil  # noqa: E402
import torch  # noqa: E402
from bench.common import tiny_llama  # noqa: E402

from docaudit.config import ModelConfig, QueryConfig, RayConfig  # noqa: E402
from docaudit.io import sha256_text  # noqa: E402
from docaudit.query.cache import StatsCache  # noqa: E402
from docaudit.query.distributed import RayPool  # noqa: E402
from docaudit.query.querier import open_querier  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"


def passages(n: int, chars: int) -> list[str]:
    files = sorted((CORPUS / "members").glob("*.txt")) + sorted((CORPUS / "nonmembers").glob("*.txt"))
    return [f.read_text(encoding="utf-8")[20000 : 20000 + chars] for f in files[:n]]


def busy(process) -> float:
    """CPU seconds a process has used (user and system)."""
    times = process.cpu_times()
    return times.user + times.system


def run(querier, items, cache: Path):
    """Seconds to query ``items`` into a fresh cache at ``cache``, and their TokenStats."""
    querier.cache = StatsCache(cache)
    started = time.perf_counter()
    stats = querier.stats_many(items, progress=False)
    return time.perf_counter() - started, stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=40)
    ap.add_argument("--chars", type=int, default=12000)
    ap.add_argument("--context", type=int, default=128)
    args = ap.parse_args()
    import ray

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    texts = passages(args.docs, args.chars)
    items = [(t, None) for t in texts]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = ModelConfig(model=str(tiny_llama(tmp / "model", texts[:8], 8192, 256, 688, 4, 512)), device="cpu")
        query = QueryConfig(context=args.context)
        torch.set_num_threads(1)
        querier = open_querier(model, query)
        n_params = sum(p.numel() for p in querier.lm.model.parameters())
        flops = 2 * (n_params - querier.lm.model.get_input_embeddings().weight.numel())  # per token, forward
        cpu = busy(psutil.Process())
        single_s, reference = run(querier, items, tmp / "single")
        cpu = busy(psutil.Process()) - cpu
        tokens = sum(s.n_tokens for s in reference)
        env = {"PYTHONPATH": str(ROOT), "DOCAUDIT_CACHE": str(tmp / "workers"), "OMP_NUM_THREADS": "1"}
        runtime = {"env_vars": env}
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=runtime)
        result = {"documents": len(texts), "tokens": tokens, "parameters": n_params, "context": args.context}
        result["forward_flops_per_token"] = flops
        result["single_process_tokens_per_s"] = round(tokens / single_s)
        result["single_process_cpu_s_per_1k_tokens"] = round(1000 * cpu / tokens, 3)
        try:
            for workers in (1, 2):
                pool = RayPool(RayConfig(workers=workers, task_chars=1))
                querier.pool = pool  # its queries go to the pool's workers
                with pool.joblib_backend():
                    started = time.perf_counter()
                    run(querier, items[:1], tmp / f"warm{workers}")  # actors started
                    on_workers = replace(querier.lm.config, device=pool.device)
                    first = [(texts[0], sha256_text(texts[0]))]
                    ray.get([a.stats.remote(on_workers, query, first) for a in pool.actors])
                    startup = time.perf_counter() - started  # and each has loaded the model
                    processes = [psutil.Process(pid) for pid in ray.get([a.ping.remote() for a in pool.actors])]
                    cpu = sum(busy(p) for p in processes)
                    seconds, stats = run(querier, items, tmp / f"ray{workers}")
                    cpu = sum(busy(p) for p in processes) - cpu
                pool.close()
                result[f"ray_{workers}_workers_cpu_s_per_1k_tokens"] = round(1000 * cpu / tokens, 3)
                for a, b in zip(stats, reference):
                    assert np.array_equal(a.logp, b.logp) and np.array_equal(a.mu, b.mu)
                result[f"ray_{workers}_workers_tokens_per_s"] = round(tokens / seconds)
                result[f"ray_{workers}_workers_startup_s"] = round(startup, 1)
        finally:
            ray.shutdown()
    rates = [result[f"ray_{w}_workers_tokens_per_s"] for w in (1, 2)]
    result["two_over_one_worker"] = round(rates[1] / rates[0], 2)
    result["one_worker_over_single_process"] = round(
        result["ray_1_workers_tokens_per_s"] / result["single_process_tokens_per_s"], 2
    )
    for name in ("single_process", "ray_1_workers", "ray_2_workers"):
        result[f"{name}_gflops"] = round(result[f"{name}_tokens_per_s"] * flops / 1e9, 1)
    result["load_average"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
