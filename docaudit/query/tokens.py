"""A long text's token ids, tokenized a piece at a time.

A fast (Rust) tokenizer holds about 220 bytes per character of a text it encodes at once (measured: its encoding
keeps offsets, alignments and token strings for every character and token), so a 30 MB book took over 6 GB in
``score`` and ``map``. Here a text longer than ``PIECE_CHARS`` is encoded in pieces of that many characters, each
overlapping the next by ``OVERLAP_CHARS``, and two pieces are joined at a token both tokenize alike from there to
the end of the overlap (tokenization is local: a token depends only on the text near it), so the ids equal those of
the whole text and memory stays at a piece's worth. A tokenizer without character offsets, or two pieces that never
agree in their overlap, tokenizes the text whole."""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)

PIECE_CHARS = 1 << 18
OVERLAP_CHARS = 1 << 13
AGREE_TOKENS = 16  # tokens two pieces must tokenize alike, at least, where they are joined


def encode(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """The ids and character offsets of ``text`` without special tokens."""
    enc = tokenizer(text, add_special_tokens=False, verbose=False, return_offsets_mapping=True)
    return enc["input_ids"], enc["offset_mapping"]


def _arrays(ids, offsets, keep=slice(None)) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(ids, dtype=np.int32)[keep], np.asarray(offsets, dtype=np.int64).reshape(-1, 2)[keep]


def _window(ids, offsets, base: int, lo: int, hi: int) -> list[tuple[int, int, int]]:
    """``(start, end, id)`` of the tokens lying within the absolute characters ``[lo, hi)``."""
    return [(base + a, base + b, i) for i, (a, b) in zip(ids, offsets) if lo <= base + a and base + b <= hi]


def _join_at(first: list, second: list) -> int | None:
    """The absolute character where ``second`` may take over from ``first`` (both ``_window`` lists of the same
    characters): the earliest token start from which both lists hold the same tokens to their end, at least
    ``AGREE_TOKENS`` of them; None when there is none."""
    starts = {}
    for j, token in enumerate(second):
        starts.setdefault(token[0], j)
    for i, token in enumerate(first):
        j = starts.get(token[0])
        if j is not None and len(first) - i >= AGREE_TOKENS and first[i:] == second[j:]:
            return token[0]
    return None


def token_ids(tokenizer, text: str) -> np.ndarray:
    """The ids of ``tokenizer(text)`` without special tokens, as int32, tokenized in pieces when the text is long
    and the tokenizer gives offsets (module docstring)."""
    if len(text) <= PIECE_CHARS + OVERLAP_CHARS or not getattr(tokenizer, "is_fast", False):
        return np.asarray(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"], dtype=np.int32)
    return np.concatenate([ids for ids, _ in _pieces(tokenizer, text)])


def encode_long(tokenizer, text: str) -> tuple[np.ndarray, np.ndarray]:
    """The ids (int32) of ``tokenizer(text)`` without special tokens (a fast tokenizer) and their character offsets
    (``[n, 2]``, int64), tokenized in pieces when the text is long (module docstring)."""
    pieces = list(_pieces(tokenizer, text))
    return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


def _pieces(tokenizer, text: str):
    """The tokens of ``text`` a piece at a time: ``(ids, absolute offsets)`` of each piece's share, in order (the
    whole text at once when two pieces do not tokenize alike where they meet)."""
    if len(text) <= PIECE_CHARS + OVERLAP_CHARS:
        yield _arrays(*encode(tokenizer, text))
        return
    shares, base, taken = [], 0, 0  # ``taken``: the characters before it are in ``shares``
    ids, offsets = encode(tokenizer, text[:PIECE_CHARS])
    while base + PIECE_CHARS < len(text):
        end = base + PIECE_CHARS
        following = end - OVERLAP_CHARS
        next_ids, next_offsets = encode(tokenizer, text[following : following + PIECE_CHARS])
        margin = OVERLAP_CHARS // 4  # away from either piece's edge
        lo, hi = following + margin, end - margin
        at = _join_at(_window(ids, offsets, base, lo, hi), _window(next_ids, next_offsets, following, lo, hi))
        if at is None:
            log.info("the pieces of a long text do not tokenize alike where they meet: tokenizing it whole")
            yield _arrays(*encode(tokenizer, text))
            return
        shares.append(_piece(ids, offsets, base, taken, at))
        base, taken, ids, offsets = following, at, next_ids, next_offsets
    shares.append(_piece(ids, offsets, base, taken, len(text) + 1))
    yield from shares


def _piece(ids, offsets, base: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The tokens of a piece starting at absolute characters ``[lo, hi)``, their offsets made absolute."""
    piece_ids, piece_offsets = _arrays(ids, offsets)
    piece_offsets += base
    keep = (piece_offsets[:, 0] >= lo) & (piece_offsets[:, 0] < hi)
    return piece_ids[keep], piece_offsets[keep]
