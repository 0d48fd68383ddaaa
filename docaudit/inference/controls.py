"""The statistics of the paired synthetic-control test: per-passage contrasts, their mean with a batch-means
standard error, and the p-values against 0 or against a library of never-seen texts.

Scores are oriented so that higher means more likely under the model (minus bits per byte). The contrast of a
passage is the score of its real suffix minus the mean score of its synthetic suffixes; the placebo contrast puts
the first synthetic suffix in the real one's place (against the mean of the others), so its expectation is exactly
0 whatever the models are: the synthetic suffixes of a prefix are drawn independently from one distribution."""

from __future__ import annotations

from dataclasses import dataclass

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


def library_p_value(statistic: float, library) -> float:
    """The one-sided p-value of a book's statistic against the statistics of never-seen library texts: the
    t prediction interval of one new draw from the library's distribution, (x − mean) / (sd·√(1 + 1/n)) on n − 1
    degrees of freedom; exact when the statistics are normal and the book's is exchangeable with the library's."""
    from scipy.stats import t

    library = np.asarray(library, dtype=float)
    n = len(library)
    sd = library.std(ddof=1)
    if sd <= 0:
        return 0.0 if statistic > library.mean() else 1.0
    return float(t.sf((statistic - library.mean()) / (sd * np.sqrt(1 + 1 / n)), n - 1))
