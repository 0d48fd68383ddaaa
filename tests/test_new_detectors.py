"""DC-PDD and ReCaLL against independent slow computations written as their authors' code computes them, and
their orientation on a target that memorized its members."""

import numpy as np
import pytest
import reference as ref
from conftest import corpus_ids, corpus_text

from docaudit.config import DetectorConfig, ModelConfig, QueryConfig
from docaudit.errors import DocauditError
from docaudit.methods.detectors.detector import build_detector
from docaudit.methods.detectors.recall import PREFIX_SEPARATOR
from docaudit.query.models import load_model

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = dict(rel=1e-4, abs=1e-6)


@pytest.fixture(scope="module")
def lab():
    """The controlled lab target (its probabilities vary far more than a random model's, so that an error of one
    token shows) and 10-word cuts of its member and non-member excerpts (prefix and text fit its 64 positions)."""
    from labtarget import tiny_target

    model_dir, members, nonmembers = tiny_target()
    cut = [" ".join(t.split()[:10]) for t in members + nonmembers]
    return load_model(ModelConfig(model=str(model_dir))), cut[: len(members)], cut[len(members) :]


def text(group="members", i=0, n_chars=300):
    return corpus_text(group, corpus_ids(group, 3)[i], start=31000, n_chars=n_chars)


def test_dcpdd_equals_the_authors_computation(lab):
    lm, members, nonmembers = lab
    reference, x = nonmembers[1:], members[0]
    det = build_detector(lm, QueryConfig(), ["dcpdd"], DetectorConfig(dcpdd_a=0.01), single_pass=250)
    det.set_frequencies([(t, None) for t in reference])
    ids, ref_ids = ref.token_ids(lm.tokenizer, x), [ref.token_ids(lm.tokenizer, t) for t in reference]
    bos = lm.tokenizer.bos_token_id  # the lab tokenizer's BOS goes before every window
    expected = ref.dcpdd(lm.model, ids, ref_ids, lm.vocab_size, bos=bos)
    assert det.score_text(x)["dcpdd"] == pytest.approx(expected, **TOL)
    # a larger clip keeps more of each token's value: the clip is applied, not ignored
    loose = build_detector(lm, QueryConfig(), ["dcpdd"], DetectorConfig(dcpdd_a=10.0), single_pass=250)
    loose.frequencies = det.frequencies
    unclipped = ref.dcpdd(lm.model, ids, ref_ids, lm.vocab_size, 10.0, bos)
    assert loose.score_text(x)["dcpdd"] == pytest.approx(unclipped, **TOL)
    assert unclipped != pytest.approx(expected)


def test_recall_equals_the_authors_computation(lab):
    lm, members, nonmembers = lab
    prefix, tok = nonmembers[0], lm.tokenizer
    det = build_detector(lm, QueryConfig(), ["recall"], DetectorConfig(recall_prefix=prefix), single_pass=250)
    prefix_ids = ref.token_ids(tok, prefix + PREFIX_SEPARATOR)
    for x in (members[0], nonmembers[1]):
        ids = ref.token_ids(tok, x)
        # the joined text's tokens are the prefix's then the text's, as the authors join the two encodings
        assert ref.token_ids(tok, prefix + PREFIX_SEPARATOR + x) == prefix_ids + ids
        assert len(prefix_ids + ids) <= 63
        expected = ref.recall(lm.model, prefix_ids, ids, tok.bos_token_id)
        assert det.score_text(x)["recall"] == pytest.approx(expected, **TOL)


def test_recall_refuses_a_text_that_does_not_fit_one_window_with_its_prefix(lab):
    """Prefix + text over the target's 63-token window would be scored over several windows, a different
    statistic: refused with a one-line error (and named by ``recall_problem``), not computed."""
    from docaudit.methods.detectors.recall import OVER_WINDOW, recall_problem

    lm, members, nonmembers = lab
    long_prefix = PREFIX_SEPARATOR.join(nonmembers[:4])
    det = build_detector(lm, QueryConfig(), ["recall"], DetectorConfig(recall_prefix=long_prefix), single_pass=250)
    n = len(ref.token_ids(lm.tokenizer, long_prefix + PREFIX_SEPARATOR + members[0]))
    assert n > 63
    assert recall_problem(det, members[0])[0] == OVER_WINDOW
    with pytest.raises(DocauditError, match=f"are {n} tokens, more than the 63-token window"):
        det.score_text(members[0])


def test_recall_refuses_a_text_tokenized_differently_after_the_prefix(lab):
    """A text starting with two spaces: the lab tokenizer merges the separator with them, so the joined text's
    last tokens are not the text's own; ReCaLL refuses it instead of scoring other tokens."""
    from docaudit.methods.detectors.recall import MISALIGNED, recall_problem

    lm, members, nonmembers = lab
    det = build_detector(lm, QueryConfig(), ["recall"], DetectorConfig(recall_prefix=nonmembers[0]), single_pass=250)
    x = "  " + members[0]
    own, joined = (ref.token_ids(lm.tokenizer, t) for t in (x, nonmembers[0] + PREFIX_SEPARATOR + x))
    assert joined[len(joined) - len(own) :] != own
    assert recall_problem(det, x)[0] == MISALIGNED and recall_problem(det, members[0]) is None
    with pytest.raises(DocauditError, match="not its tokens alone"):
        det.score_text(x)


def test_missing_frequencies_or_prefix_are_one_line_errors(gpt2):
    with pytest.raises(DocauditError, match="'dcpdd' needs token frequencies"):
        build_detector(gpt2, QueryConfig(context=250), ["dcpdd"]).score_text(text())
    with pytest.raises(DocauditError, match="'recall' needs a non-member prefix"):
        build_detector(gpt2, QueryConfig(context=250), ["recall"]).score_text(text())


def test_members_score_higher_on_a_target_that_memorized_them(lab):
    """On the controlled lab target (trained on a random half of the excerpts) members must rank first; a sign
    error shows as an AUC below 0.5. The prefix is one non-member, left out."""
    from sklearn.metrics import roc_auc_score

    from docaudit.methods.detectors.recall import recall_problem

    lm, mem, non = lab
    prefix, non = non[0], non[1:]
    det = build_detector(lm, QueryConfig(), ["dcpdd", "recall"], DetectorConfig(recall_prefix=prefix), single_pass=250)
    mem, non = ([t for t in texts if recall_problem(det, t) is None] for texts in (mem, non))  # one window each
    det.set_frequencies([(t, None) for t in mem + non])  # the evaluated texts, without their labels
    rows = [det.score_text(t) for t in mem + non]
    labels = [1] * len(mem) + [0] * len(non)
    aucs = {m: roc_auc_score(labels, [r[m] for r in rows]) for m in ("dcpdd", "recall")}
    assert all(auc > 0.75 for auc in aucs.values()), aucs
    assert np.isfinite([r["recall"] for r in rows]).all()


def test_score_and_evaluate_take_a_frequency_corpus(lab, tmp_path):
    """``--freq-corpus`` on score and evaluate: the score equals the authors' computation with the frequencies of
    those files; without it, evaluate calibrates on the evaluated texts (no labels used) and runs DC-PDD."""
    import json

    from click.testing import CliRunner

    from docaudit.cli import main

    lm, members, nonmembers = lab
    folder = {name: tmp_path / name for name in ("ref", "m", "n")}
    for path in folder.values():
        path.mkdir()
    for i, t in enumerate(nonmembers[1:]):
        (folder["ref"] / f"{i}.txt").write_text(t, encoding="utf-8")
    doc = tmp_path / "x.txt"
    doc.write_text(members[0], encoding="utf-8")
    common = ["--model", lm.config.model, "--context", "63", "--methods", "dcpdd", "--raw", "--format", "json"]
    result = CliRunner().invoke(main, ["score", str(doc), *common, "--freq-corpus", str(folder["ref"])])
    assert result.exit_code == 0, result.output
    ids = ref.token_ids(lm.tokenizer, members[0])
    ref_ids = [ref.token_ids(lm.tokenizer, t) for t in nonmembers[1:]]
    expected = ref.dcpdd(lm.model, ids, ref_ids, lm.vocab_size, bos=lm.tokenizer.bos_token_id)
    assert json.loads(result.stdout)["rows"][0]["dcpdd"] == pytest.approx(expected, **TOL)
    for i, t in enumerate(members[:4]):
        (folder["m"] / f"{i}.txt").write_text(t, encoding="utf-8")
    for i, t in enumerate(nonmembers[:4]):
        (folder["n"] / f"{i}.txt").write_text(t, encoding="utf-8")
    args = ["evaluate", "--members", str(folder["m"]), "--nonmembers", str(folder["n"]), *common]
    result = CliRunner().invoke(main, [*args, "--no-meta", "--no-blind", "--folds", "2"])
    assert result.exit_code == 0, result.output
    assert {r["method"] for r in json.loads(result.stdout)["methods"]} == {"dcpdd"}
