"""Evaluation metrics and the k-fold "chunks" shared by every method, so all are scored on the same splits."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple  # noqa: E402

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.model_selection import StratifiedKFold

from docaudit.config.rules import check_folds
from docaudit.errors import DocauditError
from docaudit.seeds import stream

LOW_FPRS = (0.10, 0.01)


def chunk_folds(labels, k: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Split members and non-members each into ``k`` near-equal random chunks (docs/methods.md,
    "Meta-classifier"); fold ``i`` tests on chunk ``i`` of both classes and trains on the rest."""
    labels = np.asarray(labels)
    counts = {int(c): int((labels == c).sum()) for c in (0, 1)}
    check_folds(k, counts[1], counts[0])
    splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    return [(train, test) for train, test in splitter.split(np.zeros(len(labels)), labels)]


def min_nonmembers(fpr: float) -> int:
    """The fewest non-members with which TPR at FPR ``fpr`` is estimable: ``ceil(1 / fpr)``. With fewer, the only
    threshold whose FPR is at most ``fpr`` lets no non-member through (FPR 0), so the value says nothing about
    ``fpr``."""
    return math.ceil(1.0 / fpr - 1e-9)


def tpr_estimable(n_nonmembers: int, fpr: float) -> bool:
    """Whether ``n_nonmembers`` are enough to estimate TPR at FPR ``fpr`` (``min_nonmembers``)."""
    return n_nonmembers >= min_nonmembers(fpr)


def tpr_unavailable(fpr: float, where: str = "") -> str:
    """What a table shows for a TPR at FPR ``fpr`` that was not estimated: ``n/a (needs ≥ 100 non-members)``;
    ``where`` says of which set (e.g. `` per fold``)."""
    return f"n/a (needs ≥ {min_nonmembers(fpr)} non-members{where})"


def tpr_at_fpr(labels, scores, target_fpr: float) -> float:
    """Largest TPR over all ROC points (none dropped) whose FPR is at most ``target_fpr``."""
    fpr, tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    ok = fpr <= target_fpr + 1e-12
    return float(tpr[ok].max()) if ok.any() else 0.0


@dataclass
class FoldMetrics:
    """AUC and TPR at each low FPR of one evaluated set; a TPR is None when the set's non-members are too few to
    estimate it (``tpr_estimable``)."""

    auc: float
    tpr_at: dict[float, float | None]


def fold_metrics(labels, scores) -> FoldMetrics:
    """AUC and TPR at the low FPRs of one evaluation (scores: higher = more member-like); TPR at FPR f only with
    at least ``1/f`` non-members, else None."""
    labels = np.asarray(labels)
    if len(np.unique(labels)) < 2:
        raise DocauditError("an evaluation fold holds documents of one class only")
    n0 = int((labels == 0).sum())
    return FoldMetrics(
        auc=float(roc_auc_score(labels, scores)),
        tpr_at={f: tpr_at_fpr(labels, scores, f) if tpr_estimable(n0, f) else None for f in LOW_FPRS},
    )


def summarize(folds: list[FoldMetrics]) -> dict[str, float | None]:
    """Mean and standard deviation over folds of AUC and TPR at 10% and 1% FPR; a TPR's are None unless every
    fold had the non-members to estimate it."""
    out = {"auc_mean": float(np.mean([f.auc for f in folds])), "auc_std": float(np.std([f.auc for f in folds]))}
    for fpr in LOW_FPRS:
        vals = [f.tpr_at[fpr] for f in folds]
        tag = f"tpr_at_{round(fpr * 100)}fpr"
        known = None not in vals
        out[f"{tag}_mean"] = float(np.mean(vals)) if known else None
        out[f"{tag}_std"] = float(np.std(vals)) if known else None
    return out


def roc_table(labels, scores):
    """The ROC curve as a table (fpr, tpr, threshold) for CSV output and plots."""
    import pandas as pd

    fpr, tpr, thr = roc_curve(labels, scores)
    return pd.DataFrame({"fpr": fpr, "tpr": tpr, "threshold": thr})


class Interval(NamedTuple):
    """A point estimate with a ``1 - alpha`` percentile bootstrap interval ``[lo, hi]``."""

    point: float
    lo: float
    hi: float


def _metric_key(fpr: float) -> str:
    return f"tpr_at_{round(fpr * 100)}fpr"


def _bootstrap_auc(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """AUC of each row of resampled member scores ``pos`` [B, n1] against non-member scores ``neg`` [B, n0]
    (Mann-Whitney with average ranks for ties; equal to ``roc_auc_score``)."""
    from scipy.stats import rankdata

    n1, n0 = pos.shape[1], neg.shape[1]
    ranks = rankdata(np.concatenate([pos, neg], axis=1), axis=1)
    return (ranks[:, :n1].sum(axis=1) - n1 * (n1 + 1) / 2.0) / (n1 * n0)


def _bootstrap_tpr(pos: np.ndarray, neg: np.ndarray, target_fpr: float) -> np.ndarray:
    """Per row: the largest TPR over all ROC points with FPR <= ``target_fpr`` (every threshold counted; a ROC
    curve thinned by ``roc_curve``'s ``drop_intermediate`` can miss the best point on a straight segment).
    At most ``k = floor(target_fpr * n0)`` non-members may score at or above the threshold, so the best threshold
    sits just above the (k+1)-th largest non-member score ``v`` and the TPR is the share of members above ``v``."""
    n0 = neg.shape[1]
    k = int(np.floor(n0 * (target_fpr + 1e-12)))
    if k >= n0:
        return np.ones(pos.shape[0])
    v = np.sort(neg, axis=1)[:, n0 - 1 - k]
    return (pos > v[:, None]).mean(axis=1)


def stratified_resamples(n_pos: int, n_neg: int, n_boot: int = 1000, seed: int = 0):
    """Index batches ``(members [b, n_pos], non-members [b, n_neg])`` of ``n_boot`` stratified bootstrap resamples
    (each class drawn with replacement, its size kept), from one seeded generator; batches bound the memory for
    large document sets. Checks the sizes every bootstrap here needs."""
    if n_pos < 2 or n_neg < 2:
        raise DocauditError(f"a bootstrap interval needs at least 2 members and 2 non-members, got {n_pos} and {n_neg}")
    if n_boot < 1:
        raise DocauditError(f"need n_boot >= 1, got {n_boot}")
    rng = stream(seed, "bootstrap")
    batch = max(1, min(n_boot, int(2e7 // (n_pos + n_neg))))
    sizes = [min(batch, n_boot - start) for start in range(0, n_boot, batch)]
    return ((rng.integers(0, n_pos, size=(b, n_pos)), rng.integers(0, n_neg, size=(b, n_neg))) for b in sizes)


def _check_level(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise DocauditError(f"need 0 < alpha < 1, got alpha={alpha}")


def bootstrap_ci(
    labels, scores, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0, fprs: tuple[float, ...] = LOW_FPRS
) -> dict[str, Interval | None]:
    """Stratified bootstrap over documents of AUC and TPR at each of ``fprs`` (default ``LOW_FPRS``).

    Members and non-members are resampled separately with replacement (each resample keeps the class sizes),
    ``n_boot`` times with a seeded generator; the interval is the ``alpha/2`` and ``1 - alpha/2`` percentiles of the
    resampled metric (percentile bootstrap), the point estimate the metric on the given documents. Returns
    ``{"auc": Interval, "tpr_at_10fpr": Interval, "tpr_at_1fpr": Interval}`` (one TPR per ``fprs``); each
    ``Interval`` is a ``(point, lo, hi)`` tuple; point and resamples use the same exact definitions (AUC by average
    ranks, TPR as the largest over all ROC points with FPR <= the target). The interval covers the variation from
    which documents happened to be evaluated, not that from refitting a classifier. TPR at FPR f is None (not
    estimated) with fewer than ``1/f`` non-members (``min_nonmembers``: 100 for 1% FPR), where the only threshold
    allowed is the one no non-member passes.
    """
    labels = np.asarray(labels).astype(int)
    scores = np.asarray(scores, dtype=np.float64)
    if labels.shape != scores.shape or labels.ndim != 1:
        raise DocauditError(f"labels and scores must be 1-d of the same length, got {labels.shape} and {scores.shape}")
    if not np.isfinite(scores).all():
        raise DocauditError("scores contain NaN or infinite values; cannot bootstrap")
    pos, neg = scores[labels == 1], scores[labels == 0]
    _check_level(alpha)
    resamples = stratified_resamples(len(pos), len(neg), n_boot, seed)
    point_auc = float(_bootstrap_auc(pos[None], neg[None])[0])
    estimable = [f for f in fprs if tpr_estimable(len(neg), f)]
    point_tpr = {f: float(_bootstrap_tpr(pos[None], neg[None], f)[0]) for f in estimable}
    aucs, tprs = [], {f: [] for f in estimable}
    for ip, ineg in resamples:
        bp, bn = pos[ip], neg[ineg]
        aucs.append(_bootstrap_auc(bp, bn))
        for f in estimable:
            tprs[f].append(_bootstrap_tpr(bp, bn, f))
    q = (alpha / 2.0, 1.0 - alpha / 2.0)
    lo, hi = np.quantile(np.concatenate(aucs), q)
    out: dict[str, Interval | None] = {"auc": Interval(point_auc, float(lo), float(hi))}
    for f in fprs:
        bounds = np.quantile(np.concatenate(tprs[f]), q) if f in tprs else None
        out[_metric_key(f)] = None if bounds is None else Interval(point_tpr[f], float(bounds[0]), float(bounds[1]))
    return out


def pooled_oof_ci(fold_results, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> dict[str, Interval | None]:
    """Bootstrap intervals on the pooled out-of-fold scores of a k-fold evaluation.

    ``fold_results``: one ``(labels, scores)`` pair per fold, the scores of that fold's held-out documents (each
    document is held out exactly once over the folds). The pairs are concatenated and passed to
    ``bootstrap_ci``: the point estimates are the metrics of the pooled out-of-fold predictions, and the interval
    is over documents of the pooled out-of-fold predictions (members and non-members resampled separately). It
    treats the k fitted models as one scoring rule: it does not include the variation from refitting on other
    training documents, and it assumes the folds' scores are on a comparable scale (true for the same method
    trained on equal-sized folds; the per-fold mean ± std of ``summarize`` is reported beside it).
    """
    fold_results = list(fold_results)
    if not fold_results:
        raise DocauditError("no folds to pool")
    labels = np.concatenate([np.asarray(lab).ravel() for lab, _ in fold_results])
    scores = np.concatenate([np.asarray(sc, dtype=np.float64).ravel() for _, sc in fold_results])
    return bootstrap_ci(labels, scores, n_boot=n_boot, alpha=alpha, seed=seed)


def _paired_scores(labels, base, other) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels = np.asarray(labels).astype(int)
    base, other = (np.asarray(s, dtype=np.float64) for s in (base, other))
    if not labels.shape == base.shape == other.shape or labels.ndim != 1:
        raise DocauditError(
            f"labels and both scores must be 1-d of one length, got {labels.shape}, {base.shape} and {other.shape}"
        )
    if not (np.isfinite(base).all() and np.isfinite(other).all()):
        raise DocauditError("scores contain NaN or infinite values")
    return labels, base, other


def paired_auc_difference_ci(labels, base, other, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> Interval:
    """``AUC(other) - AUC(base)`` on the same documents, with a paired stratified percentile bootstrap interval:
    each resample (``stratified_resamples``) draws the members and non-members once and both AUCs are computed on
    that same draw, so the interval carries the correlation of the two scores over documents."""
    labels, base, other = _paired_scores(labels, base, other)
    pos, neg = labels == 1, labels == 0
    _check_level(alpha)
    resamples = stratified_resamples(int(pos.sum()), int(neg.sum()), n_boot, seed)

    def delta(ip, ineg):
        return _bootstrap_auc(other[pos][ip], other[neg][ineg]) - _bootstrap_auc(base[pos][ip], base[neg][ineg])

    point = float(delta(np.arange(pos.sum())[None], np.arange(neg.sum())[None])[0])
    lo, hi = np.quantile(np.concatenate([delta(ip, ineg) for ip, ineg in resamples]), (alpha / 2.0, 1.0 - alpha / 2.0))
    return Interval(point, float(lo), float(hi))


class DeLong(NamedTuple):
    """DeLong's test of ``AUC(other) > AUC(base)`` on the same documents: both AUCs, their difference, its
    standard error, the z statistic and the one-sided p-value; ``p_value`` is None (and ``reason`` says why) when
    the test has no variance estimate for a positive difference."""

    auc_base: float
    auc_other: float
    delta: float
    se: float
    z: float
    p_value: float | None
    reason: str | None = None


def _midranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of each row, ties given their average rank."""
    from scipy.stats import rankdata

    return rankdata(x, axis=-1)


def delong_test(labels, base, other) -> DeLong:
    """DeLong, DeLong and Clarke-Pearson (1988): the AUCs of two scores of the same documents are U-statistics,
    and their covariance follows from each document's placement values (for a member, the share of non-members it
    outscores, ties counting half; for a non-member, the share of members that outscore it):
    ``S = S10 / m + S01 / n`` with ``S10``, ``S01`` the covariance matrices of the two scores' placement values over
    the ``m`` members and ``n`` non-members. The difference's variance is ``S[0,0] + S[1,1] - 2 S[0,1]`` and
    ``z = delta / se`` is compared with the standard normal (one-sided, ``delta > 0``). Placement values come from
    midranks (Sun and Xu 2014), O(N log N) instead of the definition's O(m n). With zero estimated variance (e.g.
    a constant score against one that separates a handful of documents) the normal approximation says nothing: a
    positive difference then gets no p-value (None, with the reason), and a difference of zero or less gets p = 1
    (valid for any null distribution)."""
    from scipy.stats import norm

    labels, base, other = _paired_scores(labels, base, other)
    scores = np.stack([base, other])
    pos, neg = scores[:, labels == 1], scores[:, labels == 0]
    m, n = pos.shape[1], neg.shape[1]
    if m < 2 or n < 2:
        raise DocauditError(f"DeLong's test needs at least 2 members and 2 non-members, got {m} and {n}")
    ranks = _midranks(np.concatenate([pos, neg], axis=1))
    v10 = (ranks[:, :m] - _midranks(pos)) / n
    v01 = 1.0 - (ranks[:, m:] - _midranks(neg)) / m
    auc = v10.mean(axis=1)
    cov = np.cov(v10) / m + np.cov(v01) / n
    delta = float(auc[1] - auc[0])
    var = float(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    se = float(np.sqrt(max(var, 0.0)))
    if var > 1e-15:
        z = delta / np.sqrt(var)
        return DeLong(float(auc[0]), float(auc[1]), delta, se, float(z), float(norm.sf(z)))
    if delta <= 0:
        return DeLong(float(auc[0]), float(auc[1]), delta, se, -np.inf if delta < 0 else 0.0, 1.0)
    reason = (
        f"DeLong's variance estimate of the AUC difference is zero ({m} members, {n} non-members): the test cannot "
        "say whether a difference of this size could arise by chance"
    )
    return DeLong(float(auc[0]), float(auc[1]), delta, se, float("nan"), None, reason)
