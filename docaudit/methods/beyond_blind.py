"""How much the model adds over the blind baseline (docs/methods.md, "Beyond the blind baseline").

A blind classifier (no language model, :mod:`docaudit.methods.blind`) that separates the two document sets shows
that they differ by distribution; it does not say whether the model adds anything on top. Das, Zhang and Tramèr
(2024, "Blind Baselines Beat Membership Inference Attacks for Foundation Models") make the point; this module
answers it. On the same outer folds, each document gets three out-of-fold scores:

- ``blind``: the blind classifier fit on the training fold;
- ``model``: the membership method fit on the training fold (the meta-classifier, a detector at document level,
  or a score that needs no fitting);
- ``combined``: a logistic regression on the pair (blind score, model score), standardized. It is fit inside the
  training fold only, on *inner* out-of-fold scores: the training fold is split into ``inner_folds`` chunks, and
  each chunk's blind and model scores come from classifiers fit on the other chunks, so the combiner learns how
  the two scores behave on documents their classifiers did not see, as the test fold's are. It is then applied to
  the test fold's (blind, model) pair, whose scores come from classifiers fit on the whole training fold. No test
  document's label reaches any of the fits that score it. Each score is standardized within the batch one fitted
  classifier scored (inner and outer classifiers differ in scale), and the weights are kept non-negative.

The blind baseline the combined score is compared with is put through exactly the same treatment: a combiner on
the blind score alone, fit on the same inner out-of-fold scores with the same standardization, non-negative
weight and intercept, applied to the same standardized test scores (``baseline``). Comparing with the raw pooled
blind scores instead would be comparing unlike scores: per-fold standardization removes fold-to-fold offsets of
the blind classifier that lower the pooled blind AUC, so the difference would favour the combined score even when
the model's score is noise. When the combiner gives the model's score weight 0 in every outer fold (including the
fallback where every weight is dropped), the combined score *is* the baseline and the model adds nothing by
construction; the verdict says so.

``delta = AUC(combined) - AUC(baseline)`` over the pooled out-of-fold scores asks whether the model's score
carries evidence the blind score lacks. Its interval is a paired stratified bootstrap over documents (the same resamples
for both AUCs, :func:`docaudit.metrics.paired_auc_difference_ci`); its one-sided p-value for ``delta > 0`` is
DeLong's test for two correlated ROC curves (:func:`docaudit.metrics.delong_test`), chosen because the AUC
difference of two scores of the same documents is a difference of U-statistics whose variance DeLong et al. (1988)
give exactly from placement values: the p-value has no resampling noise and costs O(N log N).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from tqdm.auto import tqdm

from docaudit.config import BeyondBlindConfig, MetaConfig
from docaudit.errors import DocauditError
from docaudit.inference.comparison import comparison_verdict, reading
from docaudit.methods.blind import BlindClassifier, BlindFeatures
from docaudit.methods.document_level import LEVELS
from docaudit.methods.meta import classifier
from docaudit.metrics import chunk_folds, delong_test, paired_auc_difference_ci
from docaudit.query import rates
from docaudit.query.progress import shown

FoldScorer = Callable[[int, np.ndarray, np.ndarray], np.ndarray]
"""``(outer fold index, training indices, test indices) -> scores of the test documents`` (higher = member), from a
classifier fit on the training documents only."""

TEST = "DeLong (1988), one-sided: AUC(combined) > AUC(blind baseline through the same combiner)"
COMBINER = (
    "logistic regression on the (blind, model) scores, each standardized within the batch its classifier scored, "
    "fit on inner out-of-fold scores; compared with the same combiner fit on the blind score alone"
)


def blind_scorer(features: BlindFeatures, kind: str, labels, seed: int = 0) -> FoldScorer:
    """The blind classifier ``kind`` refit on any training indices."""
    estimator, y = BlindClassifier(kind, features.max_chars, random_state=seed), np.asarray(labels).astype(int)
    return lambda fold, train, test: clone(estimator).fit(features[train], y[train]).decision_function(features[test])


def meta_scorer(stats, labels, meta: MetaConfig, configs: Sequence[str], seed: int) -> FoldScorer:
    """The meta-classifier refit on any training indices of outer fold ``i`` with the configuration chosen on that
    fold (``configs[i]``, e.g. ``max_tf+hist``), so the inner fits search nothing again. These fits only give the
    combiner inner scores to weigh (the outer fold's test scores are the evaluation's own), so their forests are the
    search's (``meta.search_trees``), which rank documents as the full forest does (docs/benchmarks.md, "Model
    selection")."""
    X, y = classifier.as_documents(stats), np.asarray(labels)

    def score(fold, train, test):
        start = time.perf_counter()
        trees = meta.search_trees(len(train))
        norm, features = configs[fold].split("+")
        pipe = classifier.build_pipeline(meta, seed, norm, features, trees, len(train))
        scores = classifier.one_job(pipe.fit(X[train], y[train])).predict_proba(X[test])[:, 1]
        rates.record_forest(trees, time.perf_counter() - start)
        return scores

    return score


def level_scorer(values: np.ndarray, doc: np.ndarray, labels, level: str) -> FoldScorer:
    """A detector's sequence scores taken to documents at ``level`` (``doc_avg``, ``doc_threshold``)."""
    labels = np.asarray(labels)
    return lambda fold, train, test: LEVELS[level](values, doc, labels, train, test)[1]


def fixed_scorer(scores) -> FoldScorer:
    """A score that needs no fitting (e.g. a book's mean snippet score)."""
    scores = np.asarray(scores, dtype=np.float64)
    return lambda fold, train, test: scores[test]


def too_few(labels, folds, inner_folds: int) -> str | None:
    """Why the comparison cannot run on these folds (a training fold holds fewer than ``inner_folds`` documents of a
    class), or None."""
    labels = np.asarray(labels)
    least = min(min((labels[train] == c).sum() for c in (0, 1)) for train, _ in folds)
    if least < inner_folds:
        return (
            f"a training fold holds only {least} documents of a class; the combined classifier's {inner_folds} "
            "inner folds need at least that many of each"
        )
    return None


def out_of_fold(labels, folds, scorer: FoldScorer) -> np.ndarray:
    """Each document's score from the fold that tests it."""
    out = np.full(len(labels), np.nan)
    for i, (train, test) in enumerate(folds):
        out[test] = scorer(i, train, test)
    return out


def combined_scores(
    labels, folds, blind: FoldScorer, model: FoldScorer, blind_oof, model_oof, inner_folds: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Out-of-fold scores of the combiner (module docstring) and of its blind-only twin: per outer fold, a
    non-negative logistic regression fit on the training documents' inner out-of-fold (blind, model) scores,
    applied to the test documents' (blind, model); and the same fit on the blind column alone, applied to the test
    documents' blind score. Returns ``(combined, baseline, model_weights)`` (the model's weight per outer fold)."""
    labels = np.asarray(labels).astype(int)
    combined, baseline = np.full(len(labels), np.nan), np.full(len(labels), np.nan)
    model_weights = np.zeros(len(folds))
    for i, (train, test) in enumerate(tqdm(folds, desc="beyond-blind refits", unit="fold", disable=not shown())):
        pairs = np.empty((len(train), 2))
        for inner_train, inner_test in chunk_folds(labels[train], inner_folds, seed):
            pairs[inner_test, 0] = standardized(blind(i, train[inner_train], train[inner_test]))
            pairs[inner_test, 1] = standardized(model(i, train[inner_train], train[inner_test]))
        tested = np.column_stack([standardized(blind_oof[test]), standardized(model_oof[test])])
        weights, bias = nonnegative_logistic(pairs, labels[train])
        combined[test] = tested @ weights + bias
        model_weights[i] = weights[1]
        weight, bias = nonnegative_logistic(pairs[:, :1], labels[train])
        baseline[test] = tested[:, :1] @ weight + bias
    return combined, baseline, model_weights


def nonnegative_logistic(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Weights and intercept of a logistic regression whose weights are all >= 0: a score with a negative weight
    is dropped and the rest refit (every score is oriented higher = member, so a negative weight can only be
    small-sample noise, and it would let the combined score reward a score for pointing the wrong way). With every
    weight dropped, the first column alone is kept with weight 1. Scikit-learn's default L2 penalty (``C=1``)."""
    keep = np.arange(X.shape[1])
    while len(keep):
        fit = LogisticRegression().fit(X[:, keep], y)
        coef = fit.coef_[0]
        if (coef >= 0).all():
            weights = np.zeros(X.shape[1])
            weights[keep] = coef
            return weights, float(fit.intercept_[0])
        keep = keep[coef >= 0]
    weights = np.zeros(X.shape[1])
    weights[0] = 1.0
    return weights, 0.0


def standardized(scores) -> np.ndarray:
    """Scores of one batch (the documents one fitted classifier scored) as z-scores within the batch: classifiers
    fit on more documents give larger scores, so the combiner compares each document with the others its own
    classifier scored. Uses no label; a constant batch gives zeros."""
    scores = np.asarray(scores, dtype=np.float64)
    sd = scores.std()
    return (scores - scores.mean()) / sd if sd > 0 else np.zeros_like(scores)


@dataclass
class BeyondBlind:
    """The three out-of-fold scores per document and what they say; ``as_json`` gives the reported fields."""

    labels: np.ndarray
    blind: np.ndarray
    model: np.ndarray
    combined: np.ndarray
    delta_ci: tuple[float, float]
    p_value: float | None
    verdict: str  # a template of docaudit.inference.comparison, read with the blind kind by as_json
    info: dict
    baseline: np.ndarray | None = None

    @property
    def aucs(self) -> dict[str, float]:
        """``auc_blind``: the blind baseline as compared (through the blind-only combiner); ``auc_blind_raw``: the
        blind classifier's pooled raw out-of-fold scores; ``auc_model``, ``auc_combined``."""
        from sklearn.metrics import roc_auc_score

        baseline = self.blind if self.baseline is None else self.baseline
        return {
            "auc_blind": float(roc_auc_score(self.labels, baseline)),
            "auc_blind_raw": float(roc_auc_score(self.labels, self.blind)),
            "auc_model": float(roc_auc_score(self.labels, self.model)),
            "auc_combined": float(roc_auc_score(self.labels, self.combined)),
        }

    def as_json(self) -> dict:
        """The reported fields; ``verdict`` names the blind classifier compared with (``info["blind_kind"]``)."""
        aucs = self.aucs
        return {
            **aucs,
            "delta": aucs["auc_combined"] - aucs["auc_blind"],
            "delta_ci_low": self.delta_ci[0],
            "delta_ci_high": self.delta_ci[1],
            "p_value": self.p_value,
            "test": TEST,
            "verdict": reading(self.verdict, self.info.get("blind_kind")),
            **self.info,
        }


def beyond_blind(
    labels,
    folds,
    blind: FoldScorer,
    model: FoldScorer,
    blind_oof=None,
    model_oof=None,
    config: BeyondBlindConfig = BeyondBlindConfig(),
    seed: int = 0,
) -> BeyondBlind:
    """Compare the combined classifier with the blind one on ``folds`` (module docstring). ``blind_oof`` and
    ``model_oof``: the out-of-fold scores when already computed on these folds (else they are computed with the
    scorers)."""
    labels = np.asarray(labels).astype(int)
    if not 0 < config.confidence < 1 or not 0 < config.p_level < 1:
        raise DocauditError(f"confidence and p level must be in (0, 1), got {config.confidence}, {config.p_level}")
    reason = too_few(labels, folds, config.inner_folds)
    if reason:
        raise DocauditError(f"cannot compare with the blind baseline: {reason}")
    blind_oof = out_of_fold(labels, folds, blind) if blind_oof is None else np.asarray(blind_oof, dtype=np.float64)
    model_oof = out_of_fold(labels, folds, model) if model_oof is None else np.asarray(model_oof, dtype=np.float64)
    combined, baseline, weights = combined_scores(
        labels, folds, blind, model, blind_oof, model_oof, config.inner_folds, seed
    )
    ci = paired_auc_difference_ci(labels, baseline, combined, config.n_boot, 1 - config.confidence, seed)
    test = delong_test(labels, baseline, combined)
    details = {
        "combiner": COMBINER,
        "folds_model_weighted": int((weights > 0).sum()),
        **({"p_value_reason": test.reason} if test.reason else {}),
        "folds": len(folds),
        "inner_folds": config.inner_folds,
        "n_members": int(labels.sum()),
        "n_nonmembers": int((labels == 0).sum()),
        "n_boot": config.n_boot,
        "confidence": config.confidence,
    }
    return BeyondBlind(
        labels,
        blind_oof,
        model_oof,
        combined,
        (ci.lo, ci.hi),
        test.p_value,
        comparison_verdict(ci.lo, test.p_value, config.p_level, bool((weights > 0).any())),
        details,
        baseline,
    )


@dataclass(frozen=True)
class Candidate:
    """The membership scores compared with the blind baseline: their ``name``, the ``scorer`` that fits them on a
    fold's training documents, and their out-of-fold scores on the same folds when already computed (``oof``)."""

    name: str
    scorer: FoldScorer
    oof: np.ndarray | None = None


def against_blind(
    labels,
    folds,
    features: BlindFeatures,
    blind_result: dict,
    model: Candidate,
    config: BeyondBlindConfig = BeyondBlindConfig(),
    seed: int = 0,
) -> dict:
    """The ``beyond_blind`` fields for a model against the best kind of a blind evaluation on the same folds
    (:func:`docaudit.methods.blind.evaluate_blind` on ``features``), or ``{"unavailable": reason}`` when the folds
    are too small for the inner folds."""
    reason = too_few(labels, folds, config.inner_folds)
    if reason:
        return {"unavailable": reason, "model": model.name}
    kind = blind_result["best_kind"]
    result = beyond_blind(
        labels,
        folds,
        blind_scorer(features, kind, labels, seed),
        model.scorer,
        blind_oof=blind_result["kinds"][kind]["scores"],
        model_oof=model.oof,
        config=config,
        seed=seed,
    )
    return replace(result, info={"model": model.name, "blind_kind": kind} | result.info).as_json()
