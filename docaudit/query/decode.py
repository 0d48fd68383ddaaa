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
from docaudit.query.sampling import inverse_cdf


def end_ids(model) -> list[int]:
    """The ids that would end a sequence (the generation config's EOS, else the model config's)."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = getattr(model.config, "eos_token_id", None)
    return [] if eos is None else [int(e) for e in ([eos] if isinstance(eos, int) else eos)]


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
