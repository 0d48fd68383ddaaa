"""TokenStats: the per-token statistics of one document under one model — the currency of docaudit.

Every method after the querier works from these arrays, so the model runs once per document and configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from docaudit.errors import DocauditError


class NonFiniteStats(DocauditError):
    """A model or server gave values that are not finite numbers: refused, never cached (in a batch of
    ``predict``, a named skip)."""


def window_starts(n_tokens: int, context: int, stride: int) -> list[int]:
    """Start offsets of the sliding windows over a sequence of ``n_tokens`` tokens (docs/methods.md, "Querying")."""
    starts = [0]
    while starts[-1] + context < n_tokens:
        starts.append(starts[-1] + stride)
    return starts


def scored_spans(n_tokens: int, context: int, stride: int) -> list[tuple[int, int, int]]:
    """For each window ``(start, first_scored, end)``: the window is ``tokens[start:end]`` and it predicts the
    tokens ``first_scored .. end-1``. Every token but the first gets exactly one prediction."""
    spans, next_scored = [], 1
    for start in window_starts(n_tokens, context, stride):
        end = min(start + context, n_tokens)
        if end > next_scored:
            spans.append((start, next_scored, end))
            next_scored = end
    return spans


@dataclass
class TokenStats:
    """Statistics of one document. Arrays indexed by scored position ``i`` describe the prediction of
    ``token_ids[i + 1]`` (every token except the first is scored exactly once).

    - ``logp``: log-probability of the true token; ``max_logp``: log of the largest probability;
    - ``mu``, ``sigma``: mean and standard deviation of ``log p`` under ``p`` (Min-K%++ moments);
    - ``gp_sum``: sum over scored positions of the full softmax vector (float64, length = model output size),
      or None when not requested; ``vocab_size``: the model's output dimension;
    - ``floored``: how many ``logp`` values are only bounds (an OpenAI-compatible server's logit-bias search that
      reached its largest bias: the true value is at most the one given).
    """

    token_ids: np.ndarray
    logp: np.ndarray
    max_logp: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    gp_sum: np.ndarray | None
    vocab_size: int
    context: int
    stride: int
    floored: int = 0

    @property
    def n_tokens(self) -> int:
        """Tokens queried (the scored positions plus the first token)."""
        return int(len(self.token_ids))

    @property
    def n_scored(self) -> int:
        """Scored positions: every token but the first."""
        return int(len(self.logp))

    @property
    def targets(self) -> np.ndarray:
        """The scored (true) token ids, aligned with ``logp``."""
        return self.token_ids[1:]

    def windows(self) -> list[slice]:
        """Slices into the scored arrays, one per querier window; a window's values equal a single forward pass
        over ``token_ids[start:end]``."""
        return [slice(first - 1, end - 1) for _, first, end in scored_spans(self.n_tokens, self.context, self.stride)]

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays for ``np.savez`` (no pickled objects), read back by :meth:`from_arrays`."""
        arrays = {k: getattr(self, k) for k in ("token_ids", "logp", "max_logp", "mu", "sigma")}
        if self.gp_sum is not None:
            arrays["gp_sum"] = self.gp_sum
        arrays["meta"] = np.array([self.vocab_size, self.context, self.stride], dtype=np.int64)
        if self.floored:
            arrays["floored"] = np.array(self.floored, dtype=np.int64)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> TokenStats:
        """TokenStats from the arrays :meth:`to_arrays` wrote (e.g. an opened ``.npz``)."""
        vocab_size, context, stride = (int(v) for v in arrays["meta"])
        return cls(
            token_ids=np.asarray(arrays["token_ids"]),
            logp=np.asarray(arrays["logp"]),
            max_logp=np.asarray(arrays["max_logp"]),
            mu=np.asarray(arrays["mu"]),
            sigma=np.asarray(arrays["sigma"]),
            gp_sum=np.asarray(arrays["gp_sum"]) if "gp_sum" in arrays else None,
            vocab_size=vocab_size,
            context=context,
            stride=stride,
            floored=int(arrays["floored"]) if "floored" in arrays else 0,
        )

    def nonfinite(self) -> str | None:
        """What is not a finite number among the statistics, or None. ``mu`` and ``sigma`` may be NaN throughout
        (a backend that does not compute them), never in part."""
        for name in ("logp", "max_logp", "mu", "sigma"):
            values = np.asarray(getattr(self, name), dtype=np.float64)
            bad = ~np.isfinite(values)
            if name in ("mu", "sigma") and np.isnan(values).all():
                continue
            if bad.any():
                i = int(np.argmax(bad))
                return f"{name} is {values[i]} at scored position {i} ({int(bad.sum())} of {len(values)} not finite)"
        if self.gp_sum is not None and not np.isfinite(np.asarray(self.gp_sum, dtype=np.float64)).all():
            return "gp_sum is not finite"
        return None


def bos_per_window(tokenizer) -> int | None:
    """The BOS id when the tokenizer starts every encoding with it (e.g. Gemma, Llama), else None. Such models
    expect it: each window is then queried as ``[BOS] + tokens``, which changes no scored position."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return None
    encoded = tokenizer("a", verbose=False)["input_ids"]
    return bos if encoded and encoded[0] == bos else None
