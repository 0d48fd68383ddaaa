"""Scores of a part of a document from the statistics of one pass over the whole document (docs/methods.md,
"Which chapters: the map along a book").

A part's score is a registered detector's score (``methods/detectors``) computed on the scored positions that fall
in the part, so the model runs once per book whatever the number of parts. Only detectors that need no extra pass
(Loss, Zlib, Min-K%, Min-K%++) work at this scale: an extra pass would query every part again.
"""

from __future__ import annotations

import numpy as np

from docaudit.config import DetectorConfig
from docaudit.errors import DocauditError
from docaudit.methods.detectors import METHODS
from docaudit.methods.detectors.registry import View


def scored_bounds(n_scored: int, segment_tokens) -> np.ndarray:
    """The boundaries, in scored positions, of consecutive parts whose texts tokenize to ``segment_tokens`` tokens
    each when tokenized on their own: ``k + 1`` increasing offsets from 0 to ``n_scored``. Token counts are
    rescaled to the document's, so a boundary is off by at most the few tokens that merge across it."""
    counts = np.asarray(segment_tokens, dtype=np.float64)
    if counts.ndim != 1 or len(counts) == 0 or (counts < 0).any():
        raise DocauditError("segment token counts must be a non-empty list of counts")
    cum = np.concatenate([[0.0], np.cumsum(counts)])
    if cum[-1] <= 0:
        return np.zeros(len(cum), dtype=np.int64)
    bounds = np.rint(cum / cum[-1] * n_scored).astype(np.int64)
    return np.maximum.accumulate(bounds)


def segment_score(
    method: str, logp: np.ndarray, mu: np.ndarray, sigma: np.ndarray, text: str | None, config: DetectorConfig
) -> float:
    """``method``'s score (higher = more member-like) of the scored positions ``logp``/``mu``/``sigma`` of one part
    (``text``: the part's text, which Zlib needs)."""
    found = METHODS.get(method)
    if found is None or found.passes:
        raise DocauditError(f"{method} cannot score parts of a book (it needs an extra pass or does not exist)")
    if len(logp) == 0:
        raise DocauditError("a part with no scored token has no score")
    return float(found.score(View(logp, mu, sigma, text if found.uses_text else None), config))
