"""The sliding-window querier (docs/methods.md, "Querying"): one pass of the model over a document gives its TokenStats.

The querier tokenizes (whole documents or excerpts), lays out the windows, and keeps the cache; a backend
(``docaudit.query.backends``: transformers, llama.cpp, an OpenAI-compatible server) turns the token ids into
TokenStats.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
from tqdm.auto import tqdm

from docaudit.config import EXCERPTS, SEED, ModelConfig, QueryConfig
from docaudit.corpus.documents import (
    Document,
    Skips,
)
from docaudit.errors import DocauditError, restated
from docaudit.io import sha256_text
from docaudit.query import rates
from docaudit.query.backends import Backend, open_backend
from docaudit.query.cache import StatsCache, stats_key
from docaudit.query.models import LoadedModel, load_model
from docaudit.query.progress import counting
from docaudit.query.stats import NonFiniteStats, TokenStats, bos_per_window
from docaudit.query.tokens import encode_long, token_ids
from docaudit.seeds import stream

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)


class Pool(Protocol):
    """Workers a querier can send its queries to (``docaudit.query.distributed.RayPool`` is one): the TokenStats of
    every text in order (``stats_many``), or the texts the querier's cache lacks computed into it (``compute``)."""

    def stats_many(
        self, querier: Querier, texts: Iterable[tuple[str, str | None]], total: int | None, desc: str, progress: bool
    ) -> list[TokenStats]: ...

    def compute(
        self, querier: Querier, texts: Iterable[tuple[str, str | None]], keep: bool, desc: str, progress: bool
    ) -> dict[str, TokenStats]: ...


def open_querier(
    model: ModelConfig | LoadedModel,
    query: QueryConfig,
    cache: bool = True,
    pool: Pool | None = None,
    *,
    seed: int = SEED,
) -> Querier:
    """A querier over a model (loaded here unless given), caching its TokenStats, sending its queries to ``pool``
    when one is given (``distributed.scale_out``); ``seed``: the run's, which picks the random excerpts."""
    lm = model if isinstance(model, LoadedModel) else load_model(model)
    return Querier(lm, query, StatsCache() if cache else None, pool, seed=seed)


def query_documents(querier: Querier, docs: list[Document], progress: bool = True) -> list[TokenStats]:
    """TokenStats of every document, in order (cached ones read from the cache), with a progress bar. A run that
    would need more requests than the model's ``max_requests`` stops before the first (:func:`check_requests`)."""
    check_requests(querier, docs)
    stats = querier.stats_many(
        ((d.text, d.sha256) for d in docs), total=len(docs), progress=progress, names=[str(d.path) for d in docs]
    )
    warn_floored(docs, stats)
    return stats


def query_usable(
    querier: Querier, docs: list[Document], skips: Skips, progress: bool = True
) -> tuple[list[Document], list[TokenStats]]:
    """As :func:`query_documents`, but a document whose statistics come out non-finite is skipped (named in
    ``skips``, never cached) instead of stopping the run; returns the documents kept and their statistics."""
    check_requests(querier, docs)
    stats = querier.stats_many(
        ((d.text, d.sha256) for d in docs),
        total=len(docs),
        progress=progress,
        names=[str(d.path) for d in docs],
        skip_nonfinite=True,
    )
    reasons = [s if isinstance(s, str) else None for s in stats]
    keep = skips.select(docs, reasons, "non-finite statistics")
    docs, stats = [docs[i] for i in keep], [stats[i] for i in keep]
    warn_floored(docs, stats)
    return docs, stats


def warn_floored(docs: list[Document], stats: list[TokenStats]) -> None:
    """One warning line per document with floored log-probabilities (:func:`floored_note`)."""
    for d, s in zip(docs, stats):
        if s.floored:
            log.warning("%s: %s", d.path, floored_note(s))


def floored_note(stats: TokenStats) -> str:
    """One line on a document's floored log-probabilities (an OpenAI-compatible server's logit-bias search)."""
    return (
        f"{stats.floored} of {stats.n_scored} log-probabilities are only upper bounds (the true token did not become "
        "the greedy choice even at the largest logit bias the API accepts)"
    )


def check_requests(querier: Querier, docs: list[Document]) -> int:
    """The requests a remote backend needs (at most) for the documents not yet cached, estimated before any
    query; more than ``max_requests`` is a one-line error. 0 for in-process backends."""
    estimate = getattr(querier.backend, "estimate", None)
    if estimate is None:
        return 0
    q = querier.query
    todo = [d for d in docs if querier.cache is None or not querier.cache.path(querier.key(d.sha256)).exists()]
    needed = sum(estimate(len(querier.token_ids(d.text, d.sha256)), q.context, querier.stride) for d in todo)
    cap = querier.lm.config.max_requests
    log.info("%d documents to query need up to %d requests", len(todo), needed)
    if cap is not None and querier.backend.requests + needed > cap:
        raise DocauditError(
            f"querying {len(todo)} documents needs up to {needed} requests, more than --max-requests {cap}"
        )
    return needed


def queryable_documents(querier: Querier, docs: list[Document], skips: Skips) -> list[int]:
    """Indices of the documents the querier can query; the others (fewer than 2 tokens) are skipped."""
    return skips.select(docs, [querier.too_short(d.text) for d in docs], "too short")


SINGLE_PASS_CAP = 2048


def single_pass_context(lm: LoadedModel, cap: int = SINGLE_PASS_CAP) -> int:
    """The largest context a query of ``lm`` can use in one window: the model's positions (less one for a BOS
    put before every window), at most ``cap``."""
    limit = min(lm.max_positions or cap, cap)
    return max(2, limit - (bos_per_window(lm.tokenizer) is not None))


def max_positions(model: torch.nn.Module) -> int | None:
    """The longest input the model accepts, when its config says."""
    config = model.config
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


def context_limit(lm: LoadedModel) -> tuple[int | None, str]:
    """The longest ``--context`` the model takes (its positions, less one for a BOS put before every window), and
    a note saying so; ``(None, "")`` when its config does not say."""
    limit = lm.max_positions
    if limit is None:
        return None, ""
    bos = bos_per_window(lm.tokenizer) is not None
    return limit - bos, f"the model takes {limit} positions" + (", one of them for the BOS token" if bos else "")


EXCERPT_CHARS_PER_TOKEN = 16  # a generous bound on characters per token: the first span tokenized for an excerpt


EXCERPT_MARGIN_TOKENS = 64  # tokens beyond the excerpt in every span tokenized (a cut changes only the last few)


_RUN_START = re.compile(r"(?<=\S)\s")  # the first whitespace character after a word: where a new word begins


_SNAP_CHARS = 256  # how far back a random start looks for it


SHORT_TEXT_CHARS = 1024  # no tokenizer has a single token this long


BLOCK_TOKENS = 16384  # tokens of the texts queried together by ``stats_many`` (their windows batched together)


BLOCK_TEXTS = 512  # and at most this many texts


@dataclass(frozen=True)
class Excerpt:
    """The tokens queried for a document and the characters ``text[start:end]`` they come from."""

    ids: np.ndarray
    start: int
    end: int


def _encode(tokenizer, text: str):
    return encode_long(tokenizer, text)


def _tokens_from(tokenizer, text: str, start: int, n: int) -> tuple[list[int], list[tuple[int, int]]]:
    """The first ``n`` tokens of ``tokenizer(text[start:])`` (all of them when fewer) and their character offsets in
    ``text``, tokenizing only a span long enough for them: ``(n + margin) * 16`` characters, doubled until it yields
    ``n + margin`` tokens or reaches the end of the text."""
    width = (n + EXCERPT_MARGIN_TOKENS) * EXCERPT_CHARS_PER_TOKEN
    while True:
        end = min(len(text), start + width)
        ids, offsets = _encode(tokenizer, text[start:end])
        if end == len(text) or len(ids) >= n + EXCERPT_MARGIN_TOKENS:
            return ids[:n], [(start + int(a), start + int(b)) for a, b in offsets[:n]]
        width *= 2


def _tail_start(tokenizer, text: str, n: int) -> int:
    """The character offset where the last ``n`` tokens of the text begin, from a tokenized tail of the text
    (widened until it holds ``n + margin`` tokens)."""
    width = (n + EXCERPT_MARGIN_TOKENS) * EXCERPT_CHARS_PER_TOKEN
    while True:
        start = max(0, len(text) - width)
        ids, offsets = _encode(tokenizer, text[start:])
        if start == 0 or len(ids) >= n + EXCERPT_MARGIN_TOKENS:
            return start + int(offsets[max(0, len(ids) - n)][0])
        width *= 2


def _word_start(text: str, pos: int) -> int:
    """The start of the whitespace run before the word at ``pos`` (looking at most 256 characters back: ``pos``
    itself when there is none there, 0 within the first word), so that an excerpt starts where a new word starts in
    the full text."""
    lo = max(0, pos - _SNAP_CHARS)
    found = 0 if lo == 0 else pos
    for m in _RUN_START.finditer(text, lo, pos + 1):
        found = m.start()
    return found


def excerpt(
    tokenizer: PreTrainedTokenizerBase, text: str, max_tokens: int | None, mode: str, seed: int, text_sha256: str
) -> Excerpt:
    """The tokens of a document to query (without special tokens): all of them, or an excerpt of ``max_tokens``.

    Only character spans of about ``max_tokens * 16`` characters are tokenized, so time and memory are bounded by
    the excerpt, not the document. The excerpt is the first ``max_tokens`` tokens of ``tokenizer(text[s:])``:

    - ``leading``: ``s = 0`` (the document's first tokens);
    - ``random``: a character ``c`` is drawn uniformly (``np.random.default_rng([seed, sha256[:12]])``) from
      ``0`` to the offset where the document's last ``max_tokens`` tokens begin, and ``s`` is the start of the
      whitespace run before the word at ``c`` (so the excerpt begins at a word, as in the whole text).

    A document of at most ``max_tokens`` tokens is queried whole. Needs a fast (Rust) tokenizer for the character
    offsets when ``max_tokens`` is set."""
    if mode not in EXCERPTS:
        raise DocauditError(f"unknown excerpt mode '{mode}' (choose from {', '.join(EXCERPTS)})")
    if max_tokens is None:
        return Excerpt(token_ids(tokenizer, text), 0, len(text))
    if not getattr(tokenizer, "is_fast", False):
        raise DocauditError("--max-tokens needs a fast (Rust) tokenizer, and this model's tokenizer is not one")
    ids, offsets = _tokens_from(tokenizer, text, 0, max_tokens + 1)
    if len(ids) <= max_tokens:
        return Excerpt(np.asarray(ids, dtype=np.int32), 0, len(text))
    start = 0
    if mode == "random":
        rng = stream(seed, "excerpt", int(text_sha256[:12], 16))
        start = _word_start(text, int(rng.integers(0, _tail_start(tokenizer, text, max_tokens) + 1)))
        ids, offsets = _tokens_from(tokenizer, text, start, max_tokens)
    return Excerpt(np.asarray(ids[:max_tokens], dtype=np.int32), start, int(offsets[min(len(ids), max_tokens) - 1][1]))


class Unopened(Backend):
    """The backend of a model whose weights are deferred (``LoadedModel.pending``): what it is and the cache key it
    adds, known without them; opened, loading the weights, on its first model pass. Only the transformers backend
    defers, and its statistics' key adds nothing beyond the model's own identity."""

    def __init__(self, lm: LoadedModel, query: QueryConfig):
        self.name, self.lm, self.query, self.opened = lm.config.backend, lm, query, None

    def open(self) -> Backend:
        if self.opened is None:
            self.opened = open_backend(self.lm, self.query)
        return self.opened

    def batch_size(self, context: int) -> int:
        return self.open().batch_size(context)

    def release_buffers(self) -> None:
        if self.opened is not None:
            self.opened.release_buffers()

    def compute(self, ids, context, stride, bos, gp, batch_size=None) -> TokenStats:
        return self.open().compute(ids, context, stride, bos, gp, batch_size)

    def compute_many(self, docs, context, stride, bos, gp, batch_size=None) -> list[TokenStats]:
        return self.open().compute_many(docs, context, stride, bos, gp, batch_size)


class Querier:
    """Queries one loaded model with one QueryConfig through its backend, with an optional StatsCache; with a
    ``pool`` (Ray workers: ``distributed.scale_out``), :meth:`stats_many` and :meth:`prefetch` query there.
    ``seed`` is the run's: it picks the random excerpts (``--max-tokens``) and is part of the cache key."""

    def __init__(
        self,
        lm: LoadedModel,
        query: QueryConfig = QueryConfig(),
        cache: StatsCache | None = None,
        pool: Pool | None = None,
        *,
        seed: int = SEED,
    ):
        query.check(*context_limit(lm))
        self.lm, self.query, self.cache, self.pool, self.seed = lm, query, cache, pool, seed
        self.stride = query.effective_stride
        self.device = lm.device
        self.bos = bos_per_window(lm.tokenizer)
        self.backend = open_backend(lm, query) if lm.loaded else Unopened(lm, query)
        if query.gp and "gp" not in self.backend.provides:
            raise DocauditError(f"the {self.backend.name} backend cannot compute GP sums: query with gp=False")

    def token_ids(self, text: str, text_sha256: str) -> np.ndarray:
        """The document's tokens to query under the excerpt setting (see :func:`excerpt`; without special tokens:
        a BOS, when the tokenizer uses one, is given to every window instead)."""
        q = self.query
        return excerpt(self.lm.tokenizer, text, q.max_tokens, q.excerpt, self.seed, text_sha256).ids

    def too_short(self, text: str) -> str | None:
        """Why the text cannot be queried (fewer than 2 tokens), or None. Only a text of at most
        ``SHORT_TEXT_CHARS`` characters is tokenized for this: a longer one is never a single token."""
        if len(text) > SHORT_TEXT_CHARS:
            return None
        n = len(self.lm.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
        return None if n >= 2 else f"too short: {n} token{'s' * (n != 1)} (a document needs at least 2 to be queried)"

    def key(self, text_sha256: str) -> str:
        """The cache key of a text's TokenStats under this model and query."""
        return stats_key(
            {**self.lm.cache_identity(), **self.backend.identity()}, self.query.key(self.seed), text_sha256
        )

    def _expect(self) -> dict:
        """What a cached entry must match to be used."""
        q = self.query
        return {
            "context": q.context,
            "stride": self.stride,
            "vocab_size": self.lm.vocab_size,
            "gp": q.gp,
            "max_tokens": q.max_tokens,
        }

    def stats(self, text: str, text_sha256: str | None = None) -> TokenStats:
        """TokenStats of one text, from the cache when present (queried in this process)."""
        return self.stats_local([(text, text_sha256)], progress=False)[0]

    def stats_many(
        self,
        texts: Iterable[tuple[str, str | None]],
        total: int | None = None,
        desc: str = "querying",
        progress: bool = True,
        names: list[str] | None = None,
        skip_nonfinite: bool = False,
    ) -> list[TokenStats]:
        """TokenStats of several ``(text, sha256 or None)``, cached ones from the cache; a progress bar counts
        scored tokens as the backend scores them (and documents beside it). The texts the cache misses are queried
        in blocks of up to ``BLOCK_TOKENS`` tokens (at most ``BLOCK_TEXTS`` texts), the windows of a block batched
        together (:meth:`compute_many`), so many short texts take a few forward passes. With a ``pool`` they are
        queried on its workers.
        An error names the document (from ``names``, when given); with ``skip_nonfinite`` (in this process) a
        document whose statistics are not finite gets the reason, a string, in place of its TokenStats, here or on
        the pool's workers alike; nothing non-finite is ever cached."""
        if self.pool is not None:
            return self.pool.stats_many(self, texts, total, desc, progress, names, skip_nonfinite)
        return self.stats_local(texts, total, desc, progress, names, skip_nonfinite)

    def stats_local(
        self,
        texts: Iterable[tuple[str, str | None]],
        total: int | None = None,
        desc: str = "querying",
        progress: bool = True,
        names: list[str] | None = None,
        skip_nonfinite: bool = False,
    ) -> list[TokenStats]:
        """:meth:`stats_many` in this process (never on Ray workers)."""
        out: list[TokenStats | str | None] = []
        todo: list[tuple[int, str, np.ndarray]] = []
        expect = self._expect()
        documents = moved = 0
        passes, queried = 0.0, 0  # seconds in the backend's model passes, and the tokens they scored
        whole = [0, 0]  # bytes and tokens of the texts queried whole

        def named(i: int, e: DocauditError) -> DocauditError:
            return restated(e, f"{names[i]}: {e}") if names else e

        def advance(n_tokens: int) -> None:
            nonlocal moved
            moved += n_tokens
            bar.update(n_tokens)

        def done(n: int, n_tokens: int) -> None:
            """``n`` more documents of ``n_tokens`` scored tokens done (those the backend did not report, moved)."""
            nonlocal documents, moved
            documents += n
            if n_tokens > moved:
                bar.update(n_tokens - moved)
            moved = 0
            bar.set_postfix(documents=f"{documents}/{total}" if total is not None else documents)

        def computed(block: list[tuple[int, str, np.ndarray]]) -> list[TokenStats | DocauditError]:
            """The block's results; when the block fails, each document again on its own, so the error is its own."""
            try:
                return self.compute_many([ids for _, _, ids in block])
            except DocauditError as e:
                if len(block) == 1:
                    return [e]
                return [r for item in block for r in computed([item])]

        def flush() -> None:
            nonlocal passes, queried
            if not todo:  # nothing missed: the backend (and a model whose weights wait) is never touched
                return
            if isinstance(self.backend, Unopened):  # the weights load here, timed as loading, not as model passes
                self.backend = self.backend.open()
            queried += sum(len(ids) - 1 for _, _, ids in todo)
            start = time.perf_counter()
            with counting(advance):
                results = computed(todo)
            passes += time.perf_counter() - start
            for (i, key, _), result in zip(todo, results):
                if isinstance(result, TokenStats) and (problem := result.nonfinite()) is not None:
                    result = NonFiniteStats(
                        f"the model gave non-finite statistics ({problem}): refused, and nothing was cached; check "
                        "the model or the server"
                    )
                if isinstance(result, NonFiniteStats) and skip_nonfinite:
                    out[i] = str(result)
                    continue
                if isinstance(result, DocauditError):
                    raise named(i, result) from result
                self.store(key, result)
                out[i] = result
            done(len(todo), sum(len(ids) - 1 for _, _, ids in todo))
            todo.clear()

        # the bar counts scored tokens (its total grows as documents are tokenized), so a single long document moves
        with tqdm(total=0, desc=desc, unit="tok", unit_scale=True, disable=not progress) as bar:
            for text, sha in texts:
                key = self.key(sha or sha256_text(text))
                hit = None if self.cache is None else self.cache.get(key, expect)
                out.append(hit)
                if hit is not None:
                    bar.total += len(hit.logp)
                    done(1, len(hit.logp))
                    continue
                ids = self.token_ids(text, sha or sha256_text(text))
                if self.query.max_tokens is None or len(ids) < self.query.max_tokens:  # the whole text
                    whole[0] += len(text.encode("utf-8"))
                    whole[1] += len(ids)
                bar.total += max(0, len(ids) - 1)
                if len(ids) < 2:
                    raise named(
                        len(out) - 1,
                        DocauditError(f"a document needs at least 2 tokens to be queried, this one has {len(ids)}"),
                    )
                todo.append((len(out) - 1, key, ids))
                if len(todo) >= BLOCK_TEXTS or sum(len(t[2]) for t in todo) >= BLOCK_TOKENS:
                    flush()
            flush()
        rates.record_query(self.lm.config, queried, passes, whole)
        return out

    def prefetch(self, texts: Iterable[tuple[str, str | None]], progress: bool = True) -> None:
        """With a ``pool`` and a cache, query on the workers (into the cache) the texts the cache misses, so that
        :meth:`stats` reads them afterwards; otherwise nothing (they are queried when asked)."""
        if self.pool is not None and self.cache is not None:
            self.pool.compute(self, texts, keep=False, desc="querying", progress=progress)

    def store(self, key: str, stats: TokenStats) -> None:
        """Write ``stats`` into the cache (when there is one) under ``key``, recording this querier's model."""
        if self.cache is not None:
            self.cache.put(key, stats, self.lm.identity)

    def compute_many(self, docs: list[np.ndarray]) -> list[TokenStats]:
        """Query the model over all windows of several token sequences (no cache), batched where the backend can."""
        q = self.query
        return self.backend.compute_many(docs, q.context, self.stride, self.bos, q.gp, q.batch_size)

    def compute(self, ids: np.ndarray) -> TokenStats:
        """Query the model over all windows of ``ids`` (no cache)."""
        q = self.query
        return self.backend.compute(ids, q.context, self.stride, self.bos, q.gp, q.batch_size)

    @property
    def batch_size(self) -> int:
        """Windows per forward pass (transformers backend)."""
        return self.query.batch_size or self.backend.batch_size(self.query.context)

    def release_buffers(self) -> None:
        """Free the backend's work buffers (they are otherwise kept for the next document)."""
        self.backend.release_buffers()
