"""The querier's memory does not grow with the document's length (streamed windows, bounded work buffers)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import gc, json, sys
import numpy as np
import torch
torch.set_num_threads(1)  # memory, not speed, is measured; one thread avoids contention on shared CPUs
sys.path.insert(0, sys.argv[1])
from docaudit.config import ModelConfig, QueryConfig
from docaudit.query.models import load_model
from docaudit.query.querier import Querier

def rss_kb():
    with open("/proc/self/status") as f:
        return {l.split(":")[0]: int(l.split()[1]) for l in f if l.startswith(("VmRSS", "VmHWM"))}

lm = load_model(ModelConfig(model=sys.argv[2], device="cpu"))
querier = Querier(lm, QueryConfig(context=128))
rng = np.random.default_rng(0)
ids = rng.integers(1, lm.vocab_size, int(sys.argv[3])).astype(np.int32)
querier.compute(ids[:5000])  # warm-up: work buffers and allocator at their steady size
gc.collect()
before = rss_kb()["VmRSS"]
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
stats = querier.compute(ids)
peak = rss_kb()["VmHWM"]
print(json.dumps({"extra_mb": (peak - before) / 1024, "scored": stats.n_scored}))
"""


def _extra_mb(model_dir, n_tokens: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT), str(model_dir), str(n_tokens)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["scored"] == n_tokens - 1
    return result["extra_mb"]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak RSS from /proc")
def test_peak_memory_flat_in_document_length(tiny_gpt2):
    try:
        open("/proc/self/clear_refs", "w").close()
    except OSError:
        pytest.skip("cannot reset the peak-RSS mark here")
    short, long = _extra_mb(tiny_gpt2, 20_000), _extra_mb(tiny_gpt2, 200_000)
    # What legitimately grows: the ids, scored-row indices and results, ~100 bytes per token (18 MB for 180,000
    # more tokens; ~25 MB measured). A per-document [tokens, vocab] float32 array would add 180,000 x 512 x 4
    # bytes = 350 MB.
    print(f"extra peak RSS: {short:.1f} MB at 20,000 tokens, {long:.1f} MB at 200,000 tokens")
    assert long - short < 80, (short, long)
