import numpy as np
import pytest
from conftest import corpus_ids, corpus_text
from reference import naive_token_stats

from docaudit.config import ModelConfig, QueryConfig
from docaudit.query.cache import StatsCache
from docaudit.query.models import load_model
from docaudit.query.querier import Querier, excerpt


@pytest.fixture(scope="module")
def lms(tiny_gpt2, tiny_llama):
    return {
        arch: load_model(ModelConfig(model=str(path))) for arch, path in (("gpt2", tiny_gpt2), ("llama", tiny_llama))
    }


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize(
    "context,stride,n_tokens",
    [(16, 15, 203), pytest.param(16, 5, 200, marks=pytest.mark.slow), (32, 31, 97), (8, 1, 30), (64, 63, 40)],
)
def test_batched_stats_equal_naive_loop(lms, arch, context, stride, n_tokens):
    lm = lms[arch]
    querier = Querier(lm, QueryConfig(context=context, stride=stride, batch_size=3))
    querier.backend.chunk_rows = 7  # far fewer rows per LM-head chunk than positions, and than the vocabulary
    text = corpus_text("members", corpus_ids("members", 1)[0], n_chars=3000)
    ids = querier.token_ids(text, "0" * 64)[:n_tokens]
    assert len(ids) == n_tokens
    stats = querier.compute(ids)
    assert (querier.bos is not None) == (arch == "llama")
    ref, gp = naive_token_stats(lm.model, ids.tolist(), context, stride, querier.bos)
    assert stats.n_scored == n_tokens - 1
    for name in ("logp", "max_logp", "mu", "sigma"):
        np.testing.assert_allclose(getattr(stats, name), ref[name], atol=1e-5, rtol=0, err_msg=name)
    np.testing.assert_allclose(stats.gp_sum, gp, atol=1e-5)
    assert stats.gp_sum.sum() == pytest.approx(n_tokens - 1, rel=1e-6)


def test_windows_reproduce_single_forward_passes(lms):
    """Each window's slice of the stats equals a separate forward pass over that window."""
    lm = lms["llama"]
    querier = Querier(lm, QueryConfig(context=16, stride=15))
    ids = querier.token_ids(corpus_text("members", corpus_ids("members", 2)[1]), "1" * 64)[:70]
    stats = querier.compute(ids)
    for (start, first, end), window in zip(
        __import__("docaudit.query.stats").query.stats.scored_spans(70, 16, 15), stats.windows()
    ):
        alone = querier.compute(ids[start:end])
        np.testing.assert_allclose(stats.logp[window], alone.logp[first - start - 1 :], atol=1e-5)


def test_cache_roundtrip_and_keys(lms, tmp_path):
    lm = lms["gpt2"]
    cache = StatsCache(tmp_path)
    text = corpus_text("members", corpus_ids("members", 1)[0], n_chars=1500)
    first = Querier(lm, QueryConfig(context=16), cache).stats(text)
    assert len(list(cache.root.rglob("*.npz"))) == 1
    again = Querier(lm, QueryConfig(context=16), cache)
    again.compute = None  # a cache hit must not query the model
    np.testing.assert_array_equal(again.stats(text).logp, first.logp)
    Querier(lm, QueryConfig(context=32), cache).stats(text)
    Querier(lms["llama"], QueryConfig(context=16), cache).stats(text)
    assert len(list(cache.root.rglob("*.npz"))) == 3
    assert not list(cache.root.rglob("*.tmp"))


def test_excerpt_is_seeded_and_bounded(lms):
    tok = lms["gpt2"].tokenizer
    text = corpus_text("members", corpus_ids("members", 2)[1], n_chars=12000)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    a = excerpt(tok, text, 100, "random", 0, "ab" * 32)
    assert len(a.ids) == 100 and np.array_equal(a.ids, excerpt(tok, text, 100, "random", 0, "ab" * 32).ids)
    assert not np.array_equal(a.ids, excerpt(tok, text, 100, "random", 1, "ab" * 32).ids)
    assert np.array_equal(excerpt(tok, text, 100, "leading", 0, "ab" * 32).ids, ids[:100])
    short = text[:300]
    assert np.array_equal(
        excerpt(tok, short, 10_000, "random", 0, "ab" * 32).ids, tok(short, add_special_tokens=False)["input_ids"]
    )
