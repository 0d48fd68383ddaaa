"""What a contamination report can say about each audited book (docs/methods.md, "Debiased contamination fraction"
and "Per-book verdicts in report").

- Debiased fraction (the DUCI estimator of Tong, Ye, Zarifzadeh and Shokri 2025, as privacy_meter's
  ``modules/duci/module_duci.py`` computes it): a raw snippet rate ``m`` mixes the detector's false positives into
  the number; with the detector's TPR and FPR at the report's threshold, measured on the calibration members' and
  non-members' snippets, ``(m - FPR) / (TPR - FPR)`` estimates the share of the book's snippets that were trained
  on. It is clipped to [0, 1] (privacy_meter averages unclipped per-record estimates over a dataset; one book's
  estimate outside [0, 1] is noise). Its interval is a percentile bootstrap over the calibration books of each
  class (the threshold, TPR and FPR chosen and measured again) and the book's snippets; a resample whose TPR is not
  above its FPR identifies nothing and counts as 0 for the lower end and 1 for the upper end.
- p-value: full conformal, H0 "the book is like the calibration non-member books". The book is added to the
  non-member calibration books, the threshold is chosen again on them all (so the rule treats the book and the
  known non-members alike), and ``p = (1 + number of calibration non-members whose rate is at least the book's) /
  (n + 1)``.
- Blind p-value: cross-conformal, from the blind baseline of the calibration books (the kind that separated them
  best), each fold's model scoring the book against the non-members it held out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from docaudit.config import ContaminationConfig
from docaudit.corpus.documents import Document
from docaudit.inference.conformal import cross_conformal_p
from docaudit.inference.verdicts import DEFAULT_ALPHA, run_verdicts
from docaudit.methods.blind import BlindFeatures, fit_fold, fold_scores
from docaudit.methods.document_level import accuracy_threshold, fpr_threshold
from docaudit.metrics import chunk_folds


def threshold(pos: np.ndarray, neg: np.ndarray, target_fpr: float | None) -> float:
    """The report's threshold rule on member snippet scores ``pos`` and non-member ones ``neg``."""
    if target_fpr is not None:
        return fpr_threshold(neg, target_fpr)
    return accuracy_threshold(np.concatenate([pos, neg]), np.r_[np.ones(len(pos)), np.zeros(len(neg))])


def debiased_fraction(rate: float, tpr: float, fpr: float) -> float | None:
    """``(rate - fpr) / (tpr - fpr)`` clipped to [0, 1]; None when ``tpr <= fpr`` (the detector separates nothing)."""
    if not tpr > fpr:
        return None
    return float(np.clip((rate - fpr) / (tpr - fpr), 0.0, 1.0))


def _groups(snip: pd.DataFrame, role: str) -> list[tuple[tuple, np.ndarray]]:
    part = snip[snip.role == role]
    return [(key, g.score.to_numpy()) for key, g in part.groupby(["book", "file"], sort=False)]


def conformal_rate_p(book: np.ndarray, members: list[np.ndarray], nonmembers: list[np.ndarray], target_fpr) -> float:
    """Full-conformal p-value of a book's snippet rate against the calibration non-member books' rates."""
    pos = np.concatenate(members)
    tau = threshold(pos, np.concatenate([*nonmembers, book]), target_fpr)
    rate = (book > tau).mean()
    return (1 + sum((s > tau).mean() >= rate for s in nonmembers)) / (len(nonmembers) + 1)


def debiased_bootstrap(
    snip: pd.DataFrame, target_fpr: float | None, n_boot: int, confidence: float, seed: int
) -> pd.DataFrame:
    """Per audited book: ``debiased_fraction`` at the report's threshold and its percentile bootstrap interval."""
    rng = np.random.default_rng([seed, 25])
    members = [s for _, s in _groups(snip, "member")]
    nonmembers = [s for _, s in _groups(snip, "non-member")]
    audited = _groups(snip, "audited")
    pos, neg = np.concatenate(members), np.concatenate(nonmembers)
    tau = threshold(pos, neg, target_fpr)
    tpr, fpr = (pos > tau).mean(), (neg > tau).mean()
    draws = np.empty((n_boot, len(audited)))
    for b in range(n_boot):
        bpos = np.concatenate([members[i] for i in rng.integers(len(members), size=len(members))])
        bneg = np.concatenate([nonmembers[i] for i in rng.integers(len(nonmembers), size=len(nonmembers))])
        btau = threshold(bpos, bneg, target_fpr)
        btpr, bfpr = (bpos > btau).mean(), (bneg > btau).mean()
        for j, (_, scores) in enumerate(audited):
            m = (scores[rng.integers(len(scores), size=len(scores))] > btau).mean()
            draws[b, j] = np.nan if btpr <= bfpr else np.clip((m - bfpr) / (btpr - bfpr), 0.0, 1.0)
    half = (1 - confidence) / 2
    rows = []
    for j, (key, scores) in enumerate(audited):
        column = draws[:, j]
        rows.append(
            {
                "book": key[0],
                "file": key[1],
                "debiased_fraction": debiased_fraction((scores > tau).mean(), tpr, fpr),
                "debiased_ci_low": float(np.quantile(np.nan_to_num(column, nan=0.0), half)),
                "debiased_ci_high": float(np.quantile(np.nan_to_num(column, nan=1.0), 1 - half)),
            }
        )
    return pd.DataFrame(rows, columns=["book", "file", "debiased_fraction", "debiased_ci_low", "debiased_ci_high"])


def blind_p_values(groups: dict[str, list[Document]], blind: dict | None, folds: int, seed: int) -> dict | None:
    """Cross-conformal blind p-value of each audited book (keyed by (id, path)), from the calibration books' blind
    baseline of kind ``blind["best_kind"]`` on the same ``folds`` chunks; None without a blind baseline."""
    if blind is None:
        return None
    kind = blind["best_kind"]
    cal = groups["member"] + groups["non-member"]
    labels = np.array([1] * len(groups["member"]) + [0] * len(groups["non-member"]))
    splits = chunk_folds(labels, folds, seed)
    features = BlindFeatures([d.text for d in cal])
    books = BlindFeatures([d.text for d in groups["audited"]], features.max_chars)
    book_scores, held = [], []
    for train, test in splits:
        model = fit_fold(features, kind, labels, train, seed)
        book_scores.append(fold_scores(model, books, kind))
        held.append(fold_scores(model, features, kind, test[labels[test] == 0]))
    p = cross_conformal_p(book_scores, held, factor=1)
    return {(d.id, d.path): float(v) for d, v in zip(groups["audited"], p)}


def book_verdicts(
    snip: pd.DataFrame,
    groups: dict[str, list[Document]],
    config: ContaminationConfig,
    seed: int,
    blind: dict | None,
    blind_folds: int,
    alpha: float = DEFAULT_ALPHA,
) -> tuple[pd.DataFrame, dict]:
    """Per audited book: debiased fraction with its interval, p-value, q-value (Benjamini–Hochberg over the
    audited books), blind p-value and verdict with its reason; and the run's TPR and FPR at the threshold. The
    report's threshold rule (``config.target_fpr``), ``config.book_bootstrap`` resamples and the intervals' level
    ``config.confidence`` come from its configuration."""
    target_fpr = config.target_fpr
    members = [s for _, s in _groups(snip, "member")]
    nonmembers = [s for _, s in _groups(snip, "non-member")]
    pos, neg = np.concatenate(members), np.concatenate(nonmembers)
    tau = threshold(pos, neg, target_fpr)
    tpr, fpr = float((pos > tau).mean()), float((neg > tau).mean())
    table = debiased_bootstrap(snip, target_fpr, config.book_bootstrap, config.confidence, seed)
    audited = dict(_groups(snip, "audited"))
    table["p_value"] = [
        conformal_rate_p(audited[(b, f)], members, nonmembers, target_fpr) for b, f in zip(table.book, table.file)
    ]
    blind_p = blind_p_values(groups, blind, blind_folds, seed)
    table["p_value_blind"] = [None if blind_p is None else blind_p[(b, f)] for b, f in zip(table.book, table.file)]
    reasons = []
    for pb in table.p_value_blind:
        why = []
        if not tpr > fpr:
            why.append(
                f"the threshold does not separate the calibration snippets (TPR {tpr:.3f} is not above FPR {fpr:.3f})"
            )
        if pb is not None and pb < alpha:
            why.append(
                f"the blind baseline already separates this book from the calibration non-members (p_value_blind "
                f"{pb:.3g} < {alpha:g}): it differs from them by its text alone"
            )
        reasons.append(why)
    verdicts = run_verdicts(table.p_value.tolist(), reasons, len(nonmembers), alpha)
    table["verdict"] = [v.verdict for v in verdicts]
    table["reason"] = [v.reason for v in verdicts]
    table["q_value"] = [v.q_value for v in verdicts]
    info = {
        "tpr": tpr,
        "fpr": fpr,
        "alpha": alpha,
        "n_known_nonmembers": len(nonmembers),
        "smallest_p": 1 / (len(nonmembers) + 1),
        "blind_kind": None if blind is None else blind["best_kind"],
    }
    return table, info
