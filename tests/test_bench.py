"""Smoke test of the benchmark harness: a tiny config-built model on a few hundred tokens."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "benchmarks" / "bench_querier.py"


def test_bench_tiny_json(tmp_path):
    cmd = [sys.executable, str(SCRIPT), "--tiny", "--json", "--tokens", "300", "--repeats", "1", "--naive-tokens", "64"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for key in (
        "model",
        "device",
        "tokens",
        "forward_tokens_per_s",
        "querier_tokens_per_s",
        "naive_tokens_per_s",
        "querier_peak_rss_mb",
        "querier_over_forward",
        "querier_over_naive",
        "model_rss_mb",
    ):
        assert key in result, key
    assert result["tokens"] == 300 and result["scored_tokens"] == 299
    for key in (
        "forward_tokens_per_s",
        "querier_tokens_per_s",
        "naive_tokens_per_s",
        "querier_over_forward",
        "querier_over_naive",
    ):
        assert result[key] > 0, key
    assert result["querier_peak_rss_mb"] > 0 and result["naive_tokens"] >= 64


def test_bench_gguf_preset_json(tmp_path):
    """The tiny preset: a random-weight float32 GGUF built with the gguf package, quantized to Q4_K_M by llama.cpp's
    quantizer into the cache (once), then the llamacpp, transformers and ceiling variants on the same windows."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gguf")
    out = tmp_path / "bench.json"
    cmd = [
        sys.executable,
        str(SCRIPT),
        "--preset",
        "llama-tiny",
        "--tokens",
        "300",
        "--repeats",
        "1",
        "--json",
        str(out),
    ]
    env = {**os.environ, "DOCAUDIT_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["tokens"] == 300 and result["context"] == 128 and result["stride"] == 127
    for variant in ("transformers", "llamacpp", "ceiling"):
        assert result[variant]["tokens_per_s"] > 0 and result[variant]["peak_rss_mb"] > 0, variant
    for variant in ("transformers", "llamacpp"):
        assert result[variant]["over_ceiling"] > 0
    # the two queriers agree on the same windows: llama.cpp multiplies the Q4_K/Q6_K blocks with activations rounded
    # to 8 bits, transformers the dequantized float32 weights (measured: log p 0.004 mean, 0.018 max apart; a window
    # misaligned by one position would put them 0.35 apart)
    agree = result["agreement"]
    assert set(agree) >= {"logp", "max_logp", "mu", "sigma", "loss", "logp_std", "logp_shifted_mean_abs_diff"}
    assert agree["logp"]["max_abs_diff"] < 0.1 and agree["max_logp"]["max_abs_diff"] < 0.1
    assert agree["logp"]["mean_abs_diff"] < 0.1 * agree["logp_shifted_mean_abs_diff"]
    assert agree["mu"]["max_abs_diff"] < 0.01 and agree["sigma"]["max_abs_diff"] < 0.01
    assert abs(agree["loss"]["llamacpp"] - agree["loss"]["transformers"]) < 0.01
    cached = list((tmp_path / "cache" / "bench-models").iterdir())
    assert [p.name for p in cached] == ["llama-tiny-Q4_K_M.gguf"]  # no float32 or partial file left behind
    with open(cached[0], "rb") as f:
        assert f.read(4) == b"GGUF"


def test_bench_commands_counts_passes(tmp_path):
    """bench_commands.py runs commands end to end and counts the model's forward passes and their tokens."""
    script = SCRIPT.parent / "bench_commands.py"
    cmd = [sys.executable, str(script), "--tiny", "--scale", "0.1", "--commands", "score,sequence", "--json", "-"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("querier", "score", "sequence"):
        row = result[name]
        assert row["forwards"] >= 1 and row["model_tokens"] >= row["forwards"] and row["tokens_per_s"] > 0, name
    assert result["score"]["over_querier"] > 0 and "report" not in result


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak RSS from /proc")
def test_bench_memory_flat_in_document_length(tmp_path):
    """bench_memory.py queries one document per length in its own process on the tiny GGUF preset: the query's peak
    less the document's own arrays (ids, results, TokenStats: 40 bytes per token) does not grow with the length."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gguf")
    out = tmp_path / "memory.json"
    cmd = [sys.executable, str(SCRIPT.parent / "bench_memory.py"), "--tokens", "1000,30000", "--json", str(out)]
    env = {**os.environ, "DOCAUDIT_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [r["tokens"] for r in result["runs"]] == [1000, 30000]
    for run in result["runs"]:
        assert run["scored"] == run["tokens"] - 1
        # (the kernel's resident counters are approximate to a quarter of a MB per thread)
        assert run["peak_rss_mb"] >= run["model_rss_mb"] - 1 and run["query_peak_mb"] >= run["rss_before_query_mb"] - 1
        assert list(run["rss_after_mb"]) == ["imports", "tokenizer", "llama_cpp_context", "first_window"]
        # the launcher stays small, so a child's ru_maxrss is its own
        assert run["launcher_rss_mb"] < run["model_rss_mb"]
    assert result["document_arrays_bytes_per_token"] == pytest.approx(40, abs=1)
    assert result["flat"] and result["query_peak_less_document_spread_mb"] <= result["tolerance_mb"]


@pytest.mark.slow
def test_bench_ray_layouts(tmp_path):
    """bench_ray.py on 2 workers of 1 thread and 1 worker of 2 threads against one process on 2 threads: the same
    statistics (bitwise where the threads per process are the same), time ratios and the breakdown's parts."""
    pytest.importorskip("ray")
    out = tmp_path / "ray.json"
    cmd = [sys.executable, str(SCRIPT.parent / "bench_ray.py"), "--docs", "3", "--chars", "1500"]
    cmd += ["--layouts", "2x1,1x2", "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert set(result["single_process"]) == {"1", "2"} and set(result["layouts"]) == {"2x1", "1x2"}
    for name, row in result["layouts"].items():
        assert row["single_process_threads"] == 2, name
        assert row["max_diff_vs_single_same_threads"] == 0.0
        assert row["max_diff_vs_single_process"] <= result["tolerance"]
        assert row["time_ratio"] > 0 and row["overhead"] == pytest.approx(row["time_ratio"] - 1, abs=1e-3)
        b = row["breakdown_s"]
        assert len(b["computing_per_worker"]) == row["workers"] and sum(b["tasks_per_worker"]) == 3
        assert all(0 < c <= b["wall"] for c in b["computing_per_worker"])
        assert b["result_mb"] > 0 and b["ray_start"] > 0 and b["first_task"] > 0
    assert result["layouts"]["1x2"]["max_diff_vs_single_process"] == 0.0  # one worker of 2 threads: bitwise


def test_bench_gpu_tiny_on_cpu(tmp_path):
    """bench_gpu.py's whole path on a tiny model on the CPU: float32 and bfloat16 on the same windows, MFU from the
    given peak, agreement with float32; the bitsandbytes variants are skipped on the CPU with the reason given."""
    out = tmp_path / "gpu.json"
    cmd = [sys.executable, str(SCRIPT.parent / "bench_gpu.py"), "--shape", "tiny", "--device", "cpu"]
    cmd += ["--documents", "3", "--doc-tokens", "200", "--context", "64", "--repeats", "1", "--peak-tflops", "1"]
    cmd += ["--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert set(result["variants"]) == {"float32", "bfloat16"}
    assert set(result["skipped"]) == {"int8", "int4"} and all("CUDA" in why for why in result["skipped"].values())
    # tiny Llama: 4 layers of hidden 128 (attention 2 x 128^2 + 2 x 128 x 64, MLP 3 x 128 x 384, 2 norms), final
    # norm, output layer 128 x vocab
    vocab, h = result["vocab"], 128
    assert result["matmul_params"] == 4 * (2 * h * h + 2 * h * 64 + 3 * h * 384 + 2 * h) + h + h * vocab
    for name, row in result["variants"].items():
        assert row["scored_tokens"] == 3 * 199 and row["tokens_per_s"] > 0 and row["peak_gpu_mb"] is None
        assert row["mfu"] == pytest.approx(2 * result["matmul_params"] * row["tokens_per_s"] / 1e12)
        agree = row["vs_float32"]
        assert -1 <= agree["spearman_mean_logp"] <= 1 and -1 <= agree["kendall_min_k"] <= 1, name
    assert result["variants"]["float32"]["vs_float32"]["max_abs_diff_logp"] == 0.0
    assert 0 < result["variants"]["bfloat16"]["vs_float32"]["max_abs_diff_logp"] < 0.1  # bfloat16's rounding


def test_bench_gpu_peak_table():
    sys.path.insert(0, str(SCRIPT.parents[1]))
    from benchmarks.bench_gpu import peak_tflops

    assert peak_tflops("NVIDIA H100 80GB HBM3", None) == 989.0
    assert peak_tflops("NVIDIA H100 PCIe", None) == 756.0
    assert peak_tflops("NVIDIA H200", None) == 989.0
    assert peak_tflops("NVIDIA A100-SXM4-80GB", None) == 312.0
    assert peak_tflops("Tesla T4", None) is None and peak_tflops("Tesla T4", 65.0) == 65.0


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a CUDA device is present")
@pytest.mark.parametrize("script", ["gpu_check.sh", "bench_gpu.py"])
def test_gpu_check_without_cuda_is_one_line_error(tmp_path, script):
    runner = ["bash"] if script.endswith(".sh") else [sys.executable]
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run([*runner, str(SCRIPT.parent / script)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and done.stderr.startswith("error: no CUDA device")
