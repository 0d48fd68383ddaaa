"""Document-level feature extraction (docs/methods.md, "Feature extractors") as a scikit-learn estimator over
per-token value arrays."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from docaudit.config import FEATURES
from docaudit.errors import DocauditError

PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)


class DocumentFeatures(BaseEstimator, TransformerMixin):
    """``kind="agg"`` (AggFE): mean, min, max, std and percentiles of a document's values (+ token count when
    ``token_count``; off by default as it mostly measures length). ``kind="hist"`` (HistFE): the fraction of
    values in each of ``bins`` equal-width bins spanning the pooled training values; values outside that range
    are clipped into the edge bins. Checked against computationalprivacy/document-level-membership-inference
    ``src/feature_extraction.py``: ``simple_agg_feat_extraction`` (which always appends the count) and
    ``histogram_feats`` (``np.histogram(..., density=True)`` over training bin edges, which drops values outside
    them)."""

    def __init__(self, kind: str = "hist", bins: int = 1000, token_count: bool = False):
        self.kind = kind
        self.bins = bins
        self.token_count = token_count

    def fit(self, X: Iterable[np.ndarray], y: object = None) -> DocumentFeatures:
        """Check the settings and, for ``hist``, fix the bin edges on the pooled training values; ``y`` is unused."""
        if self.kind not in FEATURES:
            raise DocauditError(f"unknown feature extractor '{self.kind}' (choose from {', '.join(FEATURES)})")
        if self.kind == "hist":
            if self.bins < 1:
                raise DocauditError("--bins must be at least 1")
            pooled = np.concatenate(list(X))
            self.edges_ = np.linspace(pooled.min(), pooled.max(), self.bins + 1)
        return self

    def transform(self, X: Iterable[np.ndarray]) -> np.ndarray:
        """One feature row per document of per-token values."""
        return np.vstack([self._one(np.asarray(v, dtype=np.float64)) for v in X])

    def _one(self, values: np.ndarray) -> np.ndarray:
        if self.kind == "hist":
            clipped = np.clip(values, self.edges_[0], self.edges_[-1])
            counts, _ = np.histogram(clipped, bins=self.edges_)
            return counts / len(values)
        feats = [values.mean(), values.min(), values.max(), values.std(), *np.percentile(values, PERCENTILES)]
        if self.token_count:
            feats.append(len(values))
        return np.array(feats)
