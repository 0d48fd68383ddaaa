"""The statistics of the paired synthetic-control test: per-passage contrasts, their mean with a batch-means
standard error (the placebo's t-test) and an interval that allows neighbouring passages to correlate (the rank
p-value against a library of never-seen texts is ``inference.matched``).

Scores are oriented so that higher means more likely under the model (minus bits per byte). The contrast of a
passage is the score of its real suffix minus the mean score of its synthetic suffixes; the placebo contrast puts
the first synthetic suffix in the real one's place (against the mean of the others), so its expectation is exactly
0 whatever the models are: the synthetic suffixes of a prefix are drawn independently from one distribution."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class BlockMean:
    """A mean over passages in book order, its standard error from the means of consecutive blocks, and the
    degrees of freedom of that error (blocks − 1)."""

    mean: float
    se: float
    df: int

    def t_p_value(self, two_sided: bool = False) -> float | None:
        """The t-test p-value of "the expected contrast is 0" against "it is above 0" (or either side)."""
        from scipy.stats import t

        if not np.isfinite(self.se) or self.se <= 0 or self.df < 1:
            return None
        stat = self.mean / self.se
        return float(2 * t.sf(abs(stat), self.df) if two_sided else t.sf(stat, self.df))


def contrasts(real, synthetic) -> tuple[np.ndarray, np.ndarray]:
    """Per passage, the contrast (real − mean of the synthetic) and the placebo contrast (the first synthetic −
    mean of the others); ``real`` has one score per passage, ``synthetic`` one row of at least two per passage."""
    real = np.asarray(real, dtype=float)
    synthetic = np.asarray(synthetic, dtype=float)
    if synthetic.ndim != 2 or synthetic.shape[0] != real.shape[0] or synthetic.shape[1] < 2:
        raise ValueError("synthetic scores must be one row of at least two per passage")
    return real - synthetic.mean(axis=1), synthetic[:, 0] - synthetic[:, 1:].mean(axis=1)


def block_mean(values, block: int) -> BlockMean:
    """The mean of ``values`` (in book order) with the batch-means standard error: the values cut into
    ``len // block`` consecutive groups of nearly equal size, the standard deviation of the group means over the
    square root of their number."""
    values = np.asarray(values, dtype=float)
    n_blocks = max(1, len(values) // block)
    means = np.array([g.mean() for g in np.array_split(values, n_blocks)])
    se = float(means.std(ddof=1) / np.sqrt(n_blocks)) if n_blocks > 1 else float("nan")
    return BlockMean(float(values.mean()), se, n_blocks - 1)


RHO_GRID = np.round(np.arange(0.0, 0.801, 0.05), 2)  # the lag-1 correlations the interval allows for
TABLE_DRAWS = 10000  # simulated series per correlation and length


def _inflation(r1, n: int) -> np.ndarray:
    """How much wider than independence an AR(1) with lag-1 sample autocorrelation ``r1`` makes a mean's error:
    √((1 + r)/(1 − r)) at r, the autocorrelation corrected for its bias −(1 + 4r)/n and clipped to
    the range of ``RHO_GRID``."""
    r = np.clip(r1 + (1 + 4 * r1) / n, 0.0, RHO_GRID[-1])
    return np.sqrt((1 + r) / (1 - r))


def _lag1(x: np.ndarray) -> np.ndarray:
    """The lag-1 sample autocorrelation along the last axis."""
    d = x - x.mean(-1, keepdims=True)
    return (d[..., 1:] * d[..., :-1]).sum(-1) / (d * d).sum(-1)


@lru_cache(maxsize=64)
def _critical(n: int, confidence: float) -> float:
    """The multiplier c for series of length ``n``: over stationary Gaussian AR(1) series at every correlation of
    ``RHO_GRID`` (``TABLE_DRAWS`` each, a fixed seed), the largest ``confidence`` quantile of
    |mean| / (sd / √n · inflation(r1)), a statistic whose law depends on the correlation and ``n`` only."""
    rng = np.random.default_rng([n, 71])
    e = rng.standard_normal((len(RHO_GRID), TABLE_DRAWS, n))
    rho = RHO_GRID[:, None]
    x = np.empty_like(e)
    x[:, :, 0] = e[:, :, 0]
    for i in range(1, n):
        x[:, :, i] = rho * x[:, :, i - 1] + np.sqrt(1 - rho**2) * e[:, :, i]
    t = np.abs(x.mean(-1)) / (x.std(-1, ddof=1) / np.sqrt(n) * _inflation(_lag1(x), n))
    return float(np.quantile(t, confidence, axis=1).max())


def dependent_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """The ``confidence`` interval of the expected value of ``values`` (in book order) when neighbouring values may
    correlate: mean ± c · sd/√n · inflation(r1), the standard error widened by the lag-1 autocorrelation's AR(1)
    factor and c chosen so that the interval covers at every lag-1 correlation from 0 to 0.8 of a Gaussian AR(1)
    (the worst of them sets c; ``_critical``). Batch means over short blocks do not: 76% coverage at a correlation
    of 0.8 with blocks of 4 (docs/methods.md)."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    half = _critical(n, confidence) * values.std(ddof=1) / np.sqrt(n) * float(_inflation(_lag1(values), n))
    return float(values.mean() - half), float(values.mean() + half)
