"""``scripts/benchmarks/bench_probe_served.py`` serves a trained Gemma through llama.cpp: its GGUF export must be the
same model as the Hugging Face weights it came from (slow: the embedded Gemma's conversion, about a minute)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("gguf")

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "benchmarks" / "bench_probe_served.py"
TEXT = "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness"


def _script():
    spec = importlib.util.spec_from_file_location("bench_probe_served", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _llama_logits(path: Path, ids: list[int]) -> np.ndarray:
    import llama_cpp

    llm = llama_cpp.Llama(str(path), n_ctx=128, logits_all=True, n_threads=1, verbose=False)
    try:
        assert llm.tokenize(TEXT.encode()) == ids
        llm.eval(ids)
        return np.array(llm.scores[: len(ids)])
    finally:
        llm.close()


@pytest.mark.slow
def test_the_exported_gguf_gives_the_hugging_face_models_logits(tmp_path):
    """The base Gemma exported (metadata and tokenizer of the embedded GGUF, the Hugging Face tensors in float16,
    norms as 1 + w): llama.cpp's logits within 0.1 of transformers' and the same next token everywhere; exporting
    the norms unshifted, as a converter that forgot Gemma's convention would, moves them far."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    script = _script()
    if not script.template_gguf().is_file():
        pytest.skip("the embedded Gemma is not assembled in the cache")
    source = script.base_model()
    ids = AutoTokenizer.from_pretrained(source)(TEXT).input_ids
    with torch.no_grad():
        expected = AutoModelForCausalLM.from_pretrained(source)(torch.tensor([ids])).logits[0].numpy()
    exported = script.export_gguf(source, script.template_gguf(), tmp_path / "gemma.gguf")
    got = _llama_logits(exported, ids)
    assert np.abs(got - expected).max() < 0.1
    assert (got.argmax(1) == expected.argmax(1)).all()
    unshifted = script.export_gguf(source, script.template_gguf(), tmp_path / "unshifted.gguf", norm_offset=0.0)
    assert np.abs(_llama_logits(unshifted, ids) - expected).max() > 1.0
