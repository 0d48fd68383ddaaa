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
  its ``k`` snippets. When the count is below every ``d``'s lower tail (fewer snippets above the threshold than
  the non-member books make plausible), the upper end assumes the book has no false positives (``f = 0``); when it
  is above every ``d``'s upper tail, the lower end assumes every trained snippet is detected (``t = 1``): so the
  interval is never a single point.
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


def debiased_interval(
    above: int, k: int, member_rates, nonmember_rates, confidence: float = 0.95
) -> tuple[float, float]:
    """The ``confidence`` prediction interval of the trained fraction of a book with ``above`` of its ``k``
    snippets above the threshold, given the calibration member and non-member books' rates at that threshold (see
    the module docstring), its ends found to ``STEP`` and rounded outward by one step. Never a single point."""
    from scipy.special import bdtr, bdtrc

    t = np.unique(np.asarray(member_rates, dtype=np.float64), return_counts=True)
    f = np.unique(np.asarray(nonmember_rates, dtype=np.float64), return_counts=True)
    weight = (t[1][:, None] * f[1][None, :]).ravel() / (t[1].sum() * f[1].sum())
    tail = (1 - confidence) / 2

    def pairs(d, upper, rates_t=t[0], rates_f=f[0], w=weight):
        """P(count >= above) (``upper``) or P(count <= above) at each trained fraction in ``d``: binomial given a
        (member rate, non-member rate) pair, averaged over the pairs with weights ``w``."""
        p = d[:, None, None] * rates_t[None, :, None] + (1 - d[:, None, None]) * rates_f[None, None, :]
        values = (bdtrc(above - 1, k, p) if above > 0 else np.ones_like(p)) if upper else bdtr(above, k, p)
        return values.reshape(len(d), -1) @ w

    lo = _edge(lambda d: pairs(d, True) > tail, lowest=True)
    if lo is None:  # above every d's upper tail: let every trained snippet be detected
        lo = _edge(lambda d: pairs(d, True, np.ones(1), w=f[1] / f[1].sum()) > tail, lowest=True)
    hi = _edge(lambda d: pairs(d, False) > tail, lowest=False)
    if hi is None:  # below every d's lower tail: let the book have no false positives
        hi = _edge(lambda d: pairs(d, False, rates_f=np.zeros(1), w=t[1] / t[1].sum()) > tail, lowest=False)
    return max(0.0, lo - STEP), min(1.0, hi + STEP)
