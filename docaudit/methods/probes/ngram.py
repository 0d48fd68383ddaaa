"""N-gram coverage of sampled continuations (Hallinan et al., "The Surprising Effectiveness of Membership Inference
with Simple N-Gram Coverage", CoLM 2025): how much of what a model writes after a passage's opening is made of
exact word n-grams of the passage's real continuation.

The definitions are the authors' (``shallinan1/NGramCoverageAttack``, ``src/attacks/ngram_coverage_attack``), and
``tests/test_probes_reference.py`` checks them to 1e-9 against a port of that code on the same generations:

- words: NLTK's ``casual_tokenize`` of the text transliterated to ASCII (``unidecode``), for the generation and
  the reference alike (``compute_ngram_coverage.py``, ``tokenize_func``);
- matched spans (``find_exact_match``): a window of the generation's words, starting ``min_ngram`` long, is a
  match when its words, joined back by the Moses detokenizer, occur as a substring of the (transliterated)
  reference text. A match grows the window by a word (replacing the span it extends); a miss drops its first word
  (or slides it when it is ``min_ngram`` long). The spans are kept in order with their text;
- coverage at ``n`` (``compute_creativity_index.py``, ``get_ngram_coverage``): the share of the generation's words
  inside a span of at least ``n`` words (``gen``); the same count over the longer of the generation and the
  reference (``ref``); twice the count over their summed lengths with the reference's so bounded (``total``);
  ``unique`` counts each span's text once. 0 when nothing is covered;
- creativity index (``compute_modified_creativity_index``): the sum of the coverages at ``n = 2 .. 12`` (their
  "modified" index: higher means more copying).

Per passage the samples' values are aggregated (``compute_roc_metrics.py`` tries min, max, median and mean;
docaudit offers max and mean). The authors' ``compute_creativity_index.py`` names ``nltk.casual_tokenize`` in its
``tokenize_func`` without importing ``nltk``; the reference length is taken as the ``casual_tokenize`` words of
the transliterated reference, as the rest of their code does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from docaudit.errors import DocauditError

MIN_NGRAM = 3  # the authors' default shortest match (compute_ngram_coverage.py, --min_ngram)
CREATIVITY_RANGE = (2, 12)  # LOW_CI_BOUND, HIGH_CI_BOUND of compute_creativity_index.py
LENGTHS = ("gen", "ref", "total")  # what coverage is a share of
AGGREGATES = {"max": np.max, "mean": np.mean}


@lru_cache(maxsize=1)
def _text_tools() -> tuple[Callable[[str], list[str]], Callable[[str], str], Callable[[list[str]], str]]:
    """NLTK's casual tokenizer, unidecode's transliteration and the Moses detokenizer (English), the authors'."""
    try:
        from nltk.tokenize.casual import casual_tokenize
        from sacremoses import MosesDetokenizer
        from unidecode import unidecode
    except ImportError as e:
        raise DocauditError(
            f"the n-gram probe needs the authors' tokenization ({e.name} is missing): pip install 'docaudit[probes]'"
        ) from None
    return casual_tokenize, unidecode, MosesDetokenizer(lang="en").detokenize


def words(text: str) -> list[str]:
    """The words n-grams are made of: ``casual_tokenize`` of the ASCII transliteration."""
    tokenize, ascii_of, _ = _text_tools()
    return tokenize(ascii_of(text))


@dataclass(frozen=True)
class Spans:
    """The spans of a generation's words found in the reference: ``(start, end, text)`` each, in order, with the
    generation's and the reference's word counts."""

    spans: tuple[tuple[int, int, str], ...]
    n_words: int
    ref_words: int


def match(generation: str, reference: str, min_ngram: int = MIN_NGRAM) -> Spans:
    """The authors' greedy window over the generation's words (module docstring), every window's detokenized text
    looked up as a substring of the transliterated reference."""
    _, ascii_of, detokenize = _text_tools()
    tokens = words(generation)
    source = ascii_of(reference)
    found: list[tuple[int, int, str]] = []
    if len(tokens) >= min_ngram:
        lo, hi = 0, min_ngram
        while hi <= len(tokens):
            text = detokenize(tokens[lo:hi])
            if text in source:
                last = found[-1] if found else None
                if last is not None and lo <= last[0] and last[1] <= hi:
                    found[-1] = (lo, hi, text)
                else:
                    found.append((lo, hi, text))
                hi += 1
            elif hi - lo > min_ngram:
                lo += 1
            else:
                lo, hi = lo + 1, hi + 1
    return Spans(tuple(found), len(tokens), len(words(reference)))


def coverage(spans: Spans, n: int = 1, unique: bool = False) -> dict[str, float]:
    """The shares of the generation's words inside spans of at least ``n`` words, over the three lengths
    (``LENGTHS``); ``unique``: a span whose text came before (at any length) adds nothing."""
    covered = np.zeros(spans.n_words, dtype=bool)
    seen: set[str] = set()
    for start, end, text in spans.spans:
        if end - start >= n and not (unique and text in seen):
            covered[start:end] = True
        seen.add(text)
    count = int(covered.sum())
    if count == 0:
        return dict.fromkeys(LENGTHS, 0.0)
    ref = max(spans.n_words, spans.ref_words)
    return {"gen": count / spans.n_words, "ref": count / ref, "total": 2 * count / (spans.n_words + ref)}


def creativity(spans: Spans, bounds: tuple[int, int] = CREATIVITY_RANGE, unique: bool = False) -> dict[str, float]:
    """The authors' modified creativity index: the coverages at every ``n`` of ``bounds`` (inclusive), summed."""
    values = [coverage(spans, n, unique) for n in range(bounds[0], bounds[1] + 1)]
    return {key: float(sum(v[key] for v in values)) for key in LENGTHS}


def passage_statistic(
    generations: list[str], reference: str, statistic: str = "creativity", aggregate: str = "max", length: str = "gen"
) -> float:
    """One passage's value: ``statistic`` (``coverage`` of spans of any length, or ``creativity``) of each sampled
    continuation against the real one, as a share of ``length``, aggregated over the samples."""
    if statistic not in ("coverage", "creativity"):
        raise DocauditError(f"unknown n-gram statistic {statistic!r} (coverage, creativity)")
    per_sample = []
    for generation in generations:
        spans = match(generation, reference)
        per_sample.append((coverage(spans) if statistic == "coverage" else creativity(spans))[length])
    return float(AGGREGATES[aggregate](per_sample))
