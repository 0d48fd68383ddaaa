"""What a book's snippet rate says against the calibration books' (docs/methods.md, "Per-book verdicts in report").

A rate from fewer snippets is noisier, so a short book is compared with the calibration non-member books at its
own snippet count, and the debiased fraction's interval is a prediction interval that counts the book's own
false-positive rate among its unknowns.

- ``matched_rate_p``: full-conformal p-value of H0 "the book is like the calibration non-member books". Every
  compared book, the judged one included, gives the same number ``k`` of its snippets (a uniform random subset,
  drawn without replacement); the threshold is chosen on the members' snippets and all these ``k``-snippet sets
  together, so it treats the judged book and the reference books alike; ``p = (1 + #{reference books whose rate is
  at least the book's}) / (n + 1)``. *Assumption*: a non-member book's snippet scores are exchangeable within the
  book (random placements of one text) and the law they are drawn from does not depend on the book's length. Then
  ``k`` snippets drawn without replacement from a reference book's ``n_i`` random snippets have the law of ``k``
  random snippets of that book, the judged book's ``k`` are ``k`` random snippets of its own, and the ``n + 1``
  sets are exchangeable under H0: the p-value is valid for every ``k`` (Vovk, Gammerman and Shafer 2005; ties
  count against the book). Drawn with replacement they would not be (a repeated snippet makes the rate noisier
  than ``k`` distinct ones). Which books are compared and ``k`` depend on snippet counts only, never on scores.
- ``debiased_interval``: the set of trained fractions ``d`` under which the book's count of snippets above the
  threshold is not in either 2.5% tail of its predictive distribution (for a 95% interval). Under ``d`` each of the
  book's ``k`` snippets is above the threshold with probability ``d t + (1 - d) f``, with ``t`` a calibration
  member book's rate and ``f`` a calibration non-member book's (the book's own, unknown rates: every pair equally
  likely), and the count is binomial given them. The spread of the calibration books' rates, not their mean,
  carries the book's own false-positive deviation (a prediction interval), and the binomial carries the noise of
  its ``k`` snippets. The calibration books' rates are taken at the book's compared snippet count (the same
  ``k``-snippet subsets as the p-value's), so a calibration rate is never less noisy than the book's. A mixture
  over ``n`` observed rates puts no mass beyond the most extreme one, yet the book's own rate, exchangeable with
  them, is beyond it with probability 1/(n+1): each tail gets one more book at the far end of [0, 1] (rate 1 for
  the upper tail, 0 for the lower). So with fewer than ``edge_books`` (39 at 95%) calibration non-member books
  the interval always reaches 0, and with fewer member books it always reaches 1. When the count is below every
  ``d``'s lower tail (fewer snippets above the threshold than the non-member books make plausible), the upper end
  assumes the book has no false positives (``f = 0``); when it is above every ``d``'s upper tail, the lower end
  assumes every trained snippet is detected (``t = 1``): so the interval is never a single point.
"""

from __future__ import annotations

import numpy as np

from docaudit.inference.calibration import threshold

COARSE = np.linspace(0.0, 1.0, 41)  # trained fractions searched first (steps of 2.5 points) ...
STEP = 0.0025  # ... then refined to a quarter of a percentage point at each end of the interval


def compared_count(n_book: int, reference_counts, min_snippets: int) -> tuple[int | None, np.ndarray, str | None]:
    """``(k, reference, reason)``: the snippet count ``k`` a book of ``n_book`` snippets is compared at, the
    indices of the calibration non-member books it is compared with (those with at least ``min_snippets``
    snippets) and, when no comparison is possible, why (``k`` None). ``k`` is the smallest count among the book
    and those reference books, so every compared book can give ``k`` snippets."""
    counts = np.asarray(reference_counts, dtype=int)
    reference = np.flatnonzero(counts >= min_snippets)
    if n_book < min_snippets:
        return (
            None,
            reference,
            (
                f"too few snippets to compare: the book gave {n_book}, fewer than the {min_snippets} a rate must "
                "rest on (a shorter book's rate is too coarse to rank against the calibration books)"
            ),
        )
    if reference.size == 0:
        return None, reference, f"no calibration non-member book gave at least {min_snippets} snippets"
    return int(min(n_book, counts[reference].min())), reference, None


def subsample(scores: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` of ``scores`` drawn uniformly without replacement (all of them, in random order, when ``k`` is their
    number)."""
    return rng.choice(np.asarray(scores, dtype=np.float64), size=k, replace=False)


def matched_rate_p(book: np.ndarray, members: list[np.ndarray], reference: list[np.ndarray], target_fpr) -> float:
    """Full-conformal p-value of a book's ``k`` snippet scores against reference books' ``k`` snippet scores each
    (see the module docstring): the threshold is chosen on ``members`` and every ``k``-snippet set, the book's
    included."""
    tau = threshold(np.concatenate(members), np.concatenate([*reference, book]), target_fpr)
    rate = (book > tau).mean()
    return float((1 + sum((s > tau).mean() >= rate for s in reference)) / (len(reference) + 1))


def _edge(plausible, lowest: bool) -> float | None:
    """The lowest (``lowest``) or highest trained fraction ``d`` in steps of ``STEP`` where ``plausible(d)`` (a
    vectorized test over an array of ``d``) holds, found on ``COARSE`` and refined within the coarse step; None
    when it holds nowhere."""
    ok = np.flatnonzero(plausible(COARSE))
    if ok.size == 0:
        return None
    i = ok[0] if lowest else ok[-1]
    if (lowest and i == 0) or (not lowest and i == len(COARSE) - 1):
        return float(COARSE[i])
    j = i - 1 if lowest else i
    cell = np.linspace(COARSE[j], COARSE[j + 1], int(round((COARSE[1] - COARSE[0]) / STEP)) + 1)
    fine = cell[plausible(cell)]
    return float(fine.min() if lowest else fine.max())


def _with_edge(rates, edge: float) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``rates`` with their counts, and one more book at ``edge``: among ``n`` observed books and the
    judged one, exchangeable, the judged book's rate is beyond every observed one with probability 1/(n+1), and
    nothing observed says how far, so that mass goes to the end of [0, 1] the tail looks at."""
    values, counts = np.unique(np.asarray(rates, dtype=np.float64), return_counts=True)
    return np.append(values, edge), np.append(counts, 1)


def debiased_interval(
    above: int, k: int, member_rates, nonmember_rates, confidence: float = 0.95
) -> tuple[float, float]:
    """The ``confidence`` prediction interval of the trained fraction of a book with ``above`` of its ``k``
    snippets above the threshold, given the calibration member and non-member books' rates at that threshold (see
    the module docstring), its ends found to ``STEP`` and rounded outward by one step. Never a single point. With
    ``n`` calibration books of a kind, one more book's worth of mass (1/(n+1)) sits at the far end of [0, 1] for
    each tail, so neither end can move past 0 or 1 on fewer than ``edge_books(confidence)`` books."""
    from scipy.special import bdtr, bdtrc

    tail = (1 - confidence) / 2
    ends = {
        upper: (_with_edge(member_rates, float(upper)), _with_edge(nonmember_rates, float(upper)))
        for upper in (True, False)
    }

    def pairs(d, upper, t_only=None, f_only=None):
        """P(count >= above) (``upper``) or P(count <= above) at each trained fraction in ``d``: binomial given a
        (member rate, non-member rate) pair, averaged over the pairs, each kind of rate extended by its edge
        book; ``t_only`` / ``f_only`` fix that rate instead."""
        (t, tw), (f, fw) = ends[upper]
        if t_only is not None:
            t, tw = np.array([t_only]), np.ones(1)
        if f_only is not None:
            f, fw = np.array([f_only]), np.ones(1)
        w = (tw[:, None] * fw[None, :]).ravel() / (tw.sum() * fw.sum())
        p = d[:, None, None] * t[None, :, None] + (1 - d[:, None, None]) * f[None, None, :]
        values = (bdtrc(above - 1, k, p) if above > 0 else np.ones_like(p)) if upper else bdtr(above, k, p)
        return values.reshape(len(d), -1) @ w

    lo = _edge(lambda d: pairs(d, True) > tail, lowest=True)
    if lo is None:  # above every d's upper tail: let every trained snippet be detected
        lo = _edge(lambda d: pairs(d, True, t_only=1.0) > tail, lowest=True)
    hi = _edge(lambda d: pairs(d, False) > tail, lowest=False)
    if hi is None:  # below every d's lower tail: let the book have no false positives
        hi = _edge(lambda d: pairs(d, False, f_only=0.0) > tail, lowest=False)
    return max(0.0, lo - STEP), min(1.0, hi + STEP)


def edge_books(confidence: float = 0.95) -> int:
    """The fewest calibration books of a kind for which the edge book's mass 1/(n+1) is at most one tail of a
    ``confidence`` interval: with fewer, the debiased interval of a book always reaches 0 (and 1)."""
    return int(np.ceil(2 / (1 - confidence) - 1 - 1e-9))
