"""The meta-classifier's model selection (``--norm``/``--features auto``): the written-out inner search chooses what
scikit-learn's ``GridSearchCV`` chooses with forests of the same size, the chosen pair is fit with the full forest,
and a bar counts every forest fit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from test_classifier_safety import synthetic_stats

from docaudit.config import MetaConfig
from docaudit.methods.meta import classifier

META = MetaConfig(n_estimators=5, select_trees=5, bins=10, n_jobs=1, norms=("none", "max_tf", "ratio_tf"))


def reference_choice(X, labels, meta: MetaConfig, seed: int) -> tuple[str, str]:
    """What GridSearchCV (refit off) picks over the same candidates, splitter, scoring and forest size."""
    grid = [{"normalize__method": [n], "features__kind": [f]} for n, f in meta.candidates()]
    inner = StratifiedKFold(n_splits=meta.inner_folds, shuffle=True, random_state=seed)
    pipe = classifier.build_pipeline(meta, seed, trees=meta.select_trees)
    best = GridSearchCV(pipe, grid, cv=inner, scoring="roc_auc", refit=False).fit(X, labels).best_params_
    return best["normalize__method"], best["features__kind"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_selection_matches_grid_search(seed):
    rng = np.random.default_rng(seed)
    stats, labels = synthetic_stats(18, rng), np.array([0, 1] * 9)
    for s in stats[1::2]:  # members a little more likely, so the candidates differ
        s.logp[:] = s.logp * 0.8
    X = classifier.as_documents(stats)
    assert classifier.select(X, labels, META, seed) == reference_choice(X, labels, META, seed)


def test_chosen_pair_is_fit_with_the_full_forest():
    rng = np.random.default_rng(0)
    stats, labels = synthetic_stats(12, rng), np.array([0, 1] * 6)
    ticks = []
    pipe = classifier.fit_selected(
        classifier.as_documents(stats), labels, replace(META, select_trees=5), 0, ticks.append
    )
    assert len(pipe.named_steps["forest"].estimators_) == META.n_estimators
    assert sum(ticks) == META.forest_fits() == 1 + len(META.candidates()) * META.inner_folds


def test_evaluation_bar_counts_every_fit(capsys):
    rng = np.random.default_rng(0)
    stats, labels = synthetic_stats(12, rng), np.array([0, 1] * 6)
    meta = replace(META, folds=2, norms=("none",), features="hist")
    classifier.evaluate(stats, labels, meta, 0, progress=True)
    err = capsys.readouterr().err
    assert "meta-classifier folds" in err and "2/2" in err
    classifier.evaluate(stats, labels, meta, 0, progress=False)
    assert capsys.readouterr().err == ""


def test_search_forests_grow_with_the_training_documents():
    """The search's forests: 3 trees per training document, at least 20, at most ``select_trees`` (and never more
    than the final forest); every forest of a fold's search has that many trees."""
    meta = MetaConfig()
    assert [meta.search_trees(n) for n in (1, 6, 7, 20, 33, 34, 1000)] == [20, 20, 21, 60, 99, 100, 100]
    assert MetaConfig(n_estimators=50).search_trees(1000) == 50 and meta.search_trees() == 100
    rng = np.random.default_rng(0)
    stats, labels = synthetic_stats(14, rng), np.array([0, 1] * 7)
    grown = []
    original = classifier.build_pipeline

    def spy(*args, **kwargs):
        pipe = original(*args, **kwargs)
        grown.append(pipe.named_steps["forest"].n_estimators)
        return pipe

    meta = replace(META, select_trees=100, n_estimators=200)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(classifier, "build_pipeline", spy)
        classifier.fit_selected(classifier.as_documents(stats), labels, meta, 0)
    assert grown == [3 * 14] * len(meta.candidates()) + [200]
