"""Benchmark: N Ray workers of T threads each against one process of N x T threads on the same cores
(docs/benchmarks.md).

A small Llama (random weights, 4 layers, hidden 256, vocabulary 8,192) saved to a temporary folder is queried over
the same passages of real books, each run into a fresh cache: in this process with t threads for every thread count
a layout needs, then, per layout ``NxT``, on a local Ray instance started for it (``N x T`` CPUs, ``T`` threads per
worker through ``OMP_NUM_THREADS``) with a pool of N actors, one document per task. The actors are started and
have loaded the model before the clock starts; that start-up (Ray itself, the worker processes, the model load) is
reported apart. The statistics must be bitwise identical to the single process on T threads (the same arithmetic);
against the single process on N x T threads, whose matrix products split their sums differently, the largest
difference is reported and must stay within ``--tolerance``.

The overhead of a layout is its wall-clock time over the single process's on N x T threads, less one. Where it
exceeds 10%, the breakdown says where the time went: each worker's time computing (measured inside the worker),
its idle time (the run's wall clock less that), the result transfer (every task's results fetched again from its
worker, one after the other: a task's round trip and the transfer of its results), and the start-up (Ray; the
worker processes with one of them loading the model and querying a first document; the other workers loading the
model). CPU seconds per 1,000 tokens of the querying processes show what Ray adds per token. The single-process
runs come first, then the layouts, one after the other: on a shared machine, compare runs of one invocation only.

    python scripts/benchmarks/bench_ray.py [--docs 40] [--chars 12000] [--context 128] [--layouts 1x1,2x1,1x2] [--json
    FILE]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import numpy as np  # noqa: E402
import psutil  # noqa: E402
import torch  # noqa: E402

from benchmarks.common import cpu_name, tiny_llama  # noqa: E402
from docaudit.config import ModelConfig, QueryConfig, RayConfig  # noqa: E402
from docaudit.io import sha256_text  # noqa: E402
from docaudit.query import distributed  # noqa: E402
from docaudit.query.cache import StatsCache  # noqa: E402
from docaudit.query.distributed import RayPool  # noqa: E402
from docaudit.query.querier import open_querier  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
FIELDS = ("logp", "max_logp", "mu", "sigma", "gp_sum")
OVERHEAD_EXPLAINED = 0.10  # a layout slower than the single process by more gets its breakdown


class TimedWorker(distributed._Worker):
    """docaudit's Ray actor, timing each task inside the worker and keeping its results to send them again."""

    def __init__(self):
        super().__init__()
        self.tasks: list[tuple[float, object]] = []

    def stats(self, model, query, seed, items):
        started = time.perf_counter()
        out = super().stats(model, query, seed, items)
        self.tasks.append((time.perf_counter() - started, out))
        return out

    def timings(self) -> dict:
        import pickle

        import torch

        return {
            "tasks": len(self.tasks),
            "busy_s": sum(s for s, _ in self.tasks),
            "result_bytes": sum(len(pickle.dumps(out)) for _, out in self.tasks),
            "threads": torch.get_num_threads(),
        }

    def forget(self) -> None:
        self.tasks = []

    def replay(self, i: int):
        return self.tasks[i][1]


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


def max_difference(stats, reference) -> float:
    """Largest absolute difference of any statistic at any position (0.0: bitwise identical)."""
    worst = 0.0
    for a, b in zip(stats, reference, strict=True):
        assert np.array_equal(a.token_ids, b.token_ids)
        for name in FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            if x is not None and not np.array_equal(x, y):
                worst = max(worst, float(np.max(np.abs(x.astype(np.float64) - y))))
    return worst


def single(querier, items, threads: int, folder: Path) -> dict:
    """The querier in this process on ``threads`` threads (one document first, as the workers' warm-up)."""
    torch.set_num_threads(threads)
    run(querier, items[:1], folder / "warm")
    cpu = busy(psutil.Process())
    seconds, stats = run(querier, items, folder / "timed")
    return {"seconds": seconds, "cpu_s": busy(psutil.Process()) - cpu, "stats": stats}


def on_ray(querier, query, items, workers: int, threads: int, folder: Path) -> dict:
    """The same documents on a Ray instance started for ``workers`` actors of ``threads`` threads each."""
    import ray

    torch.set_num_threads(1)  # the driver only waits, writes the cache and sends tasks
    env = {"PYTHONPATH": str(ROOT), "DOCAUDIT_CACHE": str(folder / "workers"), "OMP_NUM_THREADS": str(threads)}
    started = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=workers * threads,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": env},
    )
    out = {"ray_start_s": time.perf_counter() - started}
    original, distributed._Worker = distributed._Worker, TimedWorker
    pool = RayPool(RayConfig(workers=workers, cpus_per_worker=threads, task_chars=1))
    querier.pool = pool  # its queries go to the pool's workers
    try:
        with pool.joblib_backend():
            started = time.perf_counter()
            run(querier, items[:1], folder / "warm")  # the actors started, one has loaded the model
            ray.get([a.ping.remote() for a in pool.actors])
            out["first_task_s"] = time.perf_counter() - started
            started = time.perf_counter()
            first = [(items[0][0], sha256_text(items[0][0]))]
            on_workers = replace(querier.lm.config, device=pool.device)
            ray.get([a.stats.remote(on_workers, query, querier.seed, first) for a in pool.actors])  # each has the model
            out["other_model_loads_s"] = time.perf_counter() - started
            ray.get([a.forget.remote() for a in pool.actors])
            processes = [psutil.Process(pid) for pid in ray.get([a.ping.remote() for a in pool.actors])]
            cpu = sum(busy(p) for p in processes)
            out["seconds"], out["stats"] = run(querier, items, folder / "timed")
            out["cpu_s"] = sum(busy(p) for p in processes) - cpu
            out["workers"] = ray.get([a.timings.remote() for a in pool.actors])
            started = time.perf_counter()
            for actor, timing in zip(pool.actors, out["workers"]):
                for i in range(timing["tasks"]):
                    ray.get(actor.replay.remote(i))
            out["transfer_s"] = time.perf_counter() - started
    finally:
        querier.pool = None
        distributed._Worker = original
        pool.close()
        ray.shutdown()
    return out


def layout_row(name, workers, threads, ray_run, singles, tokens, tolerance) -> dict:
    """One layout against the single process on workers x threads threads: overhead, identity, breakdown."""
    base = singles[workers * threads]
    row = {"workers": workers, "threads_per_worker": threads, "tokens_per_s": round(tokens / ray_run["seconds"])}
    row["single_process_threads"] = workers * threads
    row["single_process_tokens_per_s"] = round(tokens / base["seconds"])
    row["time_ratio"] = round(ray_run["seconds"] / base["seconds"], 3)
    row["overhead"] = round(row["time_ratio"] - 1, 3)
    startup = ray_run["ray_start_s"] + ray_run["first_task_s"] + ray_run["other_model_loads_s"]
    row["time_ratio_with_startup"] = round((ray_run["seconds"] + startup) / base["seconds"], 3)
    row["cpu_s_per_1k_tokens"] = round(1000 * ray_run["cpu_s"] / tokens, 3)
    row["single_process_cpu_s_per_1k_tokens"] = round(1000 * base["cpu_s"] / tokens, 3)
    for w in ray_run["workers"]:
        assert w["threads"] == threads, f"a worker runs {w['threads']} threads, not {threads}"
    # same threads per process: the same arithmetic, bitwise; other thread counts: within the tolerance
    row["max_diff_vs_single_same_threads"] = max_difference(ray_run["stats"], singles[threads]["stats"])
    assert row["max_diff_vs_single_same_threads"] == 0.0, f"{name}: not identical to one process on {threads}"
    row["max_diff_vs_single_process"] = max_difference(ray_run["stats"], base["stats"])
    assert row["max_diff_vs_single_process"] <= tolerance, f"{name}: {row['max_diff_vs_single_process']}"
    busy_s = [w["busy_s"] for w in ray_run["workers"]]
    row["breakdown_s"] = {
        "wall": round(ray_run["seconds"], 3),
        "single_process_wall": round(base["seconds"], 3),
        "computing_per_worker": [round(b, 3) for b in busy_s],
        "idle_per_worker": [round(ray_run["seconds"] - b, 3) for b in busy_s],
        "result_transfer_replayed": round(ray_run["transfer_s"], 3),
        "result_mb": round(sum(w["result_bytes"] for w in ray_run["workers"]) / 2**20, 2),
        "tasks_per_worker": [w["tasks"] for w in ray_run["workers"]],
        "ray_start": round(ray_run["ray_start_s"], 2),
        "first_task": round(ray_run["first_task_s"], 2),
        "other_model_loads": round(ray_run["other_model_loads_s"], 2),
    }
    return row


def parse_layouts(text: str) -> list[tuple[int, int]]:
    try:
        layouts = [tuple(int(x) for x in part.lower().split("x")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"error: --layouts takes NxT pairs such as 2x1,1x2, not {text!r}") from None
    if not layouts or any(len(p) != 2 or min(p) < 1 for p in layouts):
        raise SystemExit(f"error: --layouts takes NxT pairs such as 2x1,1x2, not {text!r}")
    return layouts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=40)
    ap.add_argument("--chars", type=int, default=12000)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--layouts", default="1x1,2x1,1x2", help="N workers x T threads, comma-separated.")
    ap.add_argument(
        "--tolerance",
        type=float,
        default=1e-4,
        help="Largest difference allowed against one process on N x T threads (default 1e-4).",
    )
    ap.add_argument("--json", default=None, help="Write the JSON object to FILE too.")
    args = ap.parse_args()
    layouts = parse_layouts(args.layouts)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    texts = passages(args.docs, args.chars)
    items = [(t, None) for t in texts]
    result = {"cpu": cpu_name(), "cores": os.cpu_count(), "loadavg_before": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = ModelConfig(model=str(tiny_llama(tmp / "model", texts[:8], 8192, 256, 688, 4, 512)), device="cpu")
        query = QueryConfig(context=args.context)
        querier = open_querier(model, query)
        n_params = sum(p.numel() for p in querier.lm.model.parameters())
        flops = 2 * (n_params - querier.lm.model.get_input_embeddings().weight.numel())  # per token, forward
        counts = sorted({t for n, t in layouts} | {n * t for n, t in layouts})
        singles = {t: single(querier, items, t, tmp / f"single{t}") for t in counts}
        tokens = sum(s.n_tokens for s in singles[counts[0]]["stats"])
        result.update(documents=len(texts), tokens=tokens, parameters=n_params, context=args.context)
        result["forward_flops_per_token"] = flops
        result["single_process"] = {
            str(t): {
                "tokens_per_s": round(tokens / s["seconds"]),
                "cpu_s_per_1k_tokens": round(1000 * s["cpu_s"] / tokens, 3),
                "gflops": round(tokens / s["seconds"] * flops / 1e9, 1),
            }
            for t, s in singles.items()
        }
        result["layouts"] = {}
        for n, t in layouts:
            name = f"{n}x{t}"
            ray_run = on_ray(querier, query, items, n, t, tmp / f"ray{name}")
            result["layouts"][name] = layout_row(name, n, t, ray_run, singles, tokens, args.tolerance)
    result["tolerance"] = args.tolerance
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    print_summary(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


def print_summary(r: dict) -> None:
    """The ratios, and a breakdown where a layout's overhead is above 10%."""
    print(f"{r['documents']} documents, {r['tokens']:,} tokens; load {r['loadavg_before']} -> {r['loadavg_after']}")
    for name, row in r["layouts"].items():
        t = row["single_process_threads"]
        print(
            f"{name}: {row['tokens_per_s']:,} tokens/s against {row['single_process_tokens_per_s']:,} for one process "
            f"on {t} threads: time ratio {row['time_ratio']:.2f} (overhead {row['overhead']:+.0%}; "
            f"{row['time_ratio_with_startup']:.2f} with start-up); largest difference "
            f"{row['max_diff_vs_single_process']:.1e}"
        )
        if row["overhead"] > OVERHEAD_EXPLAINED:
            b = row["breakdown_s"]
            print(
                f"  where the time went (s): wall {b['wall']} vs {b['single_process_wall']}; computing per worker "
                f"{b['computing_per_worker']}, idle {b['idle_per_worker']}; result transfer "
                f"{b['result_transfer_replayed']} ({b['result_mb']} MB, replayed serially); start-up: Ray "
                f"{b['ray_start']}, the workers and a first document {b['first_task']}, the other workers' model "
                f"loads {b['other_model_loads']}"
            )


if __name__ == "__main__":
    main()
