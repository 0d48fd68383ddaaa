"""Each blind baseline as a scikit-learn estimator of texts: its conventions, and the same scores as the kind's
whole pipeline fit on the raw texts (the independent reference), from texts or from the shared feature views."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.naive_bayes import MultinomialNB
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from docaudit.errors import DocauditError
from docaudit.methods.blind import KINDS, BlindClassifier, BlindFeatures, evaluate_blind, make_pipeline
from docaudit.metrics import chunk_folds

WORDS = "river mill lantern harbour carriage telegraph engine station orchard parish letter ledger".split()


def texts_and_labels(n: int = 24, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Short texts whose words and years lean one way for members, the other for non-members."""
    rng = np.random.default_rng(seed)
    y = np.array([1, 0] * (n // 2))
    texts = []
    for label in y:
        words = rng.choice(WORDS[:8] if label else WORDS[4:], size=40)
        years = rng.integers(1990, 2020, size=3) if label else rng.integers(1850, 1890, size=3)
        texts.append(" ".join(words) + " in " + ", ".join(map(str, years)))
    return texts, y


def reference_scores(kind: str, train_texts, y, test_texts, seed: int) -> np.ndarray:
    """The kind's whole pipeline fit on the raw texts; member-likeness as docaudit orients it."""
    pipe = make_pipeline(kind, seed).fit(train_texts, y)
    clf = pipe.steps[-1][1]
    col = int(np.flatnonzero(clf.classes_ == 1)[0])
    if isinstance(clf, MultinomialNB):
        logp = pipe.predict_log_proba(test_texts)
        return logp[:, col] - logp[:, 1 - col]
    if hasattr(pipe, "decision_function"):
        d = pipe.decision_function(test_texts)
        return d if col == 1 else -d
    return pipe.predict_proba(test_texts)[:, col]


@pytest.mark.parametrize("check", [check_no_attributes_set_in_init, check_get_params_invariance, check_set_params])
def test_sklearn_conventions(check):
    check("BlindClassifier", BlindClassifier())


def test_default_constructible_and_clone_round_trip():
    check_parameters_default_constructible("BlindClassifier", BlindClassifier())
    est = BlindClassifier("dates", max_chars=500, random_state=7)
    copy = clone(est)
    assert copy is not est and copy.get_params() == est.get_params() == {
        "kind": "dates",
        "max_chars": 500,
        "random_state": 7,
    }
    assert clone(est.set_params(kind="nb")).kind == "nb"
    assert not hasattr(copy, "model_")


@pytest.mark.parametrize("kind", KINDS)
def test_scores_match_the_whole_pipeline_on_raw_texts(kind):
    texts, y = texts_and_labels()
    train, test = np.arange(16), np.arange(16, 24)
    expected = reference_scores(kind, [texts[i] for i in train], y[train], [texts[i] for i in test], seed=3)
    est = BlindClassifier(kind, random_state=3)
    from_texts = clone(est).fit([texts[i] for i in train], y[train]).decision_function([texts[i] for i in test])
    features = BlindFeatures(texts)
    from_views = clone(est).fit(features[train], y[train]).decision_function(features[test])
    np.testing.assert_allclose(from_texts, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(from_views, from_texts)
    proba = clone(est).fit(features[train], y[train]).predict_proba(features[test])
    assert proba.shape == (8, 2) and np.allclose(proba.sum(axis=1), 1.0)


def test_views_of_views_index_the_original_texts():
    texts, _ = texts_and_labels()
    features = BlindFeatures(texts)
    rows = np.array([5, 1, 9, 3])
    view = features[rows][np.array([2, 0])]
    assert len(view) == 2
    np.testing.assert_array_equal(view.matrix("dates"), features.matrix("dates")[[9, 5]])


def test_evaluate_blind_is_the_estimator_out_of_fold():
    texts, y = texts_and_labels()
    folds = chunk_folds(y, 3, 5)
    out = evaluate_blind(texts, y, folds, kinds=("tfidf",), seed=5)
    expected = np.full(len(y), np.nan)
    for train, test in folds:
        tr, te = [texts[i] for i in train], [texts[i] for i in test]
        expected[test] = reference_scores("tfidf", tr, y[train], te, seed=5)
    np.testing.assert_allclose(out["kinds"]["tfidf"]["scores"], expected, rtol=1e-12, atol=1e-12)


def test_one_class_or_mismatched_labels_are_refused():
    texts, y = texts_and_labels(8)
    with pytest.raises(DocauditError, match="one class"):
        BlindClassifier().fit(texts, np.ones(8))
    with pytest.raises(DocauditError, match="labels"):
        BlindClassifier().fit(texts, y[:6])


@pytest.mark.parametrize("kind", KINDS)
def test_the_fold_models_kept_score_as_a_refit_does(kind):
    """``evaluate_blind`` keeps each fold's fitted model; what reuses them (the report's blind p-values, a card's
    conformal section) gets the scores a refit on the same folds gives, and nothing on other folds."""
    from docaudit.methods.blind import fit_fold, fitted_on, fold_scores

    texts, y = texts_and_labels()
    features = BlindFeatures(texts)
    folds = chunk_folds(y, 3, 0)
    blind = evaluate_blind(features, y, folds, kinds=(kind,), seed=0)
    kept = fitted_on(blind, kind, folds)
    assert kept is not None and len(kept) == 3
    for model, (train, test) in zip(kept, folds):
        refit = fit_fold(BlindFeatures(texts), kind, y, train, 0)
        np.testing.assert_array_equal(
            fold_scores(model, features, kind, test), fold_scores(refit, features, kind, test)
        )
    assert fitted_on(blind, kind, chunk_folds(y, 3, 1)) is None and fitted_on(blind, "other", folds) is None
