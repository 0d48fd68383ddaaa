"""What a backend is: anything that turns a document's token ids into TokenStats for the configured windows, and
declares which statistics it can provide.

Every backend scores the same windows (``docaudit.query.stats.scored_spans``) with the same layout (a BOS before
each window when the tokenizer uses one), so a document's TokenStats mean the same under each; only the statistics
a backend cannot compute differ (they are NaN, and nothing that needs them runs: ``require``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from docaudit.errors import DocauditError
from docaudit.query.stats import TokenStats

if TYPE_CHECKING:
    from docaudit.config import ModelConfig, QueryConfig
    from docaudit.query.loaded import LoadedModel

# The statistics a backend may provide: log p of the true token, log p_max, the Min-K%++ moments (mean and standard
# deviation of log p under p) and the GP sums (the softmax summed over positions). The first two need only the
# true token's and the top token's log-probabilities; the last two need the whole distribution at every position.
STATISTICS = {
    "logp": "log-probabilities of the true tokens",
    "max_logp": "the top token's log-probability",
    "moments": "the Min-K%++ moments (mean and spread of log p over the vocabulary)",
    "gp": "the GP sums (the whole predicted distribution)",
}

FULL = frozenset(STATISTICS)


class Unaskable(DocauditError):
    """A backend cannot be asked for exactly these tokens (a server reads text, and this text tokenizes otherwise)."""


@dataclass(frozen=True)
class BackendSpec:
    """A registered backend: its ``name`` (``ModelConfig.backend``, ``--backend``), the ``STATISTICS`` it
    ``provides``, how it loads a model (``load(config, expected_identity) -> LoadedModel``, refusing a model other
    than ``expected_identity`` when one is given), how it opens the ``Backend`` that queries a loaded model with a
    query (``open(lm, query)``), the ``ModelConfig`` fields that mean something to it alone (``options``) and a
    one-line ``help``."""

    name: str
    provides: frozenset[str]
    load: Callable[[ModelConfig, str | None], LoadedModel]
    open: Callable[[LoadedModel, QueryConfig], Backend]
    options: tuple[str, ...] = ()
    help: str = ""


# Every backend by name, in the order they were registered (``docaudit.query.backends`` imports each backend
# module, and each registers itself with ``register_backend``); this module imports none of them.
BACKENDS: dict[str, BackendSpec] = {}


def register_backend(
    name: str,
    provides: Iterable[str],
    load: Callable[[ModelConfig, str | None], LoadedModel],
    open: Callable[[LoadedModel, QueryConfig], Backend],
    options: tuple[str, ...] = (),
    help: str = "",
) -> BackendSpec:
    """Add a backend to ``BACKENDS`` (see :class:`BackendSpec`); a name registered twice, or a statistic not in
    ``STATISTICS``, is a programming error."""
    if name in BACKENDS:
        raise ValueError(f"backend '{name}' is registered twice")
    unknown = set(provides) - FULL
    if unknown:
        raise ValueError(f"backend '{name}' provides unknown statistics {sorted(unknown)}")
    BACKENDS[name] = spec = BackendSpec(name, frozenset(provides), load, open, tuple(options), help)
    return spec


def backend_spec(name: str) -> BackendSpec:
    """The registered backend ``name`` (an unknown backend is a one-line error)."""
    if name not in BACKENDS:
        raise DocauditError(f"unknown backend '{name}' (choose from {', '.join(BACKENDS)})")
    return BACKENDS[name]


# A text whose tokenization by two tokenizers is compared (spaces, quotes, brackets, digits, accents, newlines:
# where pre-tokenizers differ).
TOKENIZER_PROBE = (
    'The quick brown fox said "jumps" (over) the lazy dog\'s [back]. Ça coûte 12,50 €; naïve “quotes” — 1999,\t'
    "tabs,  two  spaces...\n\nNew paragraph: 3.14159 & <tags> #hash @at 'single' -dash_"
)


def provides(backend: str) -> frozenset[str]:
    """The statistics ``backend`` provides (an unknown backend is a one-line error)."""
    return backend_spec(backend).provides


def require(backend: str, what: str, needs: Iterable[str], works: Iterable[str] = ()) -> None:
    """Stop, before any query, when ``backend`` cannot provide a statistic ``what`` needs; the one-line error
    names what is missing and ``works`` (the alternatives that would run with this backend)."""
    missing = [s for s in needs if s not in provides(backend)]
    if missing:
        alternatives = list(works)
        hint = f"; with it use {', '.join(alternatives)}" if alternatives else ""
        others = [b for b, spec in BACKENDS.items() if set(missing) <= spec.provides]
        raise DocauditError(
            f"{what} needs {' and '.join(STATISTICS[s] for s in missing)}, which the {backend} backend does not "
            f"provide{hint} (or use --backend {' or '.join(others)})"
        )


def stats_from_rows(
    ids: np.ndarray, rows: np.ndarray, gp_sum: np.ndarray | None, vocab_size: int, context: int, stride: int
) -> TokenStats:
    """TokenStats from a ``[scored, 4]`` float32 array of (log p, log p_max, mu, sigma) per scored position."""
    logp, max_logp, mu, sigma = np.ascontiguousarray(rows.T, dtype=np.float32)
    return TokenStats(
        token_ids=ids.astype(np.int32),
        logp=logp,
        max_logp=max_logp,
        mu=mu,
        sigma=sigma,
        gp_sum=gp_sum,
        vocab_size=vocab_size,
        context=context,
        stride=stride,
    )


class Backend:
    """The part of a querier that runs the model: ``compute(ids)`` gives TokenStats over the windows of ``ids``
    (``context``, ``stride``, a ``bos`` id before each window or None, ``gp``: whether to sum the softmax).

    ``name`` and ``provides`` say what it is and which ``STATISTICS`` it can compute; ``vocab_size`` is the
    model's output dimension; ``identity()`` is what, besides the model's own identity, keys its statistics in the
    cache (e.g. the server and its model); ``requests`` counts the requests a remote backend made."""

    name = "transformers"
    requests = 0

    @property
    def provides(self) -> frozenset[str]:
        return provides(self.name)

    def identity(self) -> dict:
        return {}

    def compute(
        self, ids: np.ndarray, context: int, stride: int, bos: int | None, gp: bool, batch_size: int | None
    ) -> TokenStats:
        raise NotImplementedError

    def suffix_logprob(self, sequences: list[tuple[list[int], int]], bos: int | None) -> np.ndarray:
        """Per ``(ids, n)`` with ``0 < n < len(ids)`` (after ``bos`` when it is not None), the sum of the natural
        log-probabilities of the last ``n`` ids, each after every id before it; NaN where the backend cannot be asked
        for exactly these ids (:class:`Unaskable`). Here each sequence is one window of :meth:`compute`; a backend
        that can asks for the suffix's positions alone."""
        out = np.full(len(sequences), np.nan)
        for i, (ids, n) in enumerate(sequences):
            body = np.asarray(ids[1:] if bos is not None else ids, dtype=np.int64)
            try:
                stats = self.compute(body, len(body), len(body) - 1, bos, False, None)
            except Unaskable:
                continue
            out[i] = float(np.sum(stats.logp[-n:], dtype=np.float64))
        return out

    def compute_many(
        self, docs: list[np.ndarray], context: int, stride: int, bos: int | None, gp: bool, batch_size: int | None
    ) -> list[TokenStats]:
        """TokenStats of several documents (``compute`` of each; a backend that can batches their windows)."""
        return [self.compute(ids, context, stride, bos, gp, batch_size) for ids in docs]
