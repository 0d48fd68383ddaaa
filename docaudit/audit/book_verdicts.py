"""What a contamination report can say about each audited book (docs/methods.md, "Debiased contamination fraction"
and "Per-book verdicts in report"); the statistics themselves are in ``docaudit.inference``.

- Calibration first: a snippet AUC below ``MIN_CALIBRATION_AUC``, a threshold whose FPR on the known non-member
  snippets is above ``MAX_CALIBRATION_FPR``, or a TPR not above the FPR makes every book "inconclusive" with that
  reason and its debiased fraction "n/a" (``inference.calibration.calibration_problems``).
- Debiased fraction (the DUCI estimator of Tong, Ye, Zarifzadeh and Shokri 2025, as privacy_meter's
  ``modules/duci/module_duci.py`` computes it): a raw snippet rate ``m`` mixes the detector's false positives into
  the number; with the detector's TPR and FPR at the report's threshold, measured on the calibration members' and
  non-members' snippets, ``(m - FPR) / (TPR - FPR)`` estimates the share of the book's snippets that were trained
  on, clipped to [0, 1]. Its interval is a prediction interval (``inference.snippet_rates.debiased_interval``)
  that counts the book's own false-positive rate, drawn like a calibration non-member book's at the book's
  compared snippet count, among its unknowns. Both only for a book with a verdict: beside "inconclusive" (too
  few snippets, the blind gate, too few calibration non-members) a fraction would read as a finding.
- p-value: full conformal at a matched snippet count (``inference.snippet_rates.matched_rate_p``), H0 "the book is
  like the calibration non-member books"; a book with fewer than ``min_snippets`` snippets is "inconclusive".
- Blind p-value: cross-conformal, from the blind baseline of the calibration books (the kind that separated them
  best), each fold's model scoring the book against the non-members it held out; a gate at the fixed level
  ``BLIND_GATE_LEVEL``, as in ``predict``.
- q-values: Benjamini–Yekutieli over the books with a p-value. The books' p-values share the calibration subsets
  and each book has its own threshold, so the positive dependence Benjamini–Hochberg needs is not known to hold;
  Benjamini–Yekutieli's bound holds under any dependence.
- Several methods (``n_methods``, ``report --methods a,b``): each method's verdicts are at level ``alpha /
  n_methods`` (Bonferroni across methods, Benjamini–Yekutieli across books within a method), so the books with
  "evidence" under any method have a false discovery rate of at most ``alpha``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from docaudit.config import ContaminationConfig
from docaudit.corpus.documents import Document
from docaudit.inference.calibration import calibration_problems, detection_rates, snippet_auc, threshold
from docaudit.inference.conformal import cross_conformal_p
from docaudit.inference.snippet_rates import compared_count, debiased_interval, edge_books, matched_rate_p, subsample
from docaudit.inference.verdicts import BLIND_GATE_LEVEL, DEFAULT_ALPHA, INCONCLUSIVE, Reason, run_verdicts
from docaudit.methods.blind import BlindFeatures, fit_fold, fitted_on, fold_scores
from docaudit.metrics import chunk_folds
from docaudit.seeds import stream


def debiased_fraction(rate: float, tpr: float, fpr: float) -> float | None:
    """``(rate - fpr) / (tpr - fpr)`` clipped to [0, 1]; None when ``tpr <= fpr`` (the detector separates nothing)."""
    if not tpr > fpr:
        return None
    return float(np.clip((rate - fpr) / (tpr - fpr), 0.0, 1.0))


def _groups(snip: pd.DataFrame, role: str) -> list[tuple[tuple, np.ndarray]]:
    """``((book, file), snippet scores)`` of each book of ``role``, in the order of first appearance."""
    part = snip[snip.role == role]
    if part.empty:
        return []
    codes, keys = pd.factorize(pd.MultiIndex.from_arrays([part.book, part.file]))
    scores = part.score.to_numpy(dtype=np.float64)[np.argsort(codes, kind="stable")]
    return list(zip(keys.tolist(), np.split(scores, np.cumsum(np.bincount(codes))[:-1])))


def matched_sets(
    k: int, members: list[np.ndarray], nonmembers: list[np.ndarray], reference: np.ndarray, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The calibration books as a book compared at ``k`` snippets sees them: ``k`` random snippets of each
    reference non-member book (indices ``reference``) and of each member book (all of a member book's snippets
    when it has fewer), drawn once per ``k`` from one stream seeded by ``seed`` and ``k``, non-members first."""
    rng = stream(seed, "rate_reference", k)
    reference_sets = [subsample(nonmembers[i], k, rng) for i in reference]
    member_sets = [subsample(s, min(k, len(s)), rng) for s in members]
    return member_sets, reference_sets


def rate_p_values(
    audited: list[np.ndarray],
    members: list[np.ndarray],
    nonmembers: list[np.ndarray],
    config: ContaminationConfig,
    seed: int,
) -> tuple[list[float | None], list[int | None], list[str | None], int]:
    """Per audited book its matched-count p-value, the snippet count it was compared at and why there is none;
    and how many calibration non-member books are compared with. The reference books' ``k``-snippet subsets are
    drawn once per ``k`` (:func:`matched_sets`), so books compared at one count share them; a book with more
    than ``k`` snippets gives a random ``k`` of its own."""
    counts = [len(s) for s in nonmembers]
    shared: dict[int, list[np.ndarray]] = {}
    p_values: list[float | None] = []
    ks: list[int | None] = []
    why: list[str | None] = []
    reference = compared_count(config.min_snippets, counts, config.min_snippets)[1]
    for j, scores in enumerate(audited):
        k, _, reason = compared_count(len(scores), counts, config.min_snippets)
        ks.append(k)
        why.append(reason)
        if k is None:
            p_values.append(None)
            continue
        if k not in shared:
            shared[k] = matched_sets(k, members, nonmembers, reference, seed)[1]
        book = subsample(scores, k, stream(seed, "rate_subsample", k, j))
        p_values.append(matched_rate_p(book, members, shared[k], config.target_fpr))
    return p_values, ks, why, len(reference)


def matched_interval(
    scores: np.ndarray, k: int, calibration: tuple[list[np.ndarray], list[np.ndarray]], tau: float, confidence: float
) -> tuple[float, float]:
    """The debiased fraction's prediction interval of a book of snippet ``scores`` compared at ``k`` snippets, from
    the calibration member and non-member books' rates above ``tau`` at that count (``calibration``: their subsets,
    :func:`matched_sets`)."""
    member_rates, nonmember_rates = ([float((s > tau).mean()) for s in sets] for sets in calibration)
    return debiased_interval(int((scores > tau).sum()), len(scores), member_rates, nonmember_rates, confidence)


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
    fitted = fitted_on(blind, kind, splits)  # the blind baseline's own fits when it ran on these folds
    for i, (train, test) in enumerate(splits):
        model = fit_fold(features, kind, labels, train, seed) if fitted is None else fitted[i]
        book_scores.append(fold_scores(model, books, kind))
        held.append(fold_scores(model, features, kind, test[labels[test] == 0]))
    p = cross_conformal_p(book_scores, held, factor=1)
    return {(d.id, d.path): float(v) for d, v in zip(groups["audited"], p)}


def book_verdicts(
    snip: pd.DataFrame,
    config: ContaminationConfig,
    seed: int,
    blind_p: dict | None,
    alpha: float = DEFAULT_ALPHA,
    n_methods: int = 1,
) -> tuple[pd.DataFrame, dict]:
    """Per audited book: debiased fraction with its interval, p-value and the snippet count it compares at, q-value
    (Benjamini–Yekutieli over the audited books), blind p-value (``blind_p``, keyed by (book, file), from
    ``blind_p_values``) and verdict with its reason; and the calibration's threshold, AUC, TPR and FPR. The report's
    threshold rule (``config.target_fpr``), ``config.min_snippets`` and the intervals' level ``config.confidence``
    come from its configuration; the verdicts are at level ``alpha / n_methods`` (the module docstring)."""
    members = [s for _, s in _groups(snip, "member")]
    nonmembers = [s for _, s in _groups(snip, "non-member")]
    audited = _groups(snip, "audited")
    pos, neg = np.concatenate(members), np.concatenate(nonmembers)
    tau = threshold(pos, neg, config.target_fpr)
    tpr, fpr = detection_rates(pos, neg, tau)
    auc = snippet_auc(pos, neg)
    problems = calibration_problems(auc, tpr, fpr)
    p_values, ks, short, n_reference = rate_p_values([s for _, s in audited], members, nonmembers, config, seed)
    reference = compared_count(config.min_snippets, [len(s) for s in nonmembers], config.min_snippets)[1]
    level = alpha / n_methods
    rows, reasons = [], []
    for (key, _), too_short in zip(audited, short):
        pb = None if blind_p is None else blind_p[key]
        why = [*problems, *([Reason("too_few_snippets", too_short)] if too_short else [])]
        if pb is not None and pb < BLIND_GATE_LEVEL:
            why.append(
                Reason(
                    "blind_separates",
                    f"the blind baseline already separates this book from the calibration non-members "
                    f"(p_value_blind {pb:.3g} < {BLIND_GATE_LEVEL:g}): it differs from them by its text alone",
                )
            )
        reasons.append(why)
        rows.append({"book": key[0], "file": key[1], "p_value_blind": pb})
    verdicts = run_verdicts(p_values, reasons, n_reference, level, method="by")
    for row, (_, scores), k, verdict in zip(rows, audited, ks, verdicts):
        point = lo = hi = None
        if verdict.verdict != INCONCLUSIVE:  # an inconclusive book's fraction would read as a finding it is not
            point = debiased_fraction(float((scores > tau).mean()), tpr, fpr)
        if point is not None:
            sets = matched_sets(k, members, nonmembers, reference, seed)
            lo, hi = matched_interval(scores, k, sets, tau, config.confidence)
            lo, hi = min(lo, point), max(hi, point)  # the DUCI point uses the pooled TPR and FPR
        row.update(debiased_fraction=point, debiased_ci_low=lo, debiased_ci_high=hi, n_compared=k)
    table = pd.DataFrame(
        rows,
        columns=[
            "book",
            "file",
            "debiased_fraction",
            "debiased_ci_low",
            "debiased_ci_high",
            "n_compared",
            "p_value_blind",
        ],
    )
    table["p_value"] = [v.p_value for v in verdicts]
    table["q_value"] = [v.q_value for v in verdicts]
    table["verdict"] = [v.verdict for v in verdicts]
    table["reason"] = [v.reason for v in verdicts]
    table["reason_codes"] = [list(v.reason_codes) for v in verdicts]
    table["reasons"] = [v.as_dict()["reasons"] for v in verdicts]
    info = {
        "threshold": tau,
        "calibration_auc": auc,
        "tpr": tpr,
        "fpr": fpr,
        "calibration_problems": [r.text for r in problems],
        "alpha": alpha,
        "n_methods": n_methods,
        "alpha_per_method": level,
        "min_snippets": config.min_snippets,
        "n_known_nonmembers": n_reference,
        "smallest_p": 1 / (n_reference + 1),
        "adjustment": "Benjamini-Yekutieli",
        "blind_gate_level": BLIND_GATE_LEVEL,
        "debiased_edge_books": edge_books(config.confidence),
    }
    return table, info
