"""Token-level normalization (docs/methods.md, "Normalization dictionaries" and "Normalizations") as a
scikit-learn estimator: dictionaries are fit on training documents only, then any document's true-token
probabilities are turned into values x_t."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from docaudit.config import NORMS, MetaConfig
from docaudit.errors import DocauditError
from docaudit.query.backends.base import provides, require
from docaudit.query.stats import TokenStats

# The backend statistics each normalization reads (docaudit.query.backends.base.STATISTICS).
NORM_NEEDS = {
    "none": ("logp",),
    "ratio_tf": ("logp",),
    "ratio_gp": ("logp", "gp"),
    "max_tf": ("logp", "max_logp"),
    "max_gp": ("logp", "max_logp", "gp"),
}


def served_norms(meta: MetaConfig, backend: str) -> MetaConfig:
    """``meta`` for a model queried through ``backend``: ``auto`` chooses only among the normalizations it can
    serve; a named one it cannot serve stops, before any query, with a one-line error naming those it can."""
    served = provides(backend)
    works = [n for n in NORMS if set(NORM_NEEDS[n]) <= served]
    if meta.norm == "auto":
        return replace(meta, norms=tuple(n for n in meta.norms if n in works))
    require(backend, f"normalization '{meta.norm}'", NORM_NEEDS[meta.norm], works)
    return meta


def fill_unseen(values: np.ndarray) -> np.ndarray:
    """Replace zero entries (tokens never seen) by half the smallest non-zero value (as the authors'
    computationalprivacy/document-level-membership-inference ``src/normalization.py`` ``get_norm_val``)."""
    values = np.asarray(values, dtype=np.float64).copy()
    nonzero = values[values > 0]
    if nonzero.size == 0:
        raise DocauditError("cannot build a normalization dictionary from documents without tokens")
    values[values <= 0] = nonzero.min() / 2
    return values


def token_counts(ids: Iterable[np.ndarray], vocab: int) -> np.ndarray:
    """How often each of the ``vocab`` token ids occurs in the token arrays ``ids`` (float64)."""
    return sum((np.bincount(a, minlength=vocab)[:vocab].astype(np.float64) for a in ids), np.zeros(vocab))


def tf_dictionary(stats: Sequence[TokenStats]) -> np.ndarray:
    """Token frequencies over the documents' tokens: count of v / total count (the authors'
    ``src/compute_token_freq.py``, combined over the training chunks by ``main.py`` ``get_train_token_norm``)."""
    counts = token_counts((s.token_ids for s in stats), stats[0].vocab_size)
    return fill_unseen(counts / counts.sum())


def token_frequencies(ids: Iterable[np.ndarray], vocab: int) -> np.ndarray:
    """Laplace-smoothed token frequencies of a reference corpus, ``(count + 1) / (total + vocab)`` (DC-PDD:
    zhang-wei-chao/DC-PDD ``com_det_sco.py``, ``fre_dis_smo``), so no token has frequency 0."""
    counts = token_counts(ids, vocab)
    return (counts + 1.0) / (counts.sum() + vocab)


def gp_dictionary(stats: Sequence[TokenStats]) -> np.ndarray:
    """General probability: the model's mean predicted distribution over all scored positions. (The authors'
    ``src/compute_perplexity.py`` averages per-document means; every scored position weighs the same here.)"""
    if any(s.gp_sum is None for s in stats):
        raise DocauditError("the GP dictionary needs softmax sums; query with gp=True")
    total = sum(s.gp_sum for s in stats)
    return fill_unseen(total / sum(s.n_scored for s in stats))


class TokenNormalizer(BaseEstimator, TransformerMixin):
    """Per-token values x_t from TokenStats (higher = less likely under the model, relative to the reference).
    The fitted dictionary ``reference_`` is kept in float32 (a saved Gemma-sized classifier stays small).

    ``method``: none (-log p), ratio_tf / ratio_gp (-log(p / ref)), max_tf / max_gp
    (-log((1 - (p_max - p)) / ref), numerator floored at ``eps``, which only bites when p_max - p ≈ 1).
    Checked against computationalprivacy/document-level-membership-inference ``src/normalization.py``:
    ``normalize_token_loss`` (ratio), ``get_diff_max_token`` (max; it replaces a NaN or infinite value by 1e-5
    instead of flooring the numerator) and ``normalize_tokens_doc`` (none: the token's NLL). No orientation to
    fix: the meta-classifier learns the direction.
    """

    def __init__(self, method: str = "max_tf", eps: float = 1e-5):
        self.method = method
        self.eps = eps

    def fit(self, X: Iterable[TokenStats], y: object = None) -> TokenNormalizer:
        """Build the reference dictionary (TF or GP) from the training documents ``X``; ``y`` is unused."""
        if self.method not in NORMS:
            raise DocauditError(f"unknown normalization '{self.method}' (choose from {', '.join(NORMS)})")
        stats = list(X)
        if self.method.endswith("_tf"):
            self.reference_ = tf_dictionary(stats).astype(np.float32)
        elif self.method.endswith("_gp"):
            self.reference_ = gp_dictionary(stats).astype(np.float32)
        else:
            self.reference_ = None
        return self

    def transform(self, X: Iterable[TokenStats]) -> list[np.ndarray]:
        """The per-token values of each document of ``X``."""
        return [self.values(s) for s in X]

    def values(self, stats: TokenStats) -> np.ndarray:
        """One document's per-token values x_t under ``method`` and the fitted dictionary."""
        logp = stats.logp.astype(np.float64)
        if self.method == "none":
            return -logp
        log_ref = np.log(self.reference_[stats.targets])
        if self.method.startswith("ratio"):
            return -(logp - log_ref)
        numerator = 1.0 - (np.exp(stats.max_logp.astype(np.float64)) - np.exp(logp))
        return -(np.log(np.maximum(numerator, self.eps)) - log_ref)
