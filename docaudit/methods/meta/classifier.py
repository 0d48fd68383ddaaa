"""The meta-classifier (docs/methods.md, "Meta-classifier"): normalization → features → min-max scaling → random
forest in one Pipeline, so every fitted statistic (dictionaries, bin edges, scaling, trees) is learned on training
documents only. Checked against computationalprivacy/document-level-membership-inference
``src/meta_classifier.py`` (``scale_features``: min-max scaling fit on the training features; ``train_RandomForest``:
500 trees, max depth 5, min samples per leaf 3) and ``main.py`` (train on k-1 chunks, test on the held-out one).

With ``norm``/``features`` = "auto" the configuration is chosen by an inner cross-validated search inside each
training fold, so the outer AUC measures the whole procedure. The search's forests have ``select_trees`` trees, fewer
on small training sets (``MetaConfig.search_trees``; fewer than the final forest's: the search only ranks the
candidates, and ten candidates times the inner folds of 500-tree forests were most of a cached run's time on small
sets); the chosen configuration is then fit with
``n_estimators`` trees on the whole training fold, as ``GridSearchCV(refit=True)`` would with equal sizes (the search
is written out so that a progress bar counts its fits)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler
from tqdm.auto import tqdm

from docaudit.config import MetaConfig
from docaudit.errors import DocauditError
from docaudit.methods.meta.features import DocumentFeatures
from docaudit.methods.meta.normalize import TokenNormalizer
from docaudit.metrics import FoldMetrics, chunk_folds, fold_metrics, summarize
from docaudit.query import rates
from docaudit.query.stats import TokenStats


def as_documents(stats: Sequence[TokenStats]) -> np.ndarray:
    """TokenStats in a 1-d object array, the X that scikit-learn's splitters and searches index."""
    out = np.empty(len(stats), dtype=object)
    out[:] = list(stats)
    return out


def _ignore(n: int) -> None:
    """No progress shown."""


def build_pipeline(
    meta: MetaConfig,
    seed: int,
    norm: str = "max_tf",
    features: str = "hist",
    trees: int | None = None,
    documents: int | None = None,
) -> Pipeline:
    """The unfitted meta-classifier: normalization, feature extraction, min-max scaling and the random forest (of
    ``trees`` trees, by default ``meta.n_estimators``, seeded by the run's ``seed``; fit on the jobs
    :meth:`MetaConfig.jobs` gives for ``documents`` training documents, ``meta.n_jobs`` when not given). The jobs
    change the time only: every tree's seed is drawn before they start."""
    return Pipeline(
        [
            ("normalize", TokenNormalizer(method=norm, eps=meta.maxnorm_eps)),
            ("features", DocumentFeatures(kind=features, bins=meta.bins, token_count=meta.agg_token_count)),
            ("scale", MinMaxScaler()),
            (
                "forest",
                RandomForestClassifier(
                    n_estimators=meta.n_estimators if trees is None else trees,
                    max_depth=meta.max_depth,
                    min_samples_leaf=meta.min_samples_leaf,
                    random_state=seed,
                    n_jobs=meta.n_jobs if documents is None else meta.jobs(documents),
                ),
            ),
        ]
    )


def one_job(estimator):
    """The fitted ``estimator`` (a pipeline, a search over pipelines) with every random forest in it predicting on
    one job: with more, threads add the trees' probabilities in the order they finish, and the last bits of the
    sums (which break ties between documents, hence AUCs) would change from run to run. Fitting stays parallel;
    a saved file's ``n_jobs`` decides nothing."""
    pipe = getattr(estimator, "best_estimator_", estimator)
    for _, step in getattr(pipe, "steps", ()):
        if isinstance(step, RandomForestClassifier):
            step.n_jobs = 1
    return estimator


def auc_on_one_job(estimator: Pipeline, X, y) -> float:
    """The ROC AUC of a fitted candidate on held-out documents, its forest predicting on one job (:func:`one_job`):
    the inner search's scorer, so that its choice does not change from run to run."""
    return float(roc_auc_score(y, one_job(estimator).predict_proba(X)[:, 1]))


def select(
    X: np.ndarray, labels: np.ndarray, meta: MetaConfig, seed: int, tick: Callable[[int], None] = _ignore
) -> tuple[str, str]:
    """The (normalization, features) pair the meta-classifier uses on training documents ``X``: the only
    candidate, or the one of best mean inner-CV AUC (the first of equals, as ``GridSearchCV`` ranks them) with
    forests of ``meta.search_trees(len(X))`` trees; ``tick(n)`` after every candidate's ``n`` inner fits."""
    candidates = meta.candidates()
    if len(candidates) == 1:
        return candidates[0]
    inner = StratifiedKFold(n_splits=meta.inner_folds, shuffle=True, random_state=seed)
    trees = meta.search_trees(len(X))
    means = []
    for norm, features in candidates:
        pipe = build_pipeline(meta, seed, norm, features, trees, len(X))
        means.append(np.mean(cross_val_score(pipe, X, labels, cv=inner, scoring=auc_on_one_job)))
        tick(meta.inner_folds)
    return candidates[int(np.argmax(np.nan_to_num(means, nan=-np.inf)))]


def fit_selected(
    X: np.ndarray, labels: np.ndarray, meta: MetaConfig, seed: int, tick: Callable[[int], None] = _ignore
) -> Pipeline:
    """The meta-classifier fit on ``X``: the pair :func:`select` chooses on ``X``, its full forest fit on ``X``."""
    pipe = one_job(build_pipeline(meta, seed, *select(X, labels, meta, seed, tick), documents=len(X)).fit(X, labels))
    tick(1)
    return pipe


def chosen(pipe: Pipeline) -> str:
    """The (normalization, features) configuration a fitted pipeline uses, e.g. ``max_tf+hist``."""
    return f"{pipe.named_steps['normalize'].method}+{pipe.named_steps['features'].kind}"


def fit(
    stats: Sequence[TokenStats], labels: ArrayLike, meta: MetaConfig, seed: int, progress: bool = False
) -> Pipeline:
    """Fit the meta-classifier (seeded by the run's ``seed``) on all given documents (with ``progress``, a bar of
    its forest fits)."""
    labels = np.asarray(labels)
    _check_inner(labels, meta)
    with _fits_bar(meta.forest_fits(), "fitting the meta-classifier", progress) as bar:
        return fit_selected(as_documents(stats), labels, meta, seed, bar.update)


def _fits_bar(total: int, desc: str, progress: bool) -> tqdm:
    """A bar of forest fits with its ETA (none without ``progress``)."""
    return tqdm(total=total, desc=desc, unit="fit", disable=not progress)


def _check_inner(labels, meta: MetaConfig) -> None:
    if len(meta.candidates()) > 1 and min((labels == 0).sum(), (labels == 1).sum()) < meta.inner_folds:
        raise DocauditError(
            f"too few documents for --norm/--features auto: the inner cross-validation needs {meta.inner_folds} "
            "members and non-members in every training fold (use more documents, fewer --folds, or fix the config)"
        )


@dataclass
class Evaluation:
    """Out-of-fold results of k-fold chunk evaluation; ``pipelines``: each fold's fitted pipeline (the chosen one
    under "auto"), kept so that new documents can be compared with the non-members that fold held out."""

    labels: np.ndarray
    scores: np.ndarray
    fold_of: np.ndarray
    folds: list[FoldMetrics]
    configs: list[str]
    pipelines: list[Pipeline] = field(default_factory=list)

    @property
    def summary(self) -> dict:
        """Mean and standard deviation of the fold metrics."""
        return summarize(self.folds)


def evaluate(
    stats: Sequence[TokenStats],
    labels: ArrayLike,
    meta: MetaConfig,
    seed: int,
    folds: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
    progress: bool = True,
) -> Evaluation:
    """Train on k-1 chunks, score the held-out chunk, for every fold (folds and forests seeded by the run's
    ``seed``); scores are P(member)."""
    labels = np.asarray(labels)
    folds = folds or chunk_folds(labels, meta.folds, seed)
    X = as_documents(stats)
    scores, fold_of, results, configs, pipelines = np.zeros(len(labels)), np.zeros(len(labels), dtype=int), [], [], []
    start = time.perf_counter()
    with _fits_bar(meta.forest_fits(len(folds)), "meta-classifier folds", progress) as bar:
        for i, (train, test) in enumerate(folds):
            _check_inner(labels[train], meta)
            pipe = fit_selected(X[train], labels[train], meta, seed, bar.update)
            scores[test] = pipe.predict_proba(X[test])[:, 1]
            fold_of[test] = i
            results.append(fold_metrics(labels[test], scores[test]))
            configs.append(chosen(pipe))
            pipelines.append(pipe)
    grown = sum(meta.trees(1, len(train)) for train, _ in folds)
    rates.record_forest(grown, time.perf_counter() - start)
    return Evaluation(labels, scores, fold_of, results, configs, pipelines)
