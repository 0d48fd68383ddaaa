"""``extract``: how much of each book a model writes back verbatim (Cooper et al. 2025), beside what never-seen
texts reach the same way.

Each text's token ids are cut into examples (``ExtractConfig``), p_z computed for each (``query.extraction``), and
the text summarized: the share of its tokens inside at least one (n, p)-discoverable suffix (top-k sampling) and
inside at least one greedy-extractable suffix (every suffix token an argmax), the longest run of tokens covered end
to end by discoverable suffixes, the largest p_z, and the covered passages themselves with their token and
character positions. The never-seen library texts go through the same steps; a book's figures are given beside
theirs (median, largest, how many reach the book's share), never as a verdict."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from docaudit.config import ExtractConfig
from docaudit.corpus.base import Document, shown
from docaudit.errors import DocauditError
from docaudit.query.extraction import Pz, cached_pz, check_fits, example_starts
from docaudit.query.loaded import LoadedModel
from docaudit.query.tokens import encode_long


@dataclass
class TextExtraction:
    """One text's examples and what they show: ``starts`` (each example's first token), ``pz`` (log p_z per
        example), the tokens and character offsets, the figures and the passages (:func:`summarize`), the seconds its
    p_z took and the examples run (not read from the cache)."""

    document: Document
    role: str
    starts: np.ndarray
    pz: Pz
    offsets: np.ndarray
    n_tokens: int
    summary: dict = field(default_factory=dict)
    passages: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    ran: int = 0  # examples run through the model (the others read from the cache)


def discoverable(log_pz: np.ndarray, n: int, p: float) -> np.ndarray:
    """Whether 1 − (1 − p_z)^n ≥ p for each log p_z (−inf: p_z = 0, never), computed as −expm1(n·log1p(−p_z))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        chance = -np.expm1(n * np.log1p(-np.exp(log_pz)))
    return np.nan_to_num(chance, nan=0.0) >= p


def covered(starts: np.ndarray, flags: np.ndarray, offset: int, length: int, n_tokens: int) -> np.ndarray:
    """The tokens of a text inside at least one flagged example's suffix (``length`` tokens from ``offset`` after
    the example's start), as a boolean array."""
    marks = np.zeros(n_tokens + 1, dtype=np.int64)
    chosen = starts[flags] + offset
    np.add.at(marks, chosen, 1)
    np.add.at(marks, chosen + length, -1)
    return np.cumsum(marks[:-1]) > 0


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The maximal runs of True in ``mask`` as half-open ``(start, end)`` token ranges, in order."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))


def tokenize(doc: Document, lm: LoadedModel, config: ExtractConfig) -> tuple[np.ndarray, np.ndarray]:
    """A text's token ids and character offsets (its first ``config.first_tokens`` when set); one line for a text
    of more tokens than ``config.max_tokens`` or fewer than one example."""
    ids, offsets = encode_long(lm.tokenizer, doc.text)
    if config.first_tokens is not None:
        ids, offsets = ids[: config.first_tokens], offsets[: config.first_tokens]
    if len(ids) > config.max_tokens:
        raise DocauditError(
            f"{shown(doc.path)}: {len(ids):,} tokens, more than --max-tokens {config.max_tokens:,} (raise it to "
            "extract from the whole text)"
        )
    if len(ids) < config.example_tokens:
        raise DocauditError(
            f"{shown(doc.path)}: {len(ids):,} tokens, fewer than one example of {config.prefix_tokens} + "
            f"{config.suffix_tokens} tokens (--prefix-tokens, --suffix-tokens)"
        )
    return ids, offsets


def extract_text(doc: Document, role: str, lm: LoadedModel, config: ExtractConfig, tokens: tuple) -> TextExtraction:
    """p_z of every example of ``doc`` (its ``tokens``: ids and offsets) and its summary."""
    ids, offsets = tokens
    starts = example_starts(len(ids), config.example_tokens, config.stride)
    began = time.monotonic()
    settings = (config.top_k, config.temperature, config.batch_size)
    values, ran = cached_pz(lm, ids, starts, config.prefix_tokens, config.suffix_tokens, settings)
    text = TextExtraction(doc, role, starts, values, offsets, len(ids), seconds=time.monotonic() - began, ran=ran)
    summarize(text, config)
    return text


def _chars(text: TextExtraction, lo: int, hi: int) -> tuple[int, int]:
    """The characters of tokens ``[lo, hi)``."""
    return int(text.offsets[lo, 0]), int(text.offsets[hi - 1, 1])


def summarize(text: TextExtraction, config: ExtractConfig) -> None:
    """The text's figures (``summary``) and its extractable passages, longest first (``passages``)."""
    found = discoverable(text.pz.sampled, config.n, config.p)
    greedy = text.pz.greedy > -np.inf
    cover = covered(text.starts, found, config.prefix_tokens, config.suffix_tokens, text.n_tokens)
    cover_greedy = covered(text.starts, greedy, config.prefix_tokens, config.suffix_tokens, text.n_tokens)
    spans = sorted(runs(cover), key=lambda r: (r[0] - r[1], r[0]))
    unknown = np.isnan(text.pz.sampled)  # examples a server could not be asked: neither covered nor 0
    sampled, greedy_pz = np.where(unknown, -np.inf, text.pz.sampled), np.where(unknown, -np.inf, text.pz.greedy)
    best = int(np.argmax(sampled)) if len(text.starts) else None
    longest = spans[0] if spans else None
    text.summary = {
        "tokens": text.n_tokens,
        "examples": len(text.starts),
        "discoverable_examples": int(found.sum()),
        "greedy_examples": int(greedy.sum()),
        "extractable_share": float(cover.mean()),
        "greedy_share": float(cover_greedy.mean()),
        "longest_run_tokens": 0 if longest is None else longest[1] - longest[0],
        "longest_run": None if longest is None else _span(text, *longest),
        "max_log_pz": _finite(sampled[best]) if best is not None else None,
        "max_pz": float(np.exp(sampled[best])) if best is not None else 0.0,
        "max_pz_greedy": float(np.exp(greedy_pz.max())) if len(text.starts) else 0.0,
        "unknown_examples": int(unknown.sum()),
        "seconds": text.seconds,
    }
    text.passages = [_span(text, lo, hi) for lo, hi in spans[: config.passages]]
    for passage in text.passages:
        passage["text"] = text.document.text[passage["char_start"] : passage["char_end"]]


def _span(text: TextExtraction, lo: int, hi: int) -> dict:
    start, end = _chars(text, lo, hi)
    return {"token_start": int(lo), "token_end": int(hi), "char_start": start, "char_end": end}


def _finite(value: float) -> float | None:
    """A log-probability as JSON holds it: None for −inf (p_z = 0)."""
    return float(value) if np.isfinite(value) else None


def baseline(book: TextExtraction, library: list[dict], source: str) -> dict | None:
    """The never-seen texts' extractable shares (``library``: each text's figures) beside the book's: their median
    and largest, and how many of them reach the book's share (ties included), with where they come from
    (``source``); None without a library."""
    if not library:
        return None
    shares = np.array([t["extractable_share"] for t in library])
    greedy = np.array([t["greedy_share"] for t in library])
    mine = book.summary["extractable_share"]
    return {
        "texts": len(library),
        "source": source,
        "median_share": float(np.median(shares)),
        "max_share": float(shares.max()),
        "median_greedy_share": float(np.median(greedy)),
        "max_greedy_share": float(greedy.max()),
        "at_or_above": int((shares >= mine).sum()),
        "rank": int((shares > mine).sum()) + 1,
    }


def extract_audit(
    books: list[Document], library: list[Document], lm: LoadedModel, config: ExtractConfig, stored: dict | None = None
) -> dict:
    """Every book's and library text's extraction, each book beside the library; without library texts, beside
    ``stored`` (a stored library's ``texts`` figures and its ``source``) when given. Every text is tokenized and
    checked (size, at least one example) before the model runs."""
    check_fits(lm, config.prefix_tokens, config.suffix_tokens)
    texts = [(d, "judged", tokenize(d, lm, config)) for d in books]
    texts += [(d, "library", tokenize(d, lm, config)) for d in library if d.sha256 not in {b.sha256 for b in books}]
    done = [extract_text(d, role, lm, config, tokens) for d, role, tokens in texts]
    judged = [t for t in done if t.role == "judged"]
    nulls = [t for t in done if t.role == "library"]
    figures, source = [t.summary for t in nulls], "--null-library"
    if not nulls and stored is not None:  # a stored text that is a judged book is not its own baseline
        judged_sha = {t.document.sha256 for t in judged}
        figures, source = [t for t in stored["texts"] if t["sha256"] not in judged_sha], stored["source"]
    return {"books": judged, "library": nulls, "baselines": [baseline(b, figures, source) for b in judged]}
