"""The snippet calibration behind ``report`` (docs/methods.md, "Contamination rate" and "Per-book verdicts in
report"): the threshold rule, the true- and false-positive rates at a threshold, when a calibration is too weak to
judge a book with, and the one bootstrap over calibration books and snippets.

Snippet scores: higher = more member-like; a snippet is called a member when its score is above the threshold.
"""

from __future__ import annotations

import numpy as np

from docaudit.errors import DocauditError
from docaudit.inference.verdicts import Reason
from docaudit.seeds import stream

# A calibration below either bound cannot support a verdict: every book is "inconclusive" and the debiased fraction
# "n/a". AUC: below this the calibration snippets barely separate (0.5 is chance) and a rate reflects where the
# threshold falls. FPR: a threshold calling more than this share of known non-member snippets members (the
# accuracy-maximizing cut can, when the classes overlap) makes a rate mostly false positives.
MIN_CALIBRATION_AUC = 0.60
MAX_CALIBRATION_FPR = 0.50


def accuracy_threshold(scores, labels) -> float:
    """The ``tau`` maximizing the accuracy of "``score > tau`` is a member" on these labelled scores: a midpoint
    between consecutive distinct scores, or ±inf when calling all / none members is best; the lowest such tau
    on ties."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels).astype(int)
    if len(s) == 0:
        raise DocauditError("cannot choose a threshold without scores")
    order = np.argsort(s, kind="stable")
    s, y = s[order], y[order]
    uniq, first = np.unique(s, return_index=True)
    cuts = np.append(first, len(s))  # cut c: everything from index c on is called a member
    pos_before = np.concatenate([[0], np.cumsum(y)])[cuts]
    correct = (y.sum() - pos_before) + (cuts - pos_before)
    best = int(np.argmax(correct))
    if best == 0:
        return -np.inf
    if best == len(uniq):
        return np.inf
    return float((uniq[best - 1] + uniq[best]) / 2)


def fpr_threshold(negative_scores, target_fpr: float) -> float:
    """The lowest ``tau`` with at most ``floor(target_fpr * n)`` of the ``n`` negative scores above it (so the
    false-positive rate of ``score > tau`` is at most ``target_fpr``)."""
    neg = np.sort(np.asarray(negative_scores, dtype=np.float64))[::-1]
    if not 0 <= target_fpr <= 1:
        raise DocauditError(f"target FPR must be in [0, 1], got {target_fpr}")
    if len(neg) == 0:
        raise DocauditError("cannot choose a threshold without non-member scores")
    allowed = int(np.floor(target_fpr * len(neg) + 1e-9))
    return -np.inf if allowed >= len(neg) else float(neg[allowed])


def threshold(pos, neg, target_fpr: float | None) -> float:
    """The report's threshold rule on member snippet scores ``pos`` and non-member ones ``neg``: the most accurate
    cut, or with ``target_fpr`` the lowest whose false-positive rate on ``neg`` is at most that."""
    pos, neg = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    if target_fpr is not None:
        return fpr_threshold(neg, target_fpr)
    return accuracy_threshold(np.concatenate([pos, neg]), np.r_[np.ones(len(pos)), np.zeros(len(neg))])


def detection_rates(pos, neg, tau: float) -> tuple[float, float]:
    """``(TPR, FPR)``: the shares of member snippets ``pos`` and non-member snippets ``neg`` above ``tau``."""
    return float((np.asarray(pos) > tau).mean()), float((np.asarray(neg) > tau).mean())


def snippet_auc(pos, neg) -> float:
    """AUC of member snippet scores ``pos`` against non-member ones ``neg`` (Mann–Whitney, average ranks for ties;
    equal to ``sklearn.metrics.roc_auc_score``)."""
    from scipy.stats import rankdata

    pos, neg = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    ranks = rankdata(np.concatenate([pos, neg]))
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def calibration_problems(auc: float, tpr: float, fpr: float) -> list[Reason]:
    """Why a calibration (snippet AUC, and TPR / FPR at its threshold) cannot support a verdict: every book is then
    "inconclusive" with these reasons and its debiased fraction "n/a"; empty when it can."""
    why = []
    if not auc >= MIN_CALIBRATION_AUC:
        why.append(
            Reason(
                "calibration_at_chance",
                f"the calibration snippets are barely separated (AUC {auc:.3f}, below {MIN_CALIBRATION_AUC:.2f}; 0.5 "
                "is chance): a rate reflects where the threshold falls, not membership",
            )
        )
    if fpr > MAX_CALIBRATION_FPR:
        why.append(
            Reason(
                "threshold_false_positives",
                f"the threshold calls {fpr:.1%} of the known non-member snippets members (more than "
                f"{MAX_CALIBRATION_FPR:.0%}): a rate is mostly false positives",
            )
        )
    if not tpr > fpr:
        why.append(
            Reason(
                "threshold_separates_nothing",
                f"the threshold does not separate the calibration snippets (TPR {tpr:.3f} is not above FPR {fpr:.3f})",
            )
        )
    return why


def calibration_bootstrap(
    members: list[np.ndarray],
    nonmembers: list[np.ndarray],
    audited: list[np.ndarray],
    target_fpr: float | None,
    n_boot: int,
    confidence: float,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The book-level interval of each audited book's rate: a percentile interval at ``confidence`` over
    ``n_boot`` resamples, each drawing the calibration books of each class with replacement (the threshold chosen
    again on their snippets) and the audited book's snippets with replacement. Arguments: snippet scores per book.
    Returns ``(low, high)`` per audited book."""
    rng = stream(seed, "calibration_bootstrap")
    rates = np.empty((n_boot, len(audited)))
    for b in range(n_boot):
        pos = np.concatenate([members[i] for i in rng.integers(len(members), size=len(members))])
        neg = np.concatenate([nonmembers[i] for i in rng.integers(len(nonmembers), size=len(nonmembers))])
        tau = threshold(pos, neg, target_fpr)
        for j, scores in enumerate(audited):
            rates[b, j] = (scores[rng.integers(len(scores), size=len(scores))] > tau).mean()
    if not audited:
        return np.array([]), np.array([])
    half = (1 - confidence) / 2
    lo, hi = np.quantile(rates, [half, 1 - half], axis=0)
    return lo, hi
