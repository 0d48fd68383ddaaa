"""The meta-classifier (docs/methods.md, "Meta-classifier"): normalization → features → min-max scaling → random
forest in one Pipeline, so every fitted statistic (dictionaries, bin edges, scaling, trees) is learned on training
documents only. Checked against computationalprivacy/document-level-membership-inference
``src/meta_classifier.py`` (``scale_features``: min-max scaling fit on the training features; ``train_RandomForest``:
500 trees, max depth 5, min samples per leaf 3) and ``main.py`` (train on k-1 chunks, test on the held-out one).

With ``norm``/``features`` = "auto" the pipeline is wrapped in an inner cross-validated grid search, so the
configuration is chosen inside each training fold and the outer AUC measures the whole procedure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler
from tqdm.auto import tqdm

from docaudit.config import MetaConfig
from docaudit.errors import DocauditError
from docaudit.methods.meta.features import DocumentFeatures
from docaudit.methods.meta.normalize import TokenNormalizer
from docaudit.metrics import FoldMetrics, chunk_folds, fold_metrics, summarize
from docaudit.query.stats import TokenStats

Estimator = Pipeline | GridSearchCV  # one pipeline, or the inner search over candidate pipelines


def as_documents(stats: Sequence[TokenStats]) -> np.ndarray:
    """TokenStats in a 1-d object array, the X that scikit-learn's splitters and searches index."""
    out = np.empty(len(stats), dtype=object)
    out[:] = list(stats)
    return out


def build_pipeline(meta: MetaConfig, norm: str = "max_tf", features: str = "hist") -> Pipeline:
    """The unfitted meta-classifier: normalization, feature extraction, min-max scaling and the random forest."""
    return Pipeline(
        [
            ("normalize", TokenNormalizer(method=norm, eps=meta.maxnorm_eps)),
            ("features", DocumentFeatures(kind=features, bins=meta.bins, token_count=meta.agg_token_count)),
            ("scale", MinMaxScaler()),
            (
                "forest",
                RandomForestClassifier(
                    n_estimators=meta.n_estimators,
                    max_depth=meta.max_depth,
                    min_samples_leaf=meta.min_samples_leaf,
                    random_state=meta.seed,
                    n_jobs=meta.n_jobs,
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


def build_estimator(meta: MetaConfig) -> Estimator:
    """A single pipeline, or an inner-CV search over the candidate (normalization, features) pairs."""
    candidates = meta.candidates()
    if len(candidates) == 1:
        return build_pipeline(meta, *candidates[0])
    grid = [{"normalize__method": [n], "features__kind": [f]} for n, f in candidates]
    inner = StratifiedKFold(n_splits=meta.inner_folds, shuffle=True, random_state=meta.seed)
    return GridSearchCV(build_pipeline(meta), grid, cv=inner, scoring=auc_on_one_job, refit=True)


def chosen(estimator: Estimator) -> str:
    """The (normalization, features) configuration a fitted estimator uses, e.g. ``max_tf+hist``."""
    pipe = getattr(estimator, "best_estimator_", estimator)
    return f"{pipe.named_steps['normalize'].method}+{pipe.named_steps['features'].kind}"


def fit(stats: Sequence[TokenStats], labels: ArrayLike, meta: MetaConfig) -> Estimator:
    """Fit the meta-classifier on all given documents."""
    labels = np.asarray(labels)
    _check_inner(labels, meta)
    return one_job(build_estimator(meta).fit(as_documents(stats), labels))


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
    folds: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
    progress: bool = True,
) -> Evaluation:
    """Train on k-1 chunks, score the held-out chunk, for every fold; scores are P(member)."""
    labels = np.asarray(labels)
    folds = folds or chunk_folds(labels, meta.folds, meta.seed)
    X = as_documents(stats)
    scores, fold_of, results, configs, pipelines = np.zeros(len(labels)), np.zeros(len(labels), dtype=int), [], [], []
    for i, (train, test) in enumerate(tqdm(folds, desc="folds", disable=not progress)):
        _check_inner(labels[train], meta)
        est = one_job(clone(build_estimator(meta)).fit(X[train], labels[train]))
        scores[test] = est.predict_proba(X[test])[:, 1]
        fold_of[test] = i
        results.append(fold_metrics(labels[test], scores[test]))
        configs.append(chosen(est))
        pipelines.append(getattr(est, "best_estimator_", est))
    return Evaluation(labels, scores, fold_of, results, configs, pipelines)
