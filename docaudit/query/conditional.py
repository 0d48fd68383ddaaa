"""Bits per byte of a continuation after its context: what a model assigns to a given suffix, in a unit that
compares models with different tokenizers.

Context and suffix are encoded apart (so every model scores the same suffix text, whatever its tokenizer does at
the seam) and joined, after the model's BOS when its tokenizer starts encodings with one; a context longer than the
model's positions loses its oldest tokens. The suffix's bits are the sum of −log2 p of its tokens; its bytes are
those of its UTF-8 text."""

from __future__ import annotations

import math

import numpy as np
import torch

from docaudit.query.generate import require_in_process
from docaudit.query.loaded import LoadedModel
from docaudit.query.stats import bos_per_window


def _encode(lm: LoadedModel, context: str, suffix: str) -> tuple[list[int], int]:
    tok = lm.tokenizer
    bos = bos_per_window(tok)
    left = list(tok(context, add_special_tokens=False).input_ids)
    right = list(tok(suffix, add_special_tokens=False).input_ids)
    head = [bos] if bos is not None else []
    limit = lm.max_positions
    if limit is not None and len(head) + len(left) + len(right) > limit:
        left = left[max(0, len(left) - (limit - len(head) - len(right))) :]
    return head + left + right, len(right)


@torch.no_grad()
def bits_per_byte(lm: LoadedModel, pairs: list[tuple[str, str]], batch_size: int = 16) -> np.ndarray:
    """For each (context, suffix), the suffix's bits per byte under ``lm`` after the context (NaN for an empty
    suffix, or one with nothing before it to be predicted from)."""
    require_in_process(lm, "the scoring model")
    model = lm.model
    model.eval()
    encoded = [_encode(lm, c, s) for c, s in pairs]
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    out = np.full(len(pairs), np.nan)
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start : start + batch_size]
        width = max(len(ids) for ids, _ in chunk)
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, (seq, _) in enumerate(chunk):
            ids[row, : len(seq)] = torch.tensor(seq)
            mask[row, : len(seq)] = 1
        logp = torch.log_softmax(
            model(input_ids=ids.to(lm.device), attention_mask=mask.to(lm.device)).logits.float(), dim=-1
        ).cpu()
        for row, (seq, n_suffix) in enumerate(chunk):
            n_bytes = len(pairs[start + row][1].encode("utf-8"))
            if n_suffix == 0 or n_bytes == 0 or len(seq) == n_suffix:
                continue
            positions = torch.arange(len(seq) - n_suffix, len(seq))
            token_logp = logp[row, positions - 1, torch.tensor(seq)[positions]]
            out[start + row] = float(-token_logp.sum()) / math.log(2) / n_bytes
    return out


def scored_tokens(lm: LoadedModel, pairs: list[tuple[str, str]]) -> int:
    """The tokens a model runs over for ``pairs`` (context, suffix and BOS), for the cost record."""
    return sum(len(_encode(lm, c, s)[0]) for c, s in pairs)
