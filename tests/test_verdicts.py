"""Per-document p-values and verdicts: the cross-conformal p-value against a slow reference, its validity under
the null by simulation (held-out non-members reach "evidence" at most at the nominal rate), the reasons for
"inconclusive", and the fold models' safe loading."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from docaudit.errors import DocauditError
from docaudit.inference.conformal import cross_conformal_p
from docaudit.inference.verdicts import (
    EVIDENCE,
    INCONCLUSIVE,
    NO_EVIDENCE,
    bh_adjust,
    nonmembers_needed,
    run_verdicts,
    smallest_p,
)


def slow_cross_conformal(book_scores, nonmember_scores, factor=2):
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
    assert np.allclose(cross_conformal_p(books, folds, factor=1), slow_cross_conformal(books, folds, factor=1))
    assert cross_conformal_p([[9.0], [9.0], [9.0]], folds)[0] == smallest_p(12, 2) == 2 / 13
    with pytest.raises(DocauditError, match="folds"):
        cross_conformal_p(books[:2], folds)


def fold_scores(X, y, X_new, k=5, seed=0):
    """Cross-conformal inputs from a logistic regression on k folds: each fold's scores of the new points and of
    the non-members it held out."""
    book, held = [], []
    for train, test in StratifiedKFold(k, shuffle=True, random_state=seed).split(X, y):
        clf = LogisticRegression().fit(X[train], y[train])
        book.append(clf.decision_function(X_new))
        held.append(clf.decision_function(X[test][y[test] == 0]))
    return np.array(book), held


@pytest.mark.slow
@pytest.mark.parametrize("shift", [0.0, 1.0])
def test_held_out_nonmembers_get_evidence_at_most_at_the_nominal_rate(shift):
    """The null, where the truth is known: new non-members drawn like the known ones. Whether the classifier has
    signal (members shifted) or none, a new non-member's p-value is below 0.05 at most 5% of the time (+ binomial
    noise), and with signal new members reach it far more often (so the check can fail)."""
    rng = np.random.default_rng(1)
    below, member_below, total = 0, 0, 0
    for rep in range(60):
        X = np.r_[rng.normal(shift, 1, (40, 3)), rng.normal(0, 1, (40, 3))]
        y = np.r_[np.ones(40), np.zeros(40)].astype(int)
        new_non, new_mem = rng.normal(0, 1, (20, 3)), rng.normal(shift, 1, (20, 3))
        book, held = fold_scores(X, y, np.r_[new_non, new_mem], seed=rep)
        p = cross_conformal_p(book, held)
        below += int((p[:20] < 0.05).sum())
        member_below += int((p[20:] < 0.05).sum())
        total += 20
    rate, se = below / total, np.sqrt(0.05 * 0.95 / total)
    assert rate <= 0.05 + 3 * se, rate
    if shift:
        assert member_below / total > 0.2
    else:
        assert member_below / total <= 0.05 + 3 * se


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
    # predict's doubled cross-conformal p-values need twice as many: 2/(n+1) < 0.05 from n = 40 on
    doubled = run_verdicts([2 / 21, 0.5, 0.9], [[], [], []], n_nonmembers=20, factor=2)
    assert "2/21" in doubled[0].reason and "40 would be needed" in doubled[0].reason
    assert nonmembers_needed(0.05, factor=2) == next(n for n in range(1, 1000) if 2 / (n + 1) < 0.05) == 40
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


def test_inconclusive_reasons_name_each_cause():
    from docaudit.audit.meta import RETRAIN, inconclusive_reasons

    card = {
        "pooled_bootstrap_95": {"auc": {"point": 0.9, "ci_low": 0.8, "ci_high": 0.97}},
        "blind": {"blind_auc": 0.5, "best_kind": "tfidf"},
    }
    conformal = {"nonmember_tokens_min": 100}
    assert inconclusive_reasons(card, None, 500, None, 0.05) == [RETRAIN]
    assert inconclusive_reasons(card, conformal, 500, 0.5, 0.05) == []
    (why,) = inconclusive_reasons(card, conformal, 99, 0.5, 0.05)
    assert "too few tokens queried: 99" in why
    (why,) = inconclusive_reasons(card, conformal, 500, 0.01, 0.05)
    assert "blind baseline already separates this document" in why
    shifted = {**card, "blind": {"blind_auc": 0.66, "best_kind": "dates"}}
    (why,) = inconclusive_reasons(shifted, conformal, 500, 0.5, 0.05)
    assert "AUC 0.660 (dates)" in why
    chance = {**card, "pooled_bootstrap_95": {"auc": {"point": 0.47, "ci_low": 0.32, "ci_high": 0.61}}}
    assert len(inconclusive_reasons(chance, conformal, 500, 0.5, 0.05)) == 2  # chance, and blind within 0.05 of it
