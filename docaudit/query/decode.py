"""Continuations sampled from a causal LM run in this process: a decoding loop over the model's trunk and its KV
cache, the LM head on each row's last position only, and exact sampling at a temperature from given uniforms.

Why a loop of docaudit's own rather than transformers' ``generate``: on a model whose LM head is most of its
weights (Gemma-3's 262,144-token vocabulary), a generated token costs the head once, and the head is the one
prepared for scoring (``backends.transformers.prepared``: its packed weight shared with every backend opened on
the model). A prompt that several samples continue runs through the trunk once; its cache is then repeated for
its samples. Each row's next token is drawn by the inverse of its distribution's cumulative sum at a uniform the
caller gives for that row and step, so a row's tokens depend on its prompt, its uniforms and the model alone, not
on the batch it runs in or its neighbours (docs/benchmarks.md measures the loop against ``generate``).

The distribution is pure sampling at the temperature: softmax(logits / T) over the whole vocabulary (no top-k, no
top-p), with the end-of-sequence ids excluded (their probability shared by the others in proportion), so every
continuation has exactly the asked number of tokens, as ``generate``'s ``min_new_tokens`` gives.
"""

from __future__ import annotations

import inspect

import numpy as np

from docaudit.query.backends.transformers import LOGIT_ELEMENTS_PER_CHUNK, prepared
from docaudit.query.lazy import inference_mode, torch


def end_ids(model) -> list[int]:
    """The ids that would end a sequence (the generation config's EOS, else the model config's)."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = getattr(model.config, "eos_token_id", None)
    return [] if eos is None else [int(e) for e in ([eos] if isinstance(eos, int) else eos)]


BLOCK = 512  # tokens per block of the two-level cumulative sum


def inverse_cdf(logits, uniforms, temperature: float, banned):
    """Per row of ``logits`` ([rows, vocab] float32, overwritten), a draw from softmax(logits / ``temperature``)
    with the ``banned`` ids at probability 0: the token at which the cumulative sum of the probabilities first
    exceeds the row's uniform (in [0, 1)) times their total.

    The sum runs in two levels, so that no [rows, vocab] float64 tensor is written: float32 sums of blocks of
    ``BLOCK`` tokens, accumulated across blocks in float64, pick the block; the block's own float64 cumulative sum,
    scaled to the block's sum, picks the token. Each token's chance is its probability up to float32 rounding of
    the block's sum (a relative 1e-7 or so, the rounding of the probabilities themselves)."""
    rows, vocab = logits.shape
    top = logits.amax(dim=1, keepdim=True)
    logits.sub_(top)
    if temperature != 1.0:
        logits.div_(temperature)
    logits.exp_()
    if len(banned):
        logits.index_fill_(1, banned, 0.0)
    full = vocab // BLOCK * BLOCK
    sums = logits[:, :full].view(rows, -1, BLOCK).sum(-1)
    if full < vocab:
        sums = torch.cat([sums, logits[:, full:].sum(-1, keepdim=True)], dim=1)
    blocks = torch.cumsum(sums, dim=1, dtype=torch.float64)
    target = uniforms.to(torch.float64) * blocks[:, -1]
    block = torch.searchsorted(blocks, target[:, None], right=True).clamp_(max=sums.shape[1] - 1)
    below = torch.where(block > 0, blocks.gather(1, (block - 1).clamp_(min=0)), 0.0)[:, 0]
    columns = block * BLOCK + torch.arange(BLOCK, device=logits.device)
    inside = logits.gather(1, columns.clamp(max=vocab - 1)).to(torch.float64)
    inside[columns >= vocab] = 0.0  # only the last block may run past the vocabulary
    inside = torch.cumsum(inside, dim=1)
    total = inside[:, -1]
    within = (target - below) / sums.gather(1, block)[:, 0].to(torch.float64) * total
    within = torch.minimum(within, torch.nextafter(total, torch.zeros_like(total)))
    return block[:, 0] * BLOCK + torch.searchsorted(inside, within[:, None], right=True)[:, 0]


def shared_head(model, device) -> tuple:
    """The model's trunk and LM head as the transformers backend prepares them (the same packed weight, made once
    per model), and the rows of logits it computes at once."""
    vocab = int(model.get_output_embeddings().weight.shape[0])
    rows = max(1, LOGIT_ELEMENTS_PER_CHUNK["cuda" if device.type == "cuda" else "cpu"] // vocab)
    return (*prepared(model, device, rows), rows)


class Decoder:
    """A model's trunk with its KV cache and its prepared LM head, for sampling continuations."""

    def __init__(self, model, device):
        self.model, self.device = model, device
        vocab = int(model.get_output_embeddings().weight.shape[0])
        _, self.head, _ = shared_head(model, device)
        base = getattr(model, "base_model", None)
        # a model that does not split into trunk and head runs whole (its logits at the last position)
        self.base = base if self.head.splits and base is not None and base is not model else None
        self.banned = torch.tensor(end_ids(model), dtype=torch.long, device=device)
        self.vocab = vocab
        # transformers 5 names the cache ``cache``; earlier versions ``past_key_values``
        forward = (self.model if self.base is None else self.base).forward
        self.cache_name = "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"

    def _step(self, ids, cache):
        """The last position's float32 logits of each row after ``ids``, and the cache with them."""
        module = self.model if self.base is None else self.base
        out = module(input_ids=ids, use_cache=True, **{self.cache_name: cache})
        cache = getattr(out, self.cache_name)
        if self.base is None:
            return out.logits[:, -1].float().contiguous(), cache
        hidden = out.last_hidden_state[:, -1].contiguous()
        direct = self.head.packed is not None  # the packed head writes its own output
        buffer = None if direct else torch.empty(len(hidden), self.vocab, dtype=torch.float32, device=self.device)
        return self.head(hidden, buffer), cache

    @inference_mode
    def sample(self, prompts: list[list[int]], repeats: int, uniforms: np.ndarray, temperature: float) -> np.ndarray:
        """``repeats`` continuations of each prompt (all of one length), row ``i * repeats + j`` the ``j``-th of
        prompt ``i``, token ``t`` drawn at ``uniforms[row, t]``: an int64 array [rows, uniforms' columns]."""
        rows, n_tokens = uniforms.shape
        tokens = torch.empty(rows, n_tokens, dtype=torch.long, device=self.device)
        u = torch.as_tensor(uniforms, dtype=torch.float64, device=self.device)
        logits, cache = self._step(torch.tensor(prompts, dtype=torch.long, device=self.device), None)
        if repeats > 1:
            logits = logits.repeat_interleave(repeats, dim=0)
            cache.batch_repeat_interleave(repeats)
        for t in range(n_tokens):
            tokens[:, t] = inverse_cdf(logits, u[:, t], temperature, self.banned)
            if t + 1 < n_tokens:
                logits, cache = self._step(tokens[:, t : t + 1], cache)
        return tokens.cpu().numpy()
