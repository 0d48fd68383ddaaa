"""Smoke test of the benchmark harness: a tiny config-built model on a few hundred tokens."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_querier.py"


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
