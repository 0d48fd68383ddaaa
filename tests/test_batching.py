"""Many short texts (detectors' extra passes, report snippets, sequences) are queried in a few batched forward
passes, with the values of one text queried alone."""

import math

import numpy as np
import pytest
from conftest import corpus_ids, corpus_text
from reference import naive_token_stats

from docaudit.config import ModelConfig, QueryConfig, ScalingConfig
from docaudit.io import sha256_text
from docaudit.methods.detectors.detector import build_detector
from docaudit.methods.detectors.registry import PASSES
from docaudit.methods.document_level import sequence_scores
from docaudit.query.models import load_model
from docaudit.query.querier import Querier
from docaudit.query.stats import scored_spans


@pytest.fixture(scope="module")
def lms(tiny_gpt2, tiny_llama):
    return {
        arch: load_model(ModelConfig(model=str(path))) for arch, path in (("gpt2", tiny_gpt2), ("llama", tiny_llama))
    }


class Forwards:
    """Counts the trunk's forward passes and the windows in each."""

    def __init__(self, module):
        self.calls = []
        self.handle = module.register_forward_pre_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.calls.append(tuple(ids.shape))

    def close(self):
        self.handle.remove()


def _texts(n: int, chars: int) -> list[str]:
    books = corpus_ids("members", 4)
    return [corpus_text("members", books[i % 4], start=20000 + 997 * i, n_chars=chars) for i in range(n)]


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_compute_many_equals_naive_reference(lms, arch, one_thread):
    """Texts of different lengths queried together (windows right-padded in shared batches) give each text's
    values from the slow one-window-at-a-time reference."""
    lm = lms[arch]
    querier = Querier(lm, QueryConfig(context=16, stride=15, batch_size=4))
    querier.backend.chunk_rows = 7
    ids = [querier.token_ids(t, "0" * 64)[:n] for t, n in zip(_texts(5, 800), (40, 17, 3, 29, 16))]
    many = querier.compute_many(ids)
    for one, stats in zip(ids, many):
        ref, _ = naive_token_stats(lm.model, one.tolist(), 16, 15, querier.bos)
        assert stats.n_tokens == len(one)
        for name in ("logp", "max_logp", "mu", "sigma"):
            np.testing.assert_allclose(getattr(stats, name), ref[name], atol=1e-5, rtol=0, err_msg=name)


def test_extra_passes_are_batched(lms, one_thread):
    """``sequence_scores`` with the default methods queries each extra pass's texts of all sequences in
    at most ceil(windows / batch) forward passes (one per sequence and pass before), none carrying more tokens than
    ``batch`` full windows, with the scores of querying each
    sequence's extra passes on their own."""
    lm = lms["gpt2"]
    detector = build_detector(lm, QueryConfig(context=32, batch_size=4), cache=False)
    assert {"lower", "pac"} <= set(detector.passes)
    texts = _texts(6, 600)
    stats = [detector.target.stats(t) for t in texts]
    shas = [sha256_text(t) for t in texts]
    scaling = ScalingConfig(n_sequences=3)
    counter = Forwards(lm.model.base_model)
    try:
        batched = sequence_scores(stats, shas, detector, scaling, progress=False)
        calls = list(counter.calls)
        n_sequences = len(batched.doc)
        # the old path: each sequence's extra passes queried on their own
        counter.calls.clear()
        tokenizer, C, bs = lm.tokenizer, detector.target.query.context, detector.target.batch_size
        most, least, rows = 0, 0, []
        for d, w in zip(batched.doc, batched.window):
            start, first, end = scored_spans(stats[d].n_tokens, C, detector.target.stride)[w]
            text = tokenizer.decode(stats[d].token_ids[start:end].tolist(), clean_up_tokenization_spaces=False)
            s, part = stats[d], slice(first - 1, end - 1)
            rows.append(
                detector.score(
                    s.logp[part], s.mu[part], s.sigma[part], text, s.targets[part], detector.extras([text])[0]
                )
            )
        alone = len(counter.calls)
    finally:
        counter.close()
    for name in detector.passes:
        derived = [
            t
            for d, w in zip(batched.doc, batched.window)
            for t in PASSES[name].texts(
                detector,
                tokenizer.decode(
                    stats[d]
                    .token_ids[slice(*scored_spans(stats[d].n_tokens, C, detector.target.stride)[w][::2])]
                    .tolist(),
                    clean_up_tokenization_spaces=False,
                ),
            )
        ]
        lengths = [len(detector.target.token_ids(t, "")) for t in derived]
        windows = sum(len(scored_spans(n, C, detector.target.stride)) for n in lengths)
        most += math.ceil(windows / bs)  # batches of bs windows
        least += math.ceil(sum(lengths) / (bs * C))  # every forward full
    assert least <= len(calls) <= most
    assert all(b * length <= bs * C for b, length in calls)  # no forward beyond bs full windows' tokens
    assert alone >= n_sequences * len(detector.passes) > len(calls)
    for m in detector.methods:
        np.testing.assert_allclose(batched.scores[m], [r[m] for r in rows], rtol=1e-5, atol=1e-6, err_msg=m)


def _opened(querier):
    """The querier's backend, opened (a model whose weights wait for the first pass opens it then)."""
    return querier.backend.open() if hasattr(querier.backend, "open") else querier.backend


def test_onednn_head_equals_reference(lms, monkeypatch, one_thread):
    """The pre-packed oneDNN head (used for large float32 heads on the CPU; forced here on a tiny one) gives the
    reference's values, dense in and out where torch has oneDNN's pointwise linear."""
    import torch

    from docaudit.query.backends import transformers as backend

    if not torch.backends.mkldnn.is_available():
        pytest.skip("torch without oneDNN")
    monkeypatch.setattr(backend, "ONEDNN_MIN_WEIGHT", 0)
    lm = lms["llama"]
    querier = Querier(lm, QueryConfig(context=16, stride=15))
    head = _opened(querier)._head
    assert head.packed is not None
    assert head.dense_io == hasattr(torch.ops.mkldnn, "_linear_pointwise")
    ids = querier.token_ids(_texts(1, 800)[0], "0" * 64)[:45]
    stats = querier.compute(ids)
    ref, _ = naive_token_stats(lm.model, ids.tolist(), 16, 15, querier.bos)
    for name in ("logp", "max_logp", "mu", "sigma"):
        np.testing.assert_allclose(getattr(stats, name), ref[name], atol=1e-5, rtol=0, err_msg=name)


def test_backends_share_the_prepared_head_until_its_weight_changes(tiny_llama, monkeypatch, one_thread):
    """Every backend opened on a model shares its trunk and packed head (made once: seconds on a large model), and
    a head trained in place since is packed again, so a second query sees the new weights (the packed weight is a
    copy)."""
    import torch

    from docaudit.query.backends import transformers as backend

    monkeypatch.setattr(backend, "ONEDNN_MIN_WEIGHT", 0)
    lm = load_model(ModelConfig(model=str(tiny_llama)))
    first, second = (Querier(lm, QueryConfig(context=16, stride=15)) for _ in range(2))
    assert _opened(first)._head is _opened(second)._head
    ids = first.token_ids(_texts(1, 800)[0], "0" * 64)[:45]
    before = first.compute(ids)
    with torch.no_grad():
        lm.model.get_output_embeddings().weight.mul_(1.5)
    changed = Querier(lm, QueryConfig(context=16, stride=15))
    assert _opened(changed)._head is not _opened(first)._head
    after = changed.compute(ids)
    ref, _ = naive_token_stats(lm.model, ids.tolist(), 16, 15, changed.bos)
    np.testing.assert_allclose(after.logp, ref["logp"], atol=1e-5, rtol=0)
    assert not np.allclose(after.logp, before.logp, atol=1e-3)
