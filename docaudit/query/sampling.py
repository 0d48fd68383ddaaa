"""Exact sampling at a temperature from given uniforms: the one sampler of every in-process generator (the
transformers decoding loop, ``decode.py``, and the llama.cpp backend's, ``backends/llamacpp.py``), so a row's
tokens depend on its logits and its uniforms alone."""

from __future__ import annotations

from docaudit.query.lazy import torch

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
