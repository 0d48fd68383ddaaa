"""A text's model-free profile: what tells texts of one era or kind from another's without any model (function-word
rates, word and sentence length, punctuation, digits, capitals, vocabulary richness), the blind check of a null
library against a book (``inference.outlier``).

Every figure is a rate or a mean over the text's middle ``PROFILE_WORDS`` words (the whole text when shorter), so a
book and a library text are profiled alike whatever their lengths: the shipped null libraries hold excerpts of
8,000 words from the middle of their books, and a judged book is profiled over the same middle span."""

from __future__ import annotations

import re

import numpy as np

PROFILE_WORDS = 8000
FUNCTION_WORDS = (
    "the", "of", "and", "to", "a", "in", "that", "he", "was", "it", "his", "i", "you", "she", "her", "had", "with",
    "for", "as", "at", "not", "but", "on", "be", "is", "they", "said", "which", "my", "we",
)  # fmt: skip
MARKS = (",", ";", ":", "!", "?", '"', "“", "”", "'", "’", "—", "-", "(")
WINDOW = 100  # words of the moving type-token ratio
FEATURES = (
    *(f"rate_{w}" for w in FUNCTION_WORDS),
    *(f"mark_{i}" for i in range(len(MARKS))),
    "word_length",
    "sentence_words",
    "digits",
    "capitalized",
    "moving_type_token_ratio",
)
_WORD = re.compile(r"[A-Za-z']+")


def middle_words(text: str, n: int = PROFILE_WORDS) -> str:
    """The text's middle ``n`` whitespace-separated words (all of them when it has fewer), joined by spaces."""
    words = text.split()
    if len(words) <= n:
        return " ".join(words)
    start = (len(words) - n) // 2
    return " ".join(words[start : start + n])


def text_profile(text: str) -> np.ndarray:
    """The profile of ``text`` (``FEATURES``, float64), over its middle ``PROFILE_WORDS`` words."""
    span = middle_words(text)
    tokens = span.split()
    words = [w.lower() for w in _WORD.findall(span)]
    n_words, n_tokens = max(len(words), 1), max(len(tokens), 1)
    counts: dict[str, int] = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    rates = [counts.get(w, 0) / n_words for w in FUNCTION_WORDS]
    marks = [span.count(m) / n_tokens for m in MARKS]
    sentences = max(1, len(re.findall(r"[.!?]+(?:\s|$)", span)))
    windows = [len(set(words[i : i + WINDOW])) / WINDOW for i in range(0, max(1, len(words) - WINDOW + 1), WINDOW)]
    return np.array(
        [
            *rates,
            *marks,
            float(np.mean([len(w) for w in words])) if words else 0.0,
            n_tokens / sentences,
            sum(c.isdigit() for c in span) / max(len(span), 1),
            sum(t[:1].isupper() for t in tokens) / n_tokens,
            float(np.mean(windows)) if len(words) >= WINDOW else len(set(words)) / n_words,
        ],
        dtype=np.float64,
    )
