"""Bits per byte of a continuation after its context: what a model assigns to a given suffix, in a unit that
compares models with different tokenizers.

Context and suffix are encoded apart (so every model scores the same suffix text, whatever its tokenizer does at
the seam) and joined, after the model's BOS when its tokenizer starts encodings with one; a context longer than the
model's positions loses its oldest tokens. The suffix's bits are the sum of −log2 p of its tokens; its bytes are
those of its UTF-8 text. Any backend that gives the log-probabilities of given tokens scores them: transformers
here, llama.cpp in process and a server that echoes prompt log-probabilities through their window scoring."""

from __future__ import annotations

import math

import numpy as np

from docaudit.query.decode import shared_head
from docaudit.query.generate import require_in_process
from docaudit.query.lazy import inference_mode, torch
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


def bits_per_byte(lm: LoadedModel, pairs: list[tuple[str, str]], batch_size: int = 16) -> np.ndarray:
    """For each (context, suffix), the suffix's bits per byte under ``lm`` after the context (NaN for an empty
    suffix or context, or a pair a server cannot be asked for exactly: :func:`suffix_logprob`)."""
    encoded = [_encode(lm, c, s) for c, s in pairs]
    nbytes = np.array([len(s.encode("utf-8")) for _, s in pairs], dtype=np.float64)
    keep = nbytes > 0
    logp = suffix_logprob(lm, [e for e, k in zip(encoded, keep) if k], batch_size)
    out = np.full(len(pairs), np.nan)
    out[keep] = -logp / math.log(2) / nbytes[keep]
    return out


def suffix_logprob(lm: LoadedModel, sequences: list[tuple[list[int], int]], batch_size: int = 16) -> np.ndarray:
    """For each ``(ids, n)`` (the ids as the model reads them: after its BOS when its tokenizer uses one), the sum
    of the natural log-probabilities of the last ``n`` ids, each after every id before it; NaN where no id but the
    BOS precedes them (a window's first token is never scored), or where a backend cannot be asked for exactly
    these ids.

    A transformers model runs here (:func:`_trunk_logprob`); every other backend through its own
    ``Backend.suffix_logprob``, opened once per model (``models.opened_backend``): llama.cpp several sequences
    per call with the logits of the suffix's positions only, a server each sequence as one window of its echoed
    prompt log-probabilities."""
    if lm.config.backend == "transformers":
        return _trunk_logprob(lm, sequences, batch_size)
    from docaudit.query.models import opened_backend

    bos = bos_per_window(lm.tokenizer)
    out = np.full(len(sequences), np.nan)
    first = int(bos is not None)  # a window scores every token but its first (the one after the BOS)
    asked = [i for i, (ids, n) in enumerate(sequences) if 0 < n < len(ids) - first]
    if asked:
        backend = opened_backend(lm, max(len(sequences[i][0]) for i in asked))
        out[asked] = backend.suffix_logprob([sequences[i] for i in asked], bos)
    return out


@inference_mode
def _trunk_logprob(lm: LoadedModel, sequences: list[tuple[list[int], int]], batch_size: int) -> np.ndarray:
    """:func:`suffix_logprob` of a transformers model in this process. The sequences, longest first, go through
    the model's trunk ``batch_size`` at a time, right-padded (causal attention: padding after a sequence changes
    none of its positions); the LM head prepared for the model (``decode.shared_head``) runs on the positions that
    predict a suffix token only, a chunk of rows at a time, and each row's log-probability of its token is its
    logit less the row's log-sum-exp, in float32."""
    require_in_process(lm, "the scoring model")
    model = lm.model
    model.eval()
    trunk, head, rows = shared_head(model, lm.device)
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    out = np.full(len(sequences), np.nan)
    first = int(bos_per_window(lm.tokenizer) is not None)  # the BOS predicts nothing of a suffix
    scored = [i for i, (seq, n_suffix) in enumerate(sequences) if n_suffix and len(seq) > n_suffix + first]
    scored.sort(key=lambda i: -len(sequences[i][0]))
    buffer = torch.empty(rows, lm.vocab_size, dtype=torch.float32, device=lm.device)
    for start in range(0, len(scored), batch_size):
        batch = scored[start : start + batch_size]
        width = len(sequences[batch[0]][0])
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        index, owner = [], []
        for row, i in enumerate(batch):
            seq, n_suffix = sequences[i]
            ids[row, : len(seq)] = torch.tensor(seq)
            index.append(row * width + np.arange(len(seq) - n_suffix - 1, len(seq) - 1))
            owner += [row] * n_suffix
        index_t = torch.as_tensor(np.concatenate(index), device=lm.device)
        flat = ids.to(lm.device).reshape(-1)
        hidden = trunk(flat.view(len(batch), width)).reshape(len(batch) * width, -1)[index_t]
        targets = flat[index_t + 1]
        logp = torch.empty(len(index_t), dtype=torch.float64)
        for lo in range(0, len(index_t), rows):
            z = head(hidden[lo : lo + rows], buffer[: len(hidden[lo : lo + rows])])
            picked = z.gather(1, targets[lo : lo + rows, None])[:, 0] - torch.logsumexp(z, dim=1)
            logp[lo : lo + len(picked)] = picked.cpu().double()
        out[batch] = np.bincount(owner, weights=logp.numpy(), minlength=len(batch))
    return out


def scored_tokens(lm: LoadedModel, pairs: list[tuple[str, str]]) -> int:
    """The tokens a model runs over for ``pairs`` (context, suffix and BOS), for the cost record."""
    return sum(len(_encode(lm, c, s)[0]) for c, s in pairs)
