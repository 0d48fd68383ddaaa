"""``extract --mode continuation``: how much of a book a model that only writes text gives back when asked to
continue its passages (Ahmed, Cooper, Koyejo & Liang 2026), beside what never-seen texts get the same way.

Per text, ``probe``'s layout (``audit.probes.windows``: one passage at random in each consecutive stretch of
``stretch_words`` words, the same in every text), the passage's opening sent as the prompt (after the probe's
instruction on a chat endpoint) ``samples`` times, what comes back compared with the real continuation
(``methods.probes.verbatim``). Per text: the share of passages with a long match (a common run of at least
``long_match_words`` words), the longest common run in words and characters, the mean word recall, and the
passages with a long match quoted with their character positions. What it measures is text written back; a
long match can come from training on the book, from quotations of it elsewhere or from common phrases, so it is
never called membership."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from docaudit.audit.probes import NGRAM_INSTRUCTION, windows
from docaudit.config import ContinuationConfig
from docaudit.corpus.base import Document, shown
from docaudit.errors import DocauditError
from docaudit.methods.probes.verbatim import passage_match
from docaudit.query.chat import Ask, Writer
from docaudit.seeds import stream


@dataclass
class ContinuedText:
    """One text's passages (character positions of the opening and of the real continuation), each passage's
    match figures (``methods.probes.verbatim.passage_match``), the text's summary and its passages with a long match,
    longest first (``quoted``)."""

    document: Document
    role: str
    passages: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    quoted: list[dict] = field(default_factory=list)


def passages_of(doc: Document, config: ContinuationConfig, seed: int) -> list[dict]:
    """The text's passages, drawn from the run's ``seed`` and the text's SHA-256: per passage the opening's and the
    real continuation's character spans and texts."""
    layout = config.layout(1.0)
    rng = stream(seed, "extract_continuation", int(doc.sha256[:12], 16))
    p, text = config.prompt_words, doc.text
    out = []
    for _, offsets in windows(text, layout.passage_words, layout, rng):
        opening, real = text[offsets[0] : offsets[p]].rstrip(), text[offsets[p] : offsets[-1]]
        out.append({"char_start": offsets[0], "continuation_start": offsets[p], "char_end": offsets[-1],
                    "opening": opening, "real": real})  # fmt: skip
    return out


def continue_texts(
    texts: list[tuple[Document, str]], writer: Writer, config: ContinuationConfig, temperature: float, seed: int
) -> list[ContinuedText]:
    """Every text's passages continued by ``writer`` and compared with the real continuations. Every text's
    passages are laid out first: a book holding none is refused in one line before anything is sent (a library
    text holding none is left out)."""
    laid = []
    for doc, role in texts:
        found = passages_of(doc, config, seed)
        if not found and role == "judged":
            raise DocauditError(
                f"{shown(doc.path)}: too short for one passage of {config.prompt_words} + {config.continuation_words}"
                f" words after its first passage's length (--prompt-words, --continuation-words)"
            )
        if found:
            laid.append(ContinuedText(doc, role, found))
    instruction = NGRAM_INSTRUCTION if writer.endpoint == "chat" else ""
    for text in laid:
        began, sent, cached = time.monotonic(), writer.sent, writer.cached
        asks = [Ask(instruction + p["opening"], config.samples, config.new_tokens, temperature, seed)
                for p in text.passages]  # fmt: skip
        for passage, written in zip(text.passages, writer.write(asks)):
            passage.update(passage_match(written, passage.pop("real"), config.min_match_words))
            passage.pop("opening")
        summarize(text, config)
        text.summary |= {"requests": writer.sent - sent, "cached": writer.cached - cached,
                         "seconds": round(time.monotonic() - began, 3)}  # fmt: skip
    return laid


def summarize(text: ContinuedText, config: ContinuationConfig) -> None:
    """The text's figures: passages, the share with a long match, the longest common run in words and in
    characters, the mean word recall; the passages with a long match, longest first."""
    words = np.array([p["longest_words"] for p in text.passages])
    long = words >= config.long_match_words
    text.summary = {
        "file": str(text.document.path),
        "sha256": text.document.sha256,
        "passages": len(text.passages),
        "long_matches": int(long.sum()),
        "long_match_share": float(long.mean()),
        "longest_match_words": int(words.max()),
        "longest_match_chars": int(max(p["longest_chars"] for p in text.passages)),
        "mean_recall": float(np.mean([p["recall"] for p in text.passages])),
    }
    text.quoted = sorted((p for p in text.passages if p["longest_words"] >= config.long_match_words),
                           key=lambda p: (-p["longest_words"], p["char_start"]))  # fmt: skip


def baseline(book: ContinuedText, library: list[ContinuedText]) -> dict | None:
    """The never-seen texts' shares of passages with a long match beside the book's: their median and largest, how
    many reach the book's (ties included) and the book's rank; None without a library."""
    if not library:
        return None
    shares = np.array([t.summary["long_match_share"] for t in library])
    mine = book.summary["long_match_share"]
    return {
        "texts": len(library),
        "source": "--null-library",
        "median_share": float(np.median(shares)),
        "max_share": float(shares.max()),
        "median_longest_words": float(np.median([t.summary["longest_match_words"] for t in library])),
        "at_or_above": int((shares >= mine).sum()),
        "rank": int((shares > mine).sum()) + 1,
    }


def continuation_audit(books, library, writer: Writer, config: ContinuationConfig, temperature: float, seed: int):
    """The books and the library texts (a text with a book's SHA-256 left out of the library) continued and
    compared, each book beside the library."""
    judged = {d.sha256 for d in books}
    texts = [(d, "judged") for d in books] + [(d, "library") for d in library if d.sha256 not in judged]
    done = continue_texts(texts, writer, config, temperature, seed)
    found = [t for t in done if t.role == "judged"]
    nulls = [t for t in done if t.role == "library"]
    return {"books": found, "library": nulls, "baselines": [baseline(b, nulls) for b in found]}
