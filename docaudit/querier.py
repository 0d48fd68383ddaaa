"""The sliding-window querier (SPEC §1): one pass of the model over a document gives its TokenStats.

Windows of equal length are batched. The model's trunk produces hidden states; the LM head is applied to chunks
of scored positions, and each chunk's logits are reduced at once (in float32) to the per-token statistics, so no
[batch, length, vocab] logits tensor is ever built. Only a few floats per token leave the device, once per document.
"""
from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable

import numpy as np
import torch
from tqdm.auto import tqdm

from .cache import StatsCache, stats_key
from .config import QueryConfig
from .errors import DocauditError
from .lm import LoadedModel
from .stats import TokenStats, scored_spans

log = logging.getLogger(__name__)

TOKENS_PER_BATCH = {"cpu": 2048, "cuda": 32768}
LOGIT_ELEMENTS_PER_CHUNK = {"cpu": 1 << 22, "cuda": 1 << 27}


def position_stats_(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per-row statistics of next-token logits ``[P, V]`` for true tokens ``[P]``, computed in float32: log p of
    the true token, log p_max, the Min-K%++ mean and standard deviation of log p under p, and the column sum of p.
    Works in place on ``logits`` when they are float32 (few passes, two temporaries)."""
    z = logits.float()
    z.sub_(z.amax(-1, keepdim=True))
    p = z.exp()
    log_norm = p.sum(-1, keepdim=True).log_()
    z.sub_(log_norm)
    p.mul_(torch.exp(-log_norm))
    mu = torch.linalg.vecdot(p, z)
    centered = torch.sub(z, mu[:, None]).square_()
    sigma = torch.linalg.vecdot(p, centered).sqrt_()
    return z.gather(1, targets[:, None])[:, 0], -log_norm[:, 0], mu, sigma, p.sum(0)


def split_model(model: torch.nn.Module) -> tuple[Callable, Callable]:
    """(trunk, head) with ``head(trunk(ids)) == model(ids).logits``, so the head can run on chunks of positions.
    Falls back to the full forward (head = identity) when the model does not decompose that way."""
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
        return full, lambda z: z
    probe = torch.arange(1, 9, device=head.weight.device)[None] % head.weight.shape[0]
    with torch.inference_mode():
        try:
            ok = torch.allclose(head_fn(trunk(probe)).float(), full(probe).float(), atol=1e-3, rtol=1e-3)
        except (AttributeError, TypeError, RuntimeError):
            ok = False
    if not ok:
        log.info("model does not split into trunk and head; using the full forward")
        return full, lambda z: z
    return trunk, head_fn


def max_positions(model) -> int | None:
    """The longest input the model accepts, when its config says."""
    config = model.config
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


def bos_per_window(tokenizer) -> int | None:
    """The BOS id when the tokenizer starts every encoding with it (e.g. Gemma, Llama), else None. Such models
    expect it: each window is then queried as ``[BOS] + tokens``, which changes no scored position."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return None
    encoded = tokenizer("a", verbose=False)["input_ids"]
    return bos if encoded and encoded[0] == bos else None


def excerpt(ids: np.ndarray, max_tokens: int | None, mode: str, seed: int, text_sha256: str) -> np.ndarray:
    """The document's tokens, or a leading / seeded random excerpt of ``max_tokens`` of them."""
    if max_tokens is None or len(ids) <= max_tokens:
        return ids
    if mode == "leading":
        return ids[:max_tokens]
    if mode != "random":
        raise DocauditError(f"unknown excerpt mode '{mode}' (random or leading)")
    rng = np.random.default_rng([seed, int(text_sha256[:12], 16)])
    start = int(rng.integers(0, len(ids) - max_tokens + 1))
    return ids[start : start + max_tokens]


class Querier:
    """Queries one loaded model with one QueryConfig, through an optional StatsCache."""

    def __init__(self, lm: LoadedModel, query: QueryConfig = QueryConfig(), cache: StatsCache | None = None):
        stride = query.effective_stride
        if query.context < 2 or not 1 <= stride <= query.context - 1:
            raise DocauditError(f"need context >= 2 and 1 <= stride <= context - 1 (got C={query.context}, S={stride})")
        self.lm, self.query, self.cache = lm, query, cache
        self.stride = stride
        self.device = lm.device
        kind = "cuda" if self.device.type == "cuda" else "cpu"
        self.batch_size = query.batch_size or max(1, TOKENS_PER_BATCH[kind] // query.context)
        self.chunk_rows = max(1, LOGIT_ELEMENTS_PER_CHUNK[kind] // lm.vocab_size)
        self._trunk, self._head = split_model(lm.model)
        self.bos = bos_per_window(lm.tokenizer)
        window = query.context + (self.bos is not None)
        limit = max_positions(lm.model)
        if limit is not None and window > limit:
            raise DocauditError(f"context {query.context}{' + BOS' if self.bos is not None else ''} exceeds the "
                                f"model's {limit} positions; use --context {limit - (self.bos is not None)} or less")

    def token_ids(self, text: str, text_sha256: str) -> np.ndarray:
        """Tokenize the document once (without special tokens: a BOS, when the tokenizer uses one, is given to
        every window instead) and apply the excerpt setting."""
        ids = self.lm.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        q = self.query
        return excerpt(np.asarray(ids, dtype=np.int32), q.max_tokens, q.excerpt, q.seed, text_sha256)

    def key(self, text_sha256: str) -> str:
        return stats_key(self.lm.cache_identity(), self.query.key(), text_sha256)

    def stats(self, text: str, text_sha256: str | None = None) -> TokenStats:
        """TokenStats of one text, from the cache when present."""
        sha = text_sha256 or hashlib.sha256(text.encode("utf-8")).hexdigest()
        key = self.key(sha)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return hit
        ids = self.token_ids(text, sha)
        if len(ids) < 2:
            raise DocauditError("a document needs at least 2 tokens to be queried")
        result = self.compute(ids)
        if self.cache is not None:
            self.cache.put(key, result)
        return result

    def stats_many(self, texts: Iterable[tuple[str, str | None]], total: int | None = None,
                   desc: str = "querying", progress: bool = True) -> list[TokenStats]:
        """TokenStats of several ``(text, sha256 or None)``; a progress bar counts documents and tokens."""
        out = []
        with tqdm(texts, total=total, desc=desc, unit="doc", disable=not progress) as bar:
            tokens = 0
            for text, sha in bar:
                out.append(self.stats(text, sha))
                tokens += out[-1].n_tokens
                bar.set_postfix(tokens=tokens)
        return out

    @torch.inference_mode()
    def compute(self, ids: np.ndarray) -> TokenStats:
        """Query the model over all windows of ``ids`` (no cache)."""
        C, S = self.query.context, self.stride
        spans = scored_spans(len(ids), C, S)
        ids_t = torch.as_tensor(ids, dtype=torch.long, device=self.device)
        vocab = self.lm.vocab_size
        gp = torch.zeros(vocab, dtype=torch.float64, device=self.device) if self.query.gp else None
        parts = []
        for batch in _batches(spans, self.batch_size):
            start, _, end = batch[0]
            windows = torch.stack([ids_t[s:e] for s, _, e in batch])
            if self.bos is not None:
                windows = torch.nn.functional.pad(windows, (1, 0), value=self.bos)
            length, shift = windows.shape[1], int(self.bos is not None)
            rows = np.concatenate([b * length + shift + np.arange(f - 1 - s, e - 1 - s) for b, (s, f, e) in enumerate(batch)])
            rows_t = torch.as_tensor(rows, device=self.device)
            hidden = self._trunk(windows).reshape(len(batch) * length, -1)[rows_t]
            targets = windows.reshape(-1)[rows_t + 1]
            for lo in range(0, len(rows), self.chunk_rows):
                *values, psum = position_stats_(self._head(hidden[lo : lo + self.chunk_rows]),
                                               targets[lo : lo + self.chunk_rows])
                parts.append(torch.stack(values))
                if gp is not None:
                    gp += psum.double()
        logp, max_logp, mu, sigma = torch.cat(parts, dim=1).cpu().numpy()
        return TokenStats(
            token_ids=ids.astype(np.int32), logp=logp, max_logp=max_logp, mu=mu, sigma=sigma,
            gp_sum=None if gp is None else gp.cpu().numpy(), vocab_size=vocab, context=C, stride=S,
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
