"""Per-document p-values and verdicts: the cross-conformal p-value against a slow reference, its validity under
the null by simulation (held-out non-members reach "evidence" at most at the nominal rate), the reasons for
"inconclusive", and the fold models' safe loading."""

import numpy as np
import pytest

from docaudit.errors import DocauditError
from docaudit.inference.conformal import cross_conformal_p
from docaudit.inference.verdicts import (
    EVIDENCE,
    INCONCLUSIVE,
    NEXT_STEPS,
    NO_EVIDENCE,
    Reason,
    bh_adjust,
    nonmembers_needed,
    run_verdicts,
    smallest_p,
)


def slow_cross_conformal(book_scores, nonmember_scores, factor=1):
    out = []
    for b in range(len(book_scores[0])):
        count, n = 0, 0
        for k, fold in enumerate(nonmember_scores):
            for s in fold:
                n += 1
                if s >= book_scores[k][b]:
                    count += 1
        out.append(min(1.0, factor * (1 + count) / (n + 1)))
    return out


def test_cross_conformal_matches_a_slow_reference():
    rng = np.random.default_rng(0)
    folds = [rng.integers(0, 5, size=n).astype(float) / 4 for n in (3, 4, 5)]  # ties on purpose
    books = rng.integers(0, 5, size=(3, 7)).astype(float) / 4
    assert np.allclose(cross_conformal_p(books, folds), slow_cross_conformal(books, folds))
    assert np.allclose(cross_conformal_p(books, folds, factor=2), slow_cross_conformal(books, folds, factor=2))
    assert cross_conformal_p([[9.0], [9.0], [9.0]], folds)[0] == smallest_p(12) == 1 / 13
    with pytest.raises(DocauditError, match="folds"):
        cross_conformal_p(books[:2], folds)


def test_too_few_nonmembers_says_how_many_would_be_needed():
    p = [1 / 11, 0.5, 0.9]
    verdicts = run_verdicts(p, [[], [], []], n_nonmembers=10)
    assert all(v.verdict == INCONCLUSIVE and "too few known non-members" in v.reason for v in verdicts)
    # the slow way: the fewest n whose smallest p-value 1/(n+1) is below 0.05; all documents at it keep q = p
    slow = next(n for n in range(1, 1000) if 1 / (n + 1) < 0.05)
    assert f"{slow} would be needed" in verdicts[0].reason and nonmembers_needed(0.05) == slow == 20
    assert bh_adjust([1 / 21] * 3) == pytest.approx([1 / 21] * 3)
    assert nonmembers_needed(0.01) == 100 and nonmembers_needed(0.2) == 5
    # with enough non-members the same p-values are decided: evidence only where the q-value is below 0.05
    verdicts = run_verdicts([1 / 101, 0.5, 0.9], [[], [], []], n_nonmembers=100)
    assert [v.verdict for v in verdicts] == [EVIDENCE, NO_EVIDENCE, NO_EVIDENCE]
    assert verdicts[0].q_value == pytest.approx(3 / 101)
    verdicts = run_verdicts([1 / 21, 0.5, 0.9], [[], [], []], n_nonmembers=20)
    assert [v.verdict for v in verdicts] == [NO_EVIDENCE] * 3  # q = 3/21 > 0.05: tested, nothing found


def test_a_reason_makes_it_inconclusive_and_no_pvalue_is_left_out_of_the_adjustment():
    verdicts = run_verdicts([0.001, None, 0.001], [["the blind baseline separates it"], ["retrain"], []], 1000)
    assert verdicts[0].verdict == INCONCLUSIVE and verdicts[0].reason == "the blind baseline separates it"
    assert verdicts[1].verdict == INCONCLUSIVE and verdicts[1].p_value is None and verdicts[1].q_value is None
    assert verdicts[2].verdict == EVIDENCE and verdicts[2].q_value == pytest.approx(0.001)


def test_fold_models_refuse_untrusted_types_and_wrong_shapes(tmp_path):
    import skops.io as sio
    from sklearn.preprocessing import FunctionTransformer

    from docaudit.methods.blind import BlindFeatures, fit_fold
    from docaudit.methods.meta.folds import FOLDS_FILE, check_blind, load_folds, save_folds

    texts = [f"in the year {1800 + 10 * i} the book was written {i}" for i in range(8)]
    y = np.array([1, 0] * 4)
    model = fit_fold(BlindFeatures(texts), "dates", y, np.arange(8))
    save_folds(tmp_path, [], [model, model])
    with pytest.raises(DocauditError, match="expected 2 fold meta-classifiers"):
        load_folds(tmp_path, "dates", 2)
    check_blind(model, "dates", tmp_path)
    with pytest.raises(DocauditError, match="not a docaudit blind model of kind nb"):
        check_blind(model, "nb", tmp_path)
    (tmp_path / FOLDS_FILE).write_bytes(sio.dumps({"meta": [], "blind": [FunctionTransformer(np.exp)]}))
    with pytest.raises(DocauditError, match="untrusted types"):
        load_folds(tmp_path, "dates", 1)


def test_blind_fold_models_apart_and_from_an_older_combined_file(tmp_path):
    """``predict`` reads the blind models alone from their own file; an older classifier's ``folds.skops`` (meta
    and blind models in one dict) still gives them; a blind file without its meta file, or the reverse, is refused
    on its own terms."""
    import skops.io as sio

    from docaudit.config import DEFAULT_CLASSIFIER
    from docaudit.methods.blind import BlindFeatures, fit_fold, fold_scores
    from docaudit.methods.meta.folds import BLIND_FILE, FOLDS_FILE, load_blind_folds, load_folds, save_folds

    texts = [f"in the year {1800 + 10 * i} the book was written {i}" for i in range(8)]
    model = fit_fold(BlindFeatures(texts), "dates", np.array([1, 0] * 4), np.arange(8))
    save_folds(tmp_path, [], [model, model])
    blinds = load_blind_folds(tmp_path, "dates", 2)
    features = BlindFeatures(texts)
    assert len(blinds) == 2
    assert (fold_scores(blinds[0], features, "dates") == fold_scores(model, features, "dates")).all()
    with pytest.raises(DocauditError, match="expected 3 fold blind models"):
        load_blind_folds(tmp_path, "dates", 3)
    (tmp_path / BLIND_FILE).unlink()
    metas, shipped = load_folds(DEFAULT_CLASSIFIER, "dates", 5)
    (tmp_path / FOLDS_FILE).write_bytes(sio.dumps({"meta": metas, "blind": shipped}))  # the older layout
    assert len(load_blind_folds(tmp_path, "dates", 5)) == 5
    (tmp_path / FOLDS_FILE).write_bytes(sio.dumps([]))
    with pytest.raises(DocauditError, match=f"expected {BLIND_FILE}"):
        load_blind_folds(tmp_path, "dates", 0)


def test_inconclusive_reasons_name_each_cause():
    from docaudit.audit.meta import RETRAIN, inconclusive_reasons
    from docaudit.inference.verdicts import NEXT_STEPS

    card = {
        "pooled_bootstrap_95": {"auc": {"point": 0.9, "ci_low": 0.8, "ci_high": 0.97}},
        "blind": {"blind_auc": 0.5, "best_kind": "tfidf"},
    }
    conformal = {"nonmember_tokens_min": 100, "nonmember_tokens_max": 800}
    assert inconclusive_reasons(card, None, 500, None) == [RETRAIN]
    assert inconclusive_reasons(card, conformal, 500, 0.5) == []
    (why,) = inconclusive_reasons(card, conformal, 99, 0.5)
    assert "too few tokens queried: 99" in why.text and why.code == "too_few_tokens"
    # a document longer than every known non-member: its features are not like theirs (10x longer gave p <= 0.1
    # for 12% of never-trained documents)
    assert inconclusive_reasons(card, conformal, 800, 0.5) == []
    (why,) = inconclusive_reasons(card, conformal, 8000, 0.5)
    assert "more than the 800 of every known non-member" in why.text and why.code == "too_many_tokens"
    assert "--max-tokens" in why.next_step
    # a card saved before the longest was recorded: only a token budget bounds a document's length
    older = {"nonmember_tokens_min": 100}
    assert [r.code for r in inconclusive_reasons(card, older, 8000, 0.5)] == ["retrain"]
    budget = {**card, "query": {"max_tokens": 512}}
    assert inconclusive_reasons(budget, older, 512, 0.5) == []
    (why,) = inconclusive_reasons(card, conformal, 500, 0.01)
    assert "blind baseline already separates this document" in why.text and why.code == "blind_separates"
    shifted = {**card, "blind": {"blind_auc": 0.66, "best_kind": "dates"}}
    (why,) = inconclusive_reasons(shifted, conformal, 500, 0.5)
    assert "AUC 0.660 (dates)" in why.text and why.code == "distribution_shift"
    chance = {**card, "pooled_bootstrap_95": {"auc": {"point": 0.47, "ci_low": 0.32, "ci_high": 0.61}}}
    codes = [r.code for r in inconclusive_reasons(chance, conformal, 500, 0.5)]
    assert codes == ["classifier_at_chance", "distribution_shift"]  # chance, and blind within 0.05 of it
    (why,) = inconclusive_reasons(card, conformal, 500, 0.5, trained_on=True)
    assert why.code == "training_document"
    for reason in (RETRAIN, why):
        assert reason.next_step == NEXT_STEPS[reason.code] and "docaudit" in reason.next_step


def test_blind_gate_has_its_own_level_not_alpha():
    """A smaller --alpha must not let more documents through the blind gate: a blind p-value of 0.02 is below the
    gate's fixed level 0.05 whatever the verdict's alpha (the old rule compared it with alpha, so at alpha 0.01 the
    document passed the gate)."""
    from docaudit.audit.meta import inconclusive_reasons
    from docaudit.inference.verdicts import BLIND_GATE_LEVEL

    card = {
        "pooled_bootstrap_95": {"auc": {"point": 0.9, "ci_low": 0.8, "ci_high": 0.97}},
        "blind": {"blind_auc": 0.5, "best_kind": "tfidf"},
    }
    conformal = {"nonmember_tokens_min": 100, "nonmember_tokens_max": 800}
    assert BLIND_GATE_LEVEL == 0.05
    (why,) = inconclusive_reasons(card, conformal, 500, 0.02)
    assert why.code == "blind_separates"


def test_gates_come_before_benjamini_hochberg():
    """Gating after BH can raise the false discovery proportion: documents rejected with small p-values and then
    gated still lower every other document's BH threshold. Here 8 gated documents (p 0.001) and one member (0.001)
    sit beside a non-member with p 0.02 and three with p 0.5. BH over all 13 gives the non-member q = 0.026 and
    "evidence" (old order: 1 false of 2 discoveries); BH over the 5 that pass the gates gives q = 0.05: no
    evidence."""
    p = [0.001] * 8 + [0.001, 0.02, 0.5, 0.5, 0.5]
    reasons = [["the blind baseline separates it"]] * 8 + [[]] * 5
    verdicts = run_verdicts(p, reasons, 1000)
    assert [v.verdict for v in verdicts[:8]] == [INCONCLUSIVE] * 8
    assert all(v.q_value is None for v in verdicts[:8])
    assert verdicts[8].verdict == EVIDENCE
    assert verdicts[9].verdict == NO_EVIDENCE and verdicts[9].q_value == pytest.approx(0.02 * 5 / 2)


def test_reasons_shared_by_every_document_are_printed_once_with_their_next_step():
    from docaudit.report.verdicts import format_predictions

    chance = Reason("classifier_at_chance", "the classifier's own AUC includes 0.5")
    short = Reason("too_few_tokens", "too few tokens queried: 9")
    verdicts = run_verdicts([0.2, 0.3], [[chance], [chance, short]], 100)
    common = {"membership_score": 0.5, "n_tokens": 9, "n_tokens_total": 9, "p_value_blind": 0.5, "alpha": 0.05}
    common |= {"classifier_auc": 0.5, "classifier_auc_ci_low": 0.4, "classifier_auc_ci_high": 0.6}
    common |= {"n_known_nonmembers": 100, "smallest_p": 1 / 101}
    rows = [{"file": f"{i}.txt", **v.as_dict(), **common} for i, v in enumerate(verdicts)]
    text = format_predictions(rows)
    assert text.count(chance.text) == 1 and text.count(NEXT_STEPS["classifier_at_chance"]) == 1
    assert "every document: inconclusive: the classifier's own AUC includes 0.5" in text
    assert "  inconclusive (the reasons above)" in text
    assert "  inconclusive: too few tokens queried: 9 (and the reasons above)" in text
    assert text.count(NEXT_STEPS["too_few_tokens"]) == 1
    assert [r["reason_codes"] for r in rows] == [["classifier_at_chance"], ["classifier_at_chance", "too_few_tokens"]]


def _slow_bh(p):
    """Benjamini-Hochberg q-values written out: p_(j) m / j, the running minimum from the largest down."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    q = [0.0] * len(p)
    running = 1.0
    for rank in range(len(p), 0, -1):
        i = order[rank - 1]
        running = min(running, p[i] * len(p) / rank)
        q[i] = running
    return q


def test_evidence_out_of_reach_in_a_run_is_inconclusive_with_the_library_size_that_would_reach_it():
    """Two books against 20 library texts: one at the smallest p-value, 1/21, one at 0.5. Over the run BH gives the
    first 2/21 = 0.095: no library of 20 could give it evidence beside the other, so it is "inconclusive"
    (``unreachable_in_run``) naming the size a linear search over a written-out BH finds (40); the second could
    have got evidence (at 1/21 beside the first: q = 1/21), so it is "no evidence"; alone, the first gets it; against 40
    texts, two books at 1/41 get it and one at 0.5 is "no evidence" (it could have)."""
    from docaudit.inference.verdicts import reachable_size

    verdicts = run_verdicts([1 / 21, 0.5], [[], []], None, 0.05, smallest=[1 / 21, 1 / 21])
    assert [v.verdict for v in verdicts] == [INCONCLUSIVE, NO_EVIDENCE]
    assert verdicts[0].reason_codes == ("unreachable_in_run",)
    need = next(n for n in range(1, 10**4) if _slow_bh([1 / (n + 1), 0.5])[0] < 0.05)
    assert need == 40 and reachable_size([0.5], 0.05) == need and "40 would reach it" in verdicts[0].reason
    rng = np.random.default_rng(2)
    for _ in range(30):
        others = list(rng.uniform(0, 1, int(rng.integers(1, 6))))
        need = next((n for n in range(1, 10**4) if _slow_bh([1 / (n + 1), *others])[0] < 0.05), None)
        assert reachable_size(others, 0.05, limit=10**4) == need
    assert run_verdicts([1 / 21], [[]], None, 0.05, smallest=[1 / 21])[0].verdict == EVIDENCE
    three = run_verdicts([1 / 41, 1 / 41, 0.5], [[], [], []], None, 0.05, smallest=[1 / 41] * 3)
    assert [v.verdict for v in three] == [EVIDENCE, EVIDENCE, NO_EVIDENCE]


def test_training_next_steps_name_their_bound():
    """A next step that trains on whole books names the excerpt that keeps it to minutes, and its dry run."""
    from docaudit.inference.verdicts import NEXT_STEPS

    training = [step for step in NEXT_STEPS.values() if "docaudit train --members" in step]
    assert len(training) >= 3
    assert all("--max-tokens 512" in step and "--dry-run" in step for step in training)


def test_the_printed_training_step_runs_as_written(tmp_path, monkeypatch):
    """The training step a verdict prints, its folders given, is a command that runs: its dry run, nothing written."""
    from conftest import CORPUS
    from test_cli import run

    from docaudit.inference.verdicts import TRAIN_STEP

    command = TRAIN_STEP.split(";")[0].split()
    assert command[:2] == ["docaudit", "train"]
    folders = iter([CORPUS / "members", CORPUS / "nonmembers"])
    args = [str(next(folders)) if a == "DIR" else a for a in command[2:]]
    monkeypatch.chdir(tmp_path)
    done = run("train", *args, "--dry-run")
    assert done.exit_code == 0, done.output
    assert "nothing was loaded or written" in done.stdout and not any(tmp_path.iterdir())
