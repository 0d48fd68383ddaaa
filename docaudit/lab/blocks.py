"""The lab target's training data: each member's leading tokens, concatenated into one stream and cut into blocks
of ``positions`` tokens, the block boundaries shifted by a seeded offset every epoch after the first."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from docaudit.errors import DocauditError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def leading_token_ids(tokenizer: PreTrainedTokenizerBase, text: str, max_tokens: int | None) -> list[int]:
    """The document's token ids as the tokenizer encodes it by default (special tokens included), cut to the
    first ``max_tokens``. Long texts are encoded from a prefix that is long enough, which gives the same ids."""
    if max_tokens is None:
        return list(tokenizer(text).input_ids)
    n_chars = max(1024, 16 * max_tokens)
    while True:
        prefix = text[:n_chars]
        ids = list(tokenizer(prefix).input_ids)
        # a cut text changes at most the last few pre-tokens; keep a margin so the leading ids are exact
        if len(prefix) == len(text) or len(ids) > max_tokens + 64:
            return ids[:max_tokens]
        n_chars *= 2


def token_stream(docs: list[list[int]], separator: int | None) -> torch.Tensor:
    """The documents concatenated into one training stream (with ``separator`` after each, if given)."""
    stream: list[int] = []
    for ids in docs:
        stream.extend(ids)
        if separator is not None:
            stream.append(separator)
    if len(stream) < 2:
        raise DocauditError("the member documents hold too few tokens to train on")
    return torch.tensor(stream, dtype=torch.long)


def epoch_offset(seed: int, epoch: int, block: int) -> int:
    """Where the first full block starts in epoch ``epoch``: 0 in the first epoch, then a seeded random shift, so
    block boundaries move between epochs and the model learns the text rather than its place in a block."""
    if epoch == 0:
        return 0
    return int(torch.randint(block, (1,), generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch + 7919)))


def blocks(stream: torch.Tensor, block: int, offset: int, pad_id: int):
    """Cut the stream into blocks of ``block`` tokens, the first one being ``stream[:offset]`` when ``offset``
    > 0; short blocks are right-padded and their padding masked out of attention and loss."""

    def padded(piece):
        ids = torch.full((1, block), pad_id, dtype=torch.long)
        ids[0, : len(piece)] = piece
        mask = torch.zeros((1, block), dtype=torch.long)
        mask[0, : len(piece)] = 1
        return ids, mask

    rest = stream[offset:]
    n_full = len(rest) // block
    blocks = [(rest[: n_full * block].view(n_full, block), torch.ones((n_full, block), dtype=torch.long))]
    if offset:
        blocks.insert(0, padded(stream[:offset]))
    if len(rest) > n_full * block:
        blocks.append(padded(rest[n_full * block :]))
    input_ids = torch.cat([b[0] for b in blocks])
    attention = torch.cat([b[1] for b in blocks])
    labels = input_ids.masked_fill(attention == 0, -100)
    return input_ids, attention, labels


def n_blocks(n_tokens: int, block: int, offset: int) -> int:
    return (1 if offset else 0) + math.ceil(max(0, n_tokens - offset) / block)
