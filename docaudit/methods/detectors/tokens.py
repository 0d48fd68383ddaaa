"""Token-level building blocks of the detectors: shares, means of extremes, Min-K%++ z-scores, polarized
distance, loss, and seeds derived from a text."""

from __future__ import annotations

import hashlib

import numpy as np


def text_seed(text: str) -> int:
    """A 48-bit integer from the text's SHA-256, so seeded augmentations depend on the text, not on call order."""
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16)


def n_of(share: float, n: int) -> int:
    """How many of ``n`` values a share selects: ``max(1, int(share * n))``."""
    return max(1, int(share * n))


def lowest_mean(values: np.ndarray, share: float) -> float:
    """Mean of the lowest ``max(1, int(share * n))`` values."""
    values = np.asarray(values, dtype=np.float64)
    k = n_of(share, len(values))
    return float(np.partition(values, k - 1)[:k].mean())


def highest_mean(values: np.ndarray, share: float) -> float:
    """Mean of the highest ``max(1, int(share * n))`` values."""
    return -lowest_mean(-np.asarray(values, dtype=np.float64), share)


def minkpp_tokens(logp: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Min-K%++ per token: ``(logp - mu) / sigma``, 0 where ``sigma == 0``."""
    logp, mu, sigma = (np.asarray(a, dtype=np.float64) for a in (logp, mu, sigma))
    out = np.zeros_like(logp)
    ok = sigma > 0
    out[ok] = (logp[ok] - mu[ok]) / sigma[ok]
    return out


def polarized_distance(logp: np.ndarray, k1: float, k2: float) -> float:
    """PAC's polarized distance: mean of the top ``k1`` share of ``logp`` minus mean of the bottom ``k2`` share
    (yyy01/PAC ``attack.py`` ``calculate_Polarized_Distance``: ``ratio_far = 0.05`` on top, ``ratio_local = 0.3``
    at the bottom, each at least one value)."""
    return highest_mean(logp, k1) - lowest_mean(logp, k2)


def _loss(logp: np.ndarray) -> float:
    """Cross-entropy loss (nats per scored token) from log-probabilities."""
    return -float(np.mean(logp, dtype=np.float64))
