"""The model's weights are loaded on the first cache miss: a rerun whose statistics are all cached never builds
the model, and prints the same numbers."""

from __future__ import annotations

import pytest
from conftest import document_sets

from docaudit import api
from docaudit.audit.specs import EvaluationSpec
from docaudit.config import MetaConfig, ModelConfig, QueryConfig
from docaudit.run import DetectorSpec, ModelSpec


@pytest.fixture
def built(monkeypatch):
    """How many times transformers builds a causal LM from its weights during the test."""
    import transformers

    calls = []
    original = transformers.AutoModelForCausalLM.from_pretrained

    def counted(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", counted)
    return calls


def test_score_rerun_from_the_cache_never_builds_the_model(tiny_gpt2, tmp_path, built):
    sets = document_sets(tmp_path, n=2, n_chars=800)
    request = api.ScoreRequest(
        [sets["mem"]],
        ModelSpec(ModelConfig(model=str(tiny_gpt2))),
        QueryConfig(context=16),
        DetectorSpec(["loss", "zlib", "lowercase", "pac"]),
    )
    first = api.score(request)
    assert len(built) == 1
    again = api.score(request)
    assert len(built) == 1, "the rerun loaded the weights although every statistic was cached"
    assert again.rows == first.rows


def test_evaluate_rerun_from_the_cache_never_builds_the_model(tiny_gpt2, tmp_path, built):
    sets = document_sets(tmp_path, n=4, n_chars=800)
    meta = MetaConfig(norm="ratio_tf", features="hist", folds=2, n_estimators=5, bins=10)
    request = api.EvaluateRequest(
        [sets["mem"]],
        [sets["non"]],
        models=ModelSpec(ModelConfig(model=str(tiny_gpt2))),
        query=QueryConfig(context=16),
        detectors=DetectorSpec("loss"),
        spec=EvaluationSpec(meta=meta, folds=2),
    )
    first = api.evaluate(request)
    assert len(built) == 1
    again = api.evaluate(request)
    assert len(built) == 1, "the rerun loaded the weights although every statistic was cached"
    assert again.to_frame().equals(first.to_frame())


def test_a_cache_miss_loads_the_weights_once(tiny_gpt2, built):
    from docaudit.query.models import load_model
    from docaudit.query.querier import open_querier

    lm = load_model(ModelConfig(model=str(tiny_gpt2)))
    assert not lm.loaded and built == []
    querier = open_querier(lm, QueryConfig(context=16))
    assert built == []
    stats = querier.stats("a text the cache has never seen, long enough for a few windows of tokens")
    assert lm.loaded and len(built) == 1
    assert stats.vocab_size == lm.model.get_output_embeddings().weight.shape[0]
    querier.stats("another text the cache has not seen either")
    assert len(built) == 1
