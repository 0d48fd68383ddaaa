"""How much of a passage's real continuation a model wrote back near-verbatim (Ahmed, Cooper, Koyejo & Liang 2026,
"Extracting books from production language models"): the longest common substring of what it wrote and the real
continuation, in characters and in words, and the share of the real continuation's words recovered in order in
matching blocks of at least ``min_words`` words (``difflib.SequenceMatcher``'s matching blocks).

Both texts are compared with every run of whitespace as one space; words are the pieces between spaces,
punctuation attached, case kept: a match is the text as written, not a paraphrase."""

from __future__ import annotations

from difflib import SequenceMatcher


def _matcher(a, b) -> SequenceMatcher:
    """A matcher without the junk heuristic (which skips frequent items and so misses long matches)."""
    return SequenceMatcher(None, a, b, autojunk=False)


def longest_common(a, b) -> tuple[int, int]:
    """The longest common contiguous run of two sequences (strings or word lists): its length and its start in
    ``a``; (0, 0) when they share nothing."""
    if not a or not b:
        return 0, 0
    match = _matcher(a, b).find_longest_match(0, len(a), 0, len(b))
    return match.size, match.a


def recall(real: list[str], written: list[str], min_words: int) -> float:
    """The share of ``real``'s words inside matching blocks of at least ``min_words`` words between ``real`` and
    ``written``, the blocks in order in both (``SequenceMatcher.get_matching_blocks``)."""
    if not real:
        return 0.0
    blocks = _matcher(real, written).get_matching_blocks()
    return sum(b.size for b in blocks if b.size >= min_words) / len(real)


def passage_match(written: list[str], real: str, min_words: int) -> dict:
    """The best of a passage's samples ``written`` against its ``real`` continuation: the longest common substring
    in words (with its text) and in characters, and the largest word recall (:func:`recall`), each the largest over
    the samples (not necessarily from one sample)."""
    real_text = " ".join(real.split())
    real_words = real_text.split(" ") if real_text else []
    best = {"longest_words": 0, "longest_chars": 0, "recall": 0.0, "match": ""}
    for text in written:
        mine = " ".join(text.split())
        words = mine.split(" ") if mine else []
        size, at = longest_common(real_words, words)
        if size > best["longest_words"]:
            best["longest_words"], best["match"] = size, " ".join(real_words[at : at + size])
        best["longest_chars"] = max(best["longest_chars"], longest_common(real_text, mine)[0])
        best["recall"] = max(best["recall"], recall(real_words, words, min_words))
    return best
