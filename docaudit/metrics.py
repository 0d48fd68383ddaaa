"""Evaluation metrics and the k-fold "chunks" shared by every method, so all are scored on the same splits."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.model_selection import StratifiedKFold

from .errors import DocauditError

LOW_FPRS = (0.10, 0.01)


def chunk_folds(labels, k: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Split members and non-members each into ``k`` near-equal random chunks (SPEC §5); fold ``i`` tests on
    chunk ``i`` of both classes and trains on the rest."""
    labels = np.asarray(labels)
    counts = {int(c): int((labels == c).sum()) for c in (0, 1)}
    if k < 2:
        raise DocauditError(f"need at least 2 folds, got {k}")
    if min(counts.values()) < k:
        raise DocauditError(
            f"too few documents for {k} folds: {counts[1]} members and {counts[0]} non-members "
            f"(each class needs at least {k})"
        )
    splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    return [(train, test) for train, test in splitter.split(np.zeros(len(labels)), labels)]


def tpr_at_fpr(labels, scores, target_fpr: float) -> float:
    """Largest TPR over the ROC points whose FPR is at most ``target_fpr``."""
    fpr, tpr, _ = roc_curve(labels, scores)
    ok = fpr <= target_fpr + 1e-12
    return float(tpr[ok].max()) if ok.any() else 0.0


@dataclass
class FoldMetrics:
    auc: float
    tpr_at: dict[float, float]


def fold_metrics(labels, scores) -> FoldMetrics:
    """AUC and TPR at the low FPRs of one evaluation (scores: higher = more member-like)."""
    labels = np.asarray(labels)
    if len(np.unique(labels)) < 2:
        raise DocauditError("an evaluation fold holds documents of one class only")
    return FoldMetrics(
        auc=float(roc_auc_score(labels, scores)),
        tpr_at={f: tpr_at_fpr(labels, scores, f) for f in LOW_FPRS},
    )


def summarize(folds: list[FoldMetrics]) -> dict[str, float]:
    """Mean and standard deviation over folds of AUC and TPR at 10% and 1% FPR."""
    out = {"auc_mean": float(np.mean([f.auc for f in folds])), "auc_std": float(np.std([f.auc for f in folds]))}
    for fpr in LOW_FPRS:
        vals = [f.tpr_at[fpr] for f in folds]
        tag = f"tpr_at_{round(fpr * 100)}fpr"
        out[f"{tag}_mean"], out[f"{tag}_std"] = float(np.mean(vals)), float(np.std(vals))
    return out


def roc_table(labels, scores):
    """The ROC curve as a table (fpr, tpr, threshold) for CSV output and plots."""
    import pandas as pd

    fpr, tpr, thr = roc_curve(labels, scores)
    return pd.DataFrame({"fpr": fpr, "tpr": tpr, "threshold": thr})
