"""Each detector against a straightforward computation from the model's logits; the scaling levels."""

import json
import re

import numpy as np
import pytest
import reference as ref
import torch
from conftest import corpus_ids, corpus_text, make_tokenizer

from docaudit import api
from docaudit.config import DetectorConfig, ModelConfig, QueryConfig, ScalingConfig
from docaudit.errors import DocauditError
from docaudit.inference.calibration import accuracy_threshold, fpr_threshold
from docaudit.methods.detectors.detector import build_detector
from docaudit.methods.detectors.neighborhood import load_masked_lm
from docaudit.methods.detectors.pac import pac_copies, swap_words
from docaudit.methods.detectors.registry import METHODS, resolve_methods
from docaudit.methods.detectors.tokens import minkpp_tokens
from docaudit.methods.document_level import (
    LEVELS,
    level_doc_threshold,
    sample_windows,
    sequence_scores,
)
from docaudit.query.models import load_model
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = dict(rel=1e-4, abs=1e-5)


@pytest.fixture(scope="module")
def llama(tiny_llama):
    return load_model(ModelConfig(model=str(tiny_llama)))


def short_text(n_chars=300, i=0):
    return corpus_text("members", corpus_ids("members", 3)[i], start=31000, n_chars=n_chars)


def test_scores_equal_direct_computations(gpt2, llama, tmp_path):
    """A document shorter than the context is one forward pass: every score equals its definition computed from
    the logits (loss from the model's own labels= loss, Min-K%++ from a full-softmax loop, PAC with its own
    augmentation loop, zlib by hand; ref against a second model with a BOS)."""
    text = short_text()
    doc = tmp_path / "doc.txt"
    doc.write_text(text)
    names = ["loss", "zlib", "lowercase", "ref", "mink", "minkpp", "pac"]
    request = api.ScoreRequest(
        [doc],
        ModelSpec(gpt2, llama),
        QueryConfig(context=250),
        DetectorSpec(names, DetectorConfig(k=0.2)),
        DocumentSpec(raw=True),
    )
    [row] = api.score(request).rows
    model, tok = gpt2.model, gpt2.tokenizer
    ids = ref.token_ids(tok, text)
    assert row["n_tokens"] == len(ids) < 200
    loss = ref.loss_by_labels(model, ids)
    lower_loss = ref.loss_by_labels(model, ref.token_ids(tok, text.lower()))
    ref_loss = ref.loss_with_bos(llama.model, ref.token_ids(llama.tokenizer, text), llama.tokenizer.bos_token_id)
    assert row["loss"] == pytest.approx(-loss, **TOL)
    assert row["zlib"] == pytest.approx(ref.zlib_score(loss, text), **TOL)
    assert row["lowercase"] == pytest.approx(lower_loss / loss, **TOL)
    assert row["ref"] == pytest.approx(ref_loss - loss, **TOL)
    assert row["mink"] == pytest.approx(ref.mink_prob(model, ids, 0.2), **TOL)
    assert row["minkpp"] == pytest.approx(ref.mink_plus_plus(model, ids, 0.2), **TOL)
    assert row["pac"] == pytest.approx(ref.pac(model, tok, text), rel=1e-4, abs=1e-4)


def test_score_on_a_snippet_equals_the_direct_computation_on_its_raw_text(gpt2, tmp_path):
    """``score`` with its defaults queries a snippet without boilerplate exactly as written (curly quotes, dashes,
    double spaces), so its numbers are the authors' computation on the raw text."""
    from test_data import SNIPPET

    doc = tmp_path / "snippet.txt"
    doc.write_text(SNIPPET, encoding="utf-8")
    detectors = DetectorSpec(["loss", "zlib", "mink", "minkpp"])
    [row] = api.score(api.ScoreRequest([doc], ModelSpec(gpt2), QueryConfig(context=250), detectors)).rows
    model, ids = gpt2.model, ref.token_ids(gpt2.tokenizer, SNIPPET)
    loss = ref.loss_by_labels(model, ids)
    assert row["n_tokens"] == len(ids)
    assert row["loss"] == pytest.approx(-loss, **TOL)
    assert row["zlib"] == pytest.approx(ref.zlib_score(loss, SNIPPET), **TOL)
    assert row["mink"] == pytest.approx(ref.mink_prob(model, ids, 0.2), **TOL)
    assert row["minkpp"] == pytest.approx(ref.mink_plus_plus(model, ids, 0.2), **TOL)


def test_scores_with_a_bos_model(llama):
    """With a BOS before every window, the first text token is context only, as in the querier."""
    text = short_text(300, 1)
    det = build_detector(llama, QueryConfig(context=250), ["loss", "mink", "minkpp"])
    scores = det.score_text(text)
    ids, bos = ref.token_ids(llama.tokenizer, text), llama.tokenizer.bos_token_id
    assert scores["loss"] == pytest.approx(-ref.loss_with_bos(llama.model, ids, bos), **TOL)
    assert scores["mink"] == pytest.approx(ref.mink_prob(llama.model, ids, 0.2, bos), **TOL)
    assert scores["minkpp"] == pytest.approx(ref.mink_plus_plus(llama.model, ids, 0.2, bos), **TOL)


def test_every_detector_ranks_memorized_members_first():
    """On a target that memorized its members, every score must rank members above non-members: an AUC far below
    0.5 there is a sign error (PAC scored the authors' PAC value with higher = member and had AUC 0.0 here)."""
    from labtarget import tiny_target
    from sklearn.metrics import roc_auc_score

    model_dir, members, nonmembers = tiny_target()
    names = ["loss", "zlib", "lowercase", "mink", "minkpp", "pac"]
    det = build_detector(
        load_model(ModelConfig(model=str(model_dir))), QueryConfig(), names, cache=False, single_pass=250
    )
    rows = [det.score_text(text) for text in members + nonmembers]
    labels = [1] * len(members) + [0] * len(nonmembers)
    aucs = {m: roc_auc_score(labels, [r[m] for r in rows]) for m in names}
    assert all(auc >= 0.75 for auc in aucs.values()), aucs
    assert aucs["pac"] == 1.0, aucs


def test_building_blocks():
    # at least one token; sigma = 0 guarded
    assert minkpp_tokens(np.array([-1.0, -2.0]), np.array([-1.0, -1.5]), np.array([0.0, 0.5])).tolist() == [0.0, -1.0]
    text = "one two  three\nfour five six seven eight nine ten"
    copies = pac_copies(text, DetectorConfig(), 3)
    assert len(copies) == 5 and copies == pac_copies(text, DetectorConfig(), 3) != pac_copies(text, DetectorConfig(), 4)
    for c in copies:
        assert sorted(c.split()) == sorted(text.split()) and re.sub(r"\S+", "w", c) == re.sub(r"\S+", "w", text)
        assert c == ref.swapped(text, copies.index(c), 3, 0.3)
    assert swap_words("alone", 3, np.random.default_rng(0)) == "alone"
    with pytest.raises(DocauditError, match="unknown method"):
        resolve_methods("loss,nope")
    assert resolve_methods(None, ref=True) == ["loss", "zlib", "lowercase", "mink", "minkpp", "pac", "ref"]
    assert set(METHODS) == {"loss", "zlib", "lowercase", "ref", "mink", "minkpp", "pac", "neighbor", "dcpdd", "recall"}


def test_neighborhood_with_a_tiny_masked_lm(gpt2, tmp_path):
    from transformers import BertConfig, BertForMaskedLM

    tok = make_tokenizer([corpus_text("members", b) for b in corpus_ids("members", 2)], 300)
    tok.add_special_tokens({"mask_token": "<mask>"})
    torch.manual_seed(0)
    BertForMaskedLM(
        BertConfig(
            vocab_size=len(tok),
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    ).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    neighbors = load_masked_lm(str(tmp_path), DetectorConfig(neighbors=3))
    text = short_text(300)  # longer than the masked LM's 64 positions: chunked
    nbs = neighbors(text)
    assert len(nbs) == 3 and nbs == neighbors(text) and all(n != text for n in nbs)
    det = build_detector(
        gpt2, QueryConfig(context=250), ["loss", "neighbor"], models=ModelSpec(neighbor_model=neighbors)
    )
    scores = det.score_text(text)
    model = gpt2.model
    expected = np.mean([ref.loss_by_labels(model, ref.token_ids(gpt2.tokenizer, n)) for n in nbs]) - ref.loss_by_labels(
        model, ref.token_ids(gpt2.tokenizer, text)
    )
    assert scores["neighbor"] == pytest.approx(expected, **TOL)
    with pytest.raises(DocauditError, match="--neighbor-model"):
        build_detector(gpt2, QueryConfig(context=250), ["neighbor"])


def test_sequences_are_windows_scored_as_single_passes(gpt2):
    """A sampled sequence's scores (from the document's cached stats) equal one forward pass over the window."""
    from docaudit.query.querier import Querier

    text = corpus_text("members", corpus_ids("members", 1)[0], n_chars=2500)
    querier = Querier(gpt2, QueryConfig(context=32))
    stats = querier.stats(text)
    chosen = sample_windows(stats, 4, 0, "ab" * 32)
    assert len(chosen) == 4 and np.array_equal(chosen, sample_windows(stats, 4, 0, "ab" * 32))
    det = build_detector(gpt2, QueryConfig(context=250), ["loss", "mink", "zlib"])
    seq = sequence_scores([stats], ["ab" * 32], det, ScalingConfig(n_sequences=4), progress=False)
    assert seq.window.tolist() == chosen.tolist()
    for w, loss, mink, zl in zip(seq.window, seq.scores["loss"], seq.scores["mink"], seq.scores["zlib"]):
        ids = stats.token_ids[w * 31 : w * 31 + 32].tolist()
        assert len(ids) == 32
        assert loss == pytest.approx(-ref.loss_by_labels(gpt2.model, ids), **TOL)
        assert mink == pytest.approx(ref.mink_prob(gpt2.model, ids), **TOL)
        assert zl == pytest.approx(
            ref.zlib_score(-loss, gpt2.tokenizer.decode(ids, clean_up_tokenization_spaces=False)), **TOL
        )


def test_thresholds():
    assert accuracy_threshold([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == pytest.approx(0.5)
    assert accuracy_threshold([0.1, 0.2], [1, 1]) == -np.inf
    assert accuracy_threshold([0.1, 0.2], [0, 0]) == np.inf
    neg = np.arange(10.0)
    assert fpr_threshold(neg, 0.2) == 7.0 and (neg > 7.0).mean() == 0.2
    assert fpr_threshold(neg, 0.0) == 9.0 and fpr_threshold(neg, 1.0) == -np.inf


def test_doc_threshold_uses_training_documents_only():
    """tau from the training documents' sequences (0.55) differs from tau over all documents (below 0.5): the
    test member document must be scored with the training tau (3 of 4 sequences above it, not 4 of 4)."""
    values = np.array([1.0, 1.1, 0.0, 0.1, 0.5, 0.6, 0.7, 0.8, 0.2, 0.3, 0.4, 0.45])
    doc = np.repeat([0, 1, 2, 3], [2, 2, 4, 4])
    labels = np.array([1, 0, 1, 0])
    train, test = np.array([0, 1]), np.array([2, 3])
    assert accuracy_threshold(values[np.isin(doc, train)], labels[doc[np.isin(doc, train)]]) == pytest.approx(0.55)
    assert accuracy_threshold(values, labels[doc]) < 0.5  # the leaky tau would call all of doc 2 a member
    y, s = level_doc_threshold(values, doc, labels, train, test)
    assert y.tolist() == [1, 0] and s.tolist() == [0.75, 0.0]
    y, s = LEVELS["doc_avg"](values, doc, labels, train, test)
    assert s == pytest.approx([0.65, 0.3375])
    y, s = LEVELS["sequence"](values, doc, labels, train, test)
    assert y.tolist() == [1] * 4 + [0] * 4 and s.tolist() == values[4:].tolist()


def test_score_cli_json_fields(tiny_gpt2, gpt2, tmp_path):
    from click.testing import CliRunner

    from docaudit.cli import main

    texts = [short_text(300, i) for i in range(2)]
    for i, text in enumerate(texts):
        (tmp_path / f"d{i}.txt").write_text(text)
    result = CliRunner().invoke(main, ["score", "--model", str(tiny_gpt2), "--format", "json", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert len(rows) == 2
    for row, text in zip(rows, texts):
        assert set(row) == {
            "file",
            "n_tokens",
            "context",
            "stride",
            "loss",
            "zlib",
            "lowercase",
            "mink",
            "minkpp",
            "pac",
        }
        assert (row["context"], row["stride"]) == (128, 127)
        # the default windows (128 tokens, stride 127), one window at a time in float64
        stats, _ = ref.naive_token_stats(gpt2.model, ref.token_ids(gpt2.tokenizer, text), 128, 127)
        assert row["n_tokens"] == len(stats["logp"]) + 1
        assert row["loss"] == pytest.approx(stats["logp"].mean(), **TOL)
        assert row["mink"] == pytest.approx(ref.lowest(stats["logp"], 0.2), **TOL)
    csv = CliRunner().invoke(
        main,
        ["score", "--model", str(tiny_gpt2), "--methods", "loss,mink", "--format", "csv", str(tmp_path / "d0.txt")],
    )
    assert csv.exit_code == 0 and csv.stdout.splitlines()[0] == "file,n_tokens,context,stride,loss,mink"
