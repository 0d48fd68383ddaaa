"""The sliding-window querier (docs/methods.md, "Querying"): one pass of the model over a document gives its TokenStats.

Windows of equal length are batched. The model's trunk produces hidden states; the LM head is applied to chunks
of scored positions, and each chunk's logits are reduced at once (in float32) to the per-token statistics, so no
[batch, length, vocab] logits tensor is ever built. Only a few floats per token leave the device, once per document.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm.auto import tqdm

from docaudit.config import (
    EXCERPTS,
    ModelConfig,
    QueryConfig,
)
from docaudit.corpus.documents import (
    Document,
    Skips,
)
from docaudit.errors import DocauditError
from docaudit.io import sha256_text
from docaudit.query.cache import StatsCache, stats_key
from docaudit.query.distributed import active_pool
from docaudit.query.models import LoadedModel, load_model
from docaudit.query.stats import TokenStats, scored_spans

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)


def open_querier(model: ModelConfig | LoadedModel, query: QueryConfig, cache: bool = True) -> Querier:
    """A querier over a model (loaded here unless given), caching its TokenStats."""
    lm = model if isinstance(model, LoadedModel) else load_model(model)
    return Querier(lm, query, StatsCache() if cache else None)


def query_documents(querier: Querier, docs: list[Document], progress: bool = True) -> list[TokenStats]:
    """TokenStats of every document, in order (cached ones read from the cache), with a progress bar."""
    return querier.stats_many(((d.text, d.sha256) for d in docs), total=len(docs), progress=progress)


def queryable_documents(querier: Querier, docs: list[Document], skips: Skips) -> list[int]:
    """Indices of the documents the querier can query; the others (fewer than 2 tokens) are skipped."""
    return skips.select(docs, [querier.too_short(d.text) for d in docs], "too short")


SINGLE_PASS_CAP = 2048


def single_pass_context(lm: LoadedModel, cap: int = SINGLE_PASS_CAP) -> int:
    """The largest context a query of ``lm`` can use in one window: the model's positions (less one for a BOS
    put before every window), at most ``cap``."""
    limit = min(max_positions(lm.model) or cap, cap)
    return max(2, limit - (bos_per_window(lm.tokenizer) is not None))


TOKENS_PER_BATCH = {"cpu": 4096, "cuda": 32768}


# Rows of the LM head computed (and reduced) at once, as logit elements: a larger chunk reads the head's weight
# fewer times (Gemma-3's is 262,144 x 640 floats = 671 MB, read once per chunk); each chunk needs two or three
# [rows, vocab] float32 buffers. Measured in docs/benchmarks.md.
LOGIT_ELEMENTS_PER_CHUNK = {"cpu": 1 << 25, "cuda": 1 << 27}


def position_stats_(
    z: torch.Tensor, targets: torch.Tensor, e: torch.Tensor | None = None, t: torch.Tensor | None = None
) -> tuple[torch.Tensor, ...]:
    """Per-row statistics of float32 next-token logits ``z [P, V]`` for true tokens ``targets [P]``: log p of the
    true token, log p_max, the Min-K%++ mean and standard deviation of log p under p, and the column sum of p.

    Destroys ``z``; ``e`` and ``t`` are optional float32 ``[P, V]`` work buffers (allocated when omitted). Every
    sum over the vocabulary is a float32 pairwise (cascade) sum, the variance is computed around the mean (two
    passes, no cancellation), and the column sum of p is one matrix-vector product."""
    if e is None:
        e = torch.empty_like(z)
    if t is None:
        t = torch.empty_like(z)
    z.sub_(z.amax(-1, keepdim=True))  # z <- z - max z
    torch.exp(z, out=e)  # e <- exp(z)
    s0 = e.sum(-1, keepdim=True)
    w = s0.reciprocal()
    log_s0 = s0.log_()  # log-normalizer relative to the max
    psum = torch.mv(e.t(), w[:, 0])  # sum over rows of p = e / s0
    logp = z.gather(1, targets[:, None]).sub_(log_s0)
    c = torch.mul(e, z, out=t).sum(-1, keepdim=True).mul_(w)  # E_p[z]
    z.sub_(c)
    var = e.mul_(z).mul_(z).sum(-1, keepdim=True).mul_(w)  # E_p[(z - E_p[z])^2] = Var_p[log p]
    return logp[:, 0], -log_s0[:, 0], c.sub_(log_s0)[:, 0], var.sqrt_()[:, 0], psum


class _Head:
    """The LM head applied to chunks of hidden states, writing float32 logits.

    On the CPU a large plain float32 ``nn.Linear`` head runs through oneDNN with a pre-packed copy of its weight, which
    measured 1.3-1.45x faster than the default BLAS for these shapes (docs/benchmarks.md); set
    ``docaudit.query.querier.CPU_ONEDNN_HEAD = False`` to save the copy's memory. Otherwise the product is written into
    the caller's buffer (no fresh [rows, vocab] allocation per chunk)."""

    def __init__(self, head: Callable, module: torch.nn.Module | None, cap: float | None, device: torch.device):
        self.head, self.cap = head, cap
        self.weight = self.packed = None
        if (
            isinstance(module, torch.nn.Linear)
            and module.bias is None
            and type(module.weight) is torch.nn.Parameter
            and module.weight.dtype == torch.float32
        ):
            self.weight = module.weight
            if (
                device.type == "cpu"
                and CPU_ONEDNN_HEAD
                and module.weight.numel() >= ONEDNN_MIN_WEIGHT
                and torch.backends.mkldnn.is_available()
            ):
                try:
                    self.packed = self.weight.detach().to_mkldnn()
                except RuntimeError:
                    self.packed = None

    def __call__(self, hidden: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        if self.packed is not None and hidden.dtype == torch.float32:
            z = torch._C._nn.mkldnn_linear(hidden.contiguous().to_mkldnn(), self.packed, None).to_dense()
        elif self.weight is not None and hidden.dtype == torch.float32:
            z = torch.matmul(hidden, self.weight.t(), out=out)
        else:  # other heads (quantized, half precision, full-forward fallback): float32 copy of their output
            z = self.head(hidden)
            return z.float().contiguous() if out is None else out.copy_(z)
        if self.cap:
            z.div_(self.cap).tanh_().mul_(self.cap)
        return z


CPU_ONEDNN_HEAD = True


ONEDNN_MIN_WEIGHT = 1 << 24  # smaller heads: the default BLAS (oneDNN's per-shape setup would dominate)


def split_model(model: torch.nn.Module) -> tuple[Callable, Callable, torch.nn.Module | None, float | None]:
    """``(trunk, head, head_module, softcap)`` with ``head(trunk(ids)) == model(ids).logits``, so the head can run
    on chunks of positions. Falls back to the full forward (head = identity, no module) when the model does not
    decompose that way."""
    head = model.get_output_embeddings()
    base = getattr(model, "base_model", None)
    cap = getattr(model.config, "final_logit_softcapping", None)

    def trunk(ids):
        return base(input_ids=ids, use_cache=False).last_hidden_state

    def head_fn(hidden):
        z = head(hidden)
        return torch.tanh(z / cap) * cap if cap else z

    def full(ids):
        return model(input_ids=ids, use_cache=False).logits

    if head is None or base is None or base is model:
        return full, (lambda z: z), None, None
    probe = torch.arange(1, 9, device=head.weight.device)[None] % head.weight.shape[0]
    with torch.inference_mode():
        try:
            ok = torch.allclose(head_fn(trunk(probe)).float(), full(probe).float(), atol=1e-3, rtol=1e-3)
        except (AttributeError, TypeError, RuntimeError):
            ok = False
    if not ok:
        log.info("model does not split into trunk and head; using the full forward")
        return full, (lambda z: z), None, None
    return trunk, head_fn, head, cap


def max_positions(model: torch.nn.Module) -> int | None:
    """The longest input the model accepts, when its config says."""
    config = model.config
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


def context_limit(lm: LoadedModel) -> tuple[int | None, str]:
    """The longest ``--context`` the model takes (its positions, less one for a BOS put before every window), and
    a note saying so; ``(None, "")`` when its config does not say."""
    limit = max_positions(lm.model)
    if limit is None:
        return None, ""
    bos = bos_per_window(lm.tokenizer) is not None
    return limit - bos, f"the model takes {limit} positions" + (", one of them for the BOS token" if bos else "")


def bos_per_window(tokenizer: PreTrainedTokenizerBase) -> int | None:
    """The BOS id when the tokenizer starts every encoding with it (e.g. Gemma, Llama), else None. Such models
    expect it: each window is then queried as ``[BOS] + tokens``, which changes no scored position."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return None
    encoded = tokenizer("a", verbose=False)["input_ids"]
    return bos if encoded and encoded[0] == bos else None


EXCERPT_CHARS_PER_TOKEN = 16  # a generous bound on characters per token: the first span tokenized for an excerpt


EXCERPT_MARGIN_TOKENS = 64  # tokens beyond the excerpt in every span tokenized (a cut changes only the last few)


_RUN_START = re.compile(r"(?<=\S)\s")  # the first whitespace character after a word: where a new word begins


_SNAP_CHARS = 256  # how far back a random start looks for it


SHORT_TEXT_CHARS = 1024  # no tokenizer has a single token this long


@dataclass(frozen=True)
class Excerpt:
    """The tokens queried for a document and the characters ``text[start:end]`` they come from."""

    ids: np.ndarray
    start: int
    end: int


def _encode(tokenizer, text: str):
    enc = tokenizer(text, add_special_tokens=False, verbose=False, return_offsets_mapping=True)
    return enc["input_ids"], enc["offset_mapping"]


def _tokens_from(tokenizer, text: str, start: int, n: int) -> tuple[list[int], list[tuple[int, int]]]:
    """The first ``n`` tokens of ``tokenizer(text[start:])`` (all of them when fewer) and their character offsets in
    ``text``, tokenizing only a span long enough for them: ``(n + margin) * 16`` characters, doubled until it yields
    ``n + margin`` tokens or reaches the end of the text."""
    width = (n + EXCERPT_MARGIN_TOKENS) * EXCERPT_CHARS_PER_TOKEN
    while True:
        end = min(len(text), start + width)
        ids, offsets = _encode(tokenizer, text[start:end])
        if end == len(text) or len(ids) >= n + EXCERPT_MARGIN_TOKENS:
            return ids[:n], [(start + a, start + b) for a, b in offsets[:n]]
        width *= 2


def _tail_start(tokenizer, text: str, n: int) -> int:
    """The character offset where the last ``n`` tokens of the text begin, from a tokenized tail of the text
    (widened until it holds ``n + margin`` tokens)."""
    width = (n + EXCERPT_MARGIN_TOKENS) * EXCERPT_CHARS_PER_TOKEN
    while True:
        start = max(0, len(text) - width)
        ids, offsets = _encode(tokenizer, text[start:])
        if start == 0 or len(ids) >= n + EXCERPT_MARGIN_TOKENS:
            return start + offsets[max(0, len(ids) - n)][0]
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
        ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        return Excerpt(np.asarray(ids, dtype=np.int32), 0, len(text))
    if not getattr(tokenizer, "is_fast", False):
        raise DocauditError("--max-tokens needs a fast (Rust) tokenizer, and this model's tokenizer is not one")
    ids, offsets = _tokens_from(tokenizer, text, 0, max_tokens + 1)
    if len(ids) <= max_tokens:
        return Excerpt(np.asarray(ids, dtype=np.int32), 0, len(text))
    start = 0
    if mode == "random":
        rng = np.random.default_rng([seed, int(text_sha256[:12], 16)])
        start = _word_start(text, int(rng.integers(0, _tail_start(tokenizer, text, max_tokens) + 1)))
        ids, offsets = _tokens_from(tokenizer, text, start, max_tokens)
    return Excerpt(np.asarray(ids[:max_tokens], dtype=np.int32), start, offsets[min(len(ids), max_tokens) - 1][1])


class Querier:
    """Queries one loaded model with one QueryConfig, through an optional StatsCache."""

    def __init__(self, lm: LoadedModel, query: QueryConfig = QueryConfig(), cache: StatsCache | None = None):
        query.check(*context_limit(lm))
        self.lm, self.query, self.cache = lm, query, cache
        self.stride = query.effective_stride
        self.device = lm.device
        kind = "cuda" if self.device.type == "cuda" else "cpu"
        self.batch_size = query.batch_size or max(1, TOKENS_PER_BATCH[kind] // query.context)
        self.chunk_rows = max(1, LOGIT_ELEMENTS_PER_CHUNK[kind] // lm.vocab_size)
        self.bos = bos_per_window(lm.tokenizer)
        self._trunk, head_fn, module, cap = split_model(lm.model)
        self._head = _Head(head_fn, module, cap, self.device)
        self._work: dict[str, torch.Tensor] = {}

    def token_ids(self, text: str, text_sha256: str) -> np.ndarray:
        """The document's tokens to query under the excerpt setting (see :func:`excerpt`; without special tokens:
        a BOS, when the tokenizer uses one, is given to every window instead)."""
        q = self.query
        return excerpt(self.lm.tokenizer, text, q.max_tokens, q.excerpt, q.seed, text_sha256).ids

    def too_short(self, text: str) -> str | None:
        """Why the text cannot be queried (fewer than 2 tokens), or None. Only a text of at most
        ``SHORT_TEXT_CHARS`` characters is tokenized for this: a longer one is never a single token."""
        if len(text) > SHORT_TEXT_CHARS:
            return None
        n = len(self.lm.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
        return None if n >= 2 else f"too short: {n} token{'s' * (n != 1)} (a document needs at least 2 to be queried)"

    def key(self, text_sha256: str) -> str:
        """The cache key of a text's TokenStats under this model and query."""
        return stats_key(self.lm.cache_identity(), self.query.key(), text_sha256)

    def stats(self, text: str, text_sha256: str | None = None) -> TokenStats:
        """TokenStats of one text, from the cache when present."""
        sha = text_sha256 or sha256_text(text)
        key = self.key(sha)
        expect = {
            "context": self.query.context,
            "stride": self.stride,
            "vocab_size": self.lm.vocab_size,
            "gp": self.query.gp,
        }
        if self.cache is not None and (hit := self.cache.get(key, expect)) is not None:
            return hit
        ids = self.token_ids(text, sha)
        if len(ids) < 2:
            raise DocauditError(f"a document needs at least 2 tokens to be queried, this one has {len(ids)}")
        result = self.compute(ids)
        if self.cache is not None:
            self.cache.put(key, result)
        return result

    def stats_many(
        self,
        texts: Iterable[tuple[str, str | None]],
        total: int | None = None,
        desc: str = "querying",
        progress: bool = True,
    ) -> list[TokenStats]:
        """TokenStats of several ``(text, sha256 or None)``; a progress bar counts documents and tokens. Inside
        ``distributed.scale_out`` the documents the cache misses are queried on Ray workers."""
        if (pool := active_pool()) is not None:
            return pool.stats_many(self, texts, total, desc, progress)
        out = []
        with tqdm(texts, total=total, desc=desc, unit="doc", disable=not progress) as bar:
            tokens = 0
            for text, sha in bar:
                out.append(self.stats(text, sha))
                tokens += out[-1].n_tokens
                bar.set_postfix(tokens=tokens)
        return out

    def _buffer(self, name: str, rows: int, vocab: int) -> torch.Tensor:
        """A float32 ``[rows, vocab]`` work buffer kept between chunks and documents (no page faults per chunk)."""
        buf = self._work.get(name)
        if buf is None or buf.shape[0] < rows or buf.shape[1] != vocab:
            self._work.pop(name, None)
            buf = self._work[name] = torch.empty(rows, vocab, dtype=torch.float32, device=self.device)
        return buf[:rows]

    def release_buffers(self) -> None:
        """Free the work buffers (they are otherwise kept for the next document)."""
        self._work.clear()

    @torch.inference_mode()
    def compute(self, ids: np.ndarray) -> TokenStats:
        """Query the model over all windows of ``ids`` (no cache).

        Windows of equal length go through the trunk together; the LM head and the reductions run on chunks of
        at most ``chunk_rows`` scored positions, in float32 work buffers reused from chunk to chunk. Memory is
        bounded by the batch and chunk sizes whatever the document's length; the only per-token results are four
        float32 values, copied to the host once at the end (no host synchronization inside the loop)."""
        C, S = self.query.context, self.stride
        spans = scored_spans(len(ids), C, S)
        batches = list(_batches(spans, self.batch_size))
        shift = int(self.bos is not None)
        # Indices of the scored positions in each batch's flattened [windows * length] trunk output, all moved to
        # the device in one copy before the loop.
        index, bounds = [], [0]
        for batch in batches:
            length = batch[0][2] - batch[0][0] + shift
            index += [b * length + shift + np.arange(f - 1 - s, e - 1 - s) for b, (s, f, e) in enumerate(batch)]
            bounds.append(bounds[-1] + sum(e - f for _, f, e in batch))
        index_t = torch.as_tensor(np.concatenate(index), dtype=torch.long, device=self.device)
        ids_t = torch.as_tensor(ids, dtype=torch.long, device=self.device)
        vocab = self.lm.vocab_size
        gp = torch.zeros(vocab, dtype=torch.float64, device=self.device) if self.query.gp else None
        chunk = max(1, min(self.chunk_rows, max(b - a for a, b in zip(bounds, bounds[1:]))))
        direct = self._head.packed is not None
        work = [
            None if direct else self._buffer("logits", chunk, vocab),
            self._buffer("exp", chunk, vocab),
            self._buffer("product", chunk, vocab),
        ]
        # Per-token results, allocated once before the loop (long-lived small tensors allocated between the large
        # temporaries would fragment the heap and make memory grow with the document).
        results = torch.empty(bounds[-1], 4, dtype=torch.float32, device=self.device)
        for batch, lo_b, hi_b in zip(batches, bounds, bounds[1:]):
            windows = torch.stack([ids_t[s:e] for s, _, e in batch])
            if shift:
                windows = torch.nn.functional.pad(windows, (1, 0), value=self.bos)
            rows_t = index_t[lo_b:hi_b]
            hidden = self._trunk(windows).reshape(windows.numel(), -1)[rows_t]
            targets = windows.reshape(-1)[rows_t + 1]
            for lo in range(0, hi_b - lo_b, chunk):
                h = hidden[lo : lo + chunk]
                n = len(h)
                z = self._head(h, None if direct else work[0][:n])
                *values, psum = position_stats_(z, targets[lo : lo + n], work[1][:n], work[2][:n])
                torch.stack(values, dim=1, out=results[lo_b + lo : lo_b + lo + n])
                if gp is not None:
                    gp += psum
        logp, max_logp, mu, sigma = results.t().contiguous().cpu().numpy()
        return TokenStats(
            token_ids=ids.astype(np.int32),
            logp=logp,
            max_logp=max_logp,
            mu=mu,
            sigma=sigma,
            gp_sum=None if gp is None else gp.cpu().numpy(),
            vocab_size=vocab,
            context=C,
            stride=S,
        )


def _batches(spans, batch_size):
    """Consecutive windows of equal length, at most ``batch_size`` at a time (only the last window is shorter)."""
    batch = []
    for span in spans:
        if batch and (len(batch) == batch_size or span[2] - span[0] != batch[0][2] - batch[0][0]):
            yield batch
            batch = []
        batch.append(span)
    if batch:
        yield batch
