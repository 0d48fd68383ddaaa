"""The one-sided two-sample rank test (Wilcoxon–Mann–Whitney) with its permutation p-value, ties included.

H0: the ``n_x + n_y`` values are exchangeable between the two groups (which values form ``x`` was decided at
random, or does not matter). Given the observed values, every one of the ``C(n_x + n_y, n_x)`` ways to choose
which are ``x`` is then equally likely, so the permutation distribution of the rank sum *conditional on the
observed values* (ties and all) gives a p-value whose level is exact: ``P(p <= u) <= u`` for every ``u``, on any
data, whatever the distribution of the values and however many ties they have (Lehmann, *Nonparametrics*, 1975,
ch. 1; Hájek, Šidák & Sen, *Theory of Rank Tests*, 1999, sec. 3.3).

The normal approximation (scipy's ``method="asymptotic"``, which scipy also uses whenever there are ties) has no
such guarantee in the tail: at 8 against 8 values with ties it can be half the exact value.

How: tied values get their mean rank (midrank), so twice a rank is an integer and the rank sum of ``x`` takes
integer values. The number of ``x``-subsets with each rank sum is counted by dynamic programming over the values
(one knapsack step per value: ``count[j, s]`` is the number of ways to choose ``j`` of the values seen so far with
doubled rank sum ``s``), the "shift algorithm" of Streitberg & Röhmel (1986) that exact rank tests with ties use.
This is the full enumeration of the splits, counted rather than listed, so it is exact for sizes whose splits
could never be listed (``C(80, 40)`` ≈ 10^23). When the count table would be too large (``EXACT_WORK``), the
p-value is a Monte Carlo permutation p-value: ``B`` random splits, ``p = (1 + b) / (1 + B)`` with ``b`` the splits
whose rank sum is at least the observed one, which is valid at every ``B`` (Phipson & Smyth 2010) but not exact;
the result says which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from docaudit.errors import DocauditError
from docaudit.seeds import stream

EXACT_WORK = 100_000_000
"""The most work (values × subset sizes × doubled rank sums) of an exact count, about a quarter of a second: 50
against 50 values are counted exactly, 60 against 60 by Monte Carlo."""

RESAMPLES = 9999
"""Random splits of the Monte Carlo p-value beyond ``EXACT_WORK``: its smallest value is 1 / 10,000."""

EXACT = "exact"
MONTE_CARLO = "monte carlo"


@dataclass(frozen=True)
class RankTest:
    """``auc``: ``U / (n_x n_y)``, the share of (x, y) pairs with x higher, ties counted one half; ``p_value``: the
    one-sided permutation p-value of "x scores higher"; ``method``: ``EXACT`` (the whole permutation distribution)
    or ``MONTE_CARLO`` (``resamples`` random splits)."""

    auc: float
    p_value: float
    method: str
    resamples: int | None = None


def _doubled_ranks(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return np.rint(2.0 * rankdata(np.concatenate([x, y]))).astype(np.int64)


def _upper_tail_count(weights: np.ndarray, k: int, observed: int) -> tuple[float, float]:
    """``(subsets of size k whose weight sum is >= observed, all subsets of size k)``, counted in float64 (exact to
    rounding: every count is a sum of positive terms)."""
    top = int(np.sort(weights)[::-1][:k].sum())
    count = np.zeros((k + 1, top + 1))
    count[0, 0] = 1.0
    for w in weights:
        count[1:, w:] += count[:-1, : top + 1 - w].copy()  # the copy: every j extends the counts before this value
    return float(count[k, observed:].sum()), float(count[k].sum())


def _work(n: int, k: int) -> int:
    """The size of the count table's updates: ``n`` values, ``k + 1`` subset sizes, doubled rank sums up to
    ``2 n k``."""
    return n * (k + 1) * (2 * n * k + 1)


def rank_sum_test(x, y, *, exact_work: int = EXACT_WORK, resamples: int = RESAMPLES, seed: int = 0) -> RankTest:
    """The one-sided rank test of "``x`` scores higher than ``y``" (module docstring): exact when the count table
    fits ``exact_work``, else a seeded Monte Carlo permutation p-value over ``resamples`` random splits."""
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if len(x) == 0 or len(y) == 0:
        raise DocauditError("the rank test needs at least one value in each group")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise DocauditError("the rank test's values contain NaN or infinite values")
    ranks = _doubled_ranks(x, y)
    n_x, n = len(x), len(ranks)
    observed = int(ranks[:n_x].sum())
    auc = (observed / 2.0 - n_x * (n_x + 1) / 2.0) / (n_x * len(y))
    # count over the smaller group: "x's rank sum >= t" is "y's rank sum <= total - t", i.e. ">= -(total - t)"
    # with every weight negated; shifting by (n + 1) per chosen value keeps the weights positive
    if n_x <= len(y):
        k, weights, target = n_x, ranks, observed
    else:
        k, weights, target = len(y), 2 * (n + 1) - ranks, 2 * (n + 1) * len(y) - (int(ranks.sum()) - observed)
    if _work(n, k) <= exact_work:
        tail, total = _upper_tail_count(weights, k, target)
        return RankTest(auc, min(1.0, tail / total), EXACT)
    rng = stream(seed, "permutation")
    at_least, done = 0, 0
    while done < resamples:
        batch = min(resamples - done, max(1, 2_000_000 // n))
        chosen = np.argsort(rng.random((batch, n)), axis=1)[:, :n_x]
        at_least += int((ranks[chosen].sum(axis=1) >= observed).sum())
        done += batch
    return RankTest(auc, (1.0 + at_least) / (1.0 + resamples), MONTE_CARLO, resamples)


def smallest_p(n_x: int, n_y: int) -> float:
    """The smallest p-value the exact test can give, reached without ties: ``1 / C(n_x + n_y, n_x)`` (0.0 where that
    is below the smallest float: 9,000 against 9,000 values)."""
    splits = math.comb(n_x + n_y, n_x)
    return 1.0 / splits if splits.bit_length() <= 1023 else 0.0
