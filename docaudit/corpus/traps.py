"""Copyright traps in documents: planting copies at paragraph boundaries, and the private registry that records them.

A trap is a synthetic sequence inserted into a document before it is published; a control is a sequence from the
same generator that is kept private (Meeus et al. 2024, "Copyright Traps for Large Language Models", public code
``computationalprivacy/copyright-traps``). Which of a document's sequences are published is decided at random, so
a model that never read the document treats its traps and controls alike, and the detection test is exact.

The authors insert a trap between two words (``src/scripts/inject_traps.py`` ``inject_one``: split on spaces,
``random.sample`` of word positions); docaudit inserts each copy as its own paragraph at a paragraph boundary, so a
trapped document reads as the original with extra paragraphs, and no sentence of the author's is cut. Only
boundaries inside the body are used (:func:`body_starts`): never in a Project Gutenberg header, licence or other
matter that docaudit's cleaning removes, where a trap would be cut away before any model reads it.

The registry (JSON) holds, per document, the traps with the character offset of every copy in the trapped output,
the controls, each sequence's generator token ids and perplexity, and the SHA-256 of the source and the output; at
the top, the generator, the seed and the configuration. It is the author's secret: published, it would tell anyone
which sequences to look for and which to leave out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from docaudit.config.lab import (
    MAX_ID_CHARS,
    MAX_REGISTRY_DOCUMENTS,
    MAX_REGISTRY_SEQUENCES,
    MAX_SEQUENCE_CHARS,
    MAX_SEQUENCE_TOKENS,
)
from docaudit.errors import DocauditError
from docaudit.io import json_text, sha256_text
from docaudit.untrusted import load_untrusted_json

REGISTRY_FORMAT = "docaudit-trap-registry/1"

PRIVATE_NOTE = (
    "PRIVATE - DO NOT PUBLISH. This file lists the copyright traps planted in your documents and the control "
    "sequences kept back. Publish only the trapped documents; keep this file (and any copy of it) private. If it is "
    "published, or a model is trained on it, the trap test of that model says nothing."
)

PARAGRAPH_BREAK = "\n\n"

_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


def paragraph_starts(text: str) -> list[int]:
    """Character offsets where a paragraph begins: the start of the text and the end of every run of blank lines
    (a line break, optional spaces, another line break) that is followed by more text."""
    starts = [0]
    for m in re.finditer(r"(?:\n[ \t\r\f\v]*){2,}", text):
        if m.end() < len(text) and _BLANK_LINE.search(m.group()):
            starts.append(m.end())
    return sorted(set(starts))


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def body_starts(text: str) -> list[int]:
    """The paragraph starts (:func:`paragraph_starts`) where an inserted paragraph lies inside the body that
    docaudit's cleaning keeps (``cleaning.body_lines``): after a line of the body, at a paragraph of the body; the
    start of the text too when nothing before the body is removed. Refuses a text with no such start."""
    from bisect import bisect_right

    from docaudit.corpus.cleaning import body_lines

    first, end = body_lines(text)
    breaks = [m.end() for m in _LINE_BREAK.finditer(text)]  # where each line after the first begins
    starts = []
    for at in paragraph_starts(text):
        line = bisect_right(breaks, at)
        if first < line < end or (line == first < end and not text[:at].strip()):
            starts.append(at)
    if not starts:
        raise DocauditError("no paragraph break inside the body of the text to plant traps at")
    return starts


def passages(text: str, n: int, chars: int, rng: np.random.Generator) -> list[str]:
    """Up to ``n`` passages of the body for a generator to continue: the ``chars`` characters before a paragraph
    start inside the body (:func:`body_starts`), ending in the blank line, so that a continuation begins a paragraph
    where a trap would be planted; drawn without replacement by ``rng``, in the order drawn."""
    try:
        starts = [s for s in body_starts(text) if s >= chars]
    except DocauditError:
        starts = []
    picked = rng.choice(len(starts), size=min(n, len(starts)), replace=False) if starts else []
    return [text[starts[i] - chars : starts[i]] for i in picked]


@dataclass
class TrapSequence:
    """One generated sequence: its text, its generator token ids and its perplexity under the generator; for a
    published trap, the character offsets of its copies in the trapped document."""

    text: str
    token_ids: list[int]
    perplexity: float
    positions: list[int] = field(default_factory=list)


def insert_copies(
    text: str, traps: Sequence[str], copies: int, rng: np.random.Generator
) -> tuple[str, list[list[int]]]:
    """``text`` with ``copies`` copies of each trap inserted, each as its own paragraph (the trap and a blank line,
    in the text's own line ending) at a paragraph start drawn at random; and, per trap, the offsets of its copies
    in the result. The paragraph starts are drawn without replacement while there are enough (else with
    replacement: several copies then follow each other), and the copies are assigned to them in a random order. Only
    the starts inside the body are used (:func:`body_starts`)."""
    starts = body_starts(text)
    brk = "\r\n\r\n" if "\r\n" in text else PARAGRAPH_BREAK  # the document's own line ending
    n = len(traps) * copies
    chosen = rng.choice(starts, size=n, replace=n > len(starts))
    owner = rng.permutation(np.repeat(np.arange(len(traps)), copies))
    order = np.lexsort((np.arange(n), chosen))  # by position, ties kept in draw order
    pieces, positions, last, shift = [], [[] for _ in traps], 0, 0
    for i in order:
        at, t = int(chosen[i]), int(owner[i])
        pieces.append(text[last:at])
        shift += at - last
        positions[t].append(shift)
        insert = traps[t] + brk
        pieces.append(insert)
        shift += len(insert)
        last = at
    pieces.append(text[last:])
    out = "".join(pieces)
    return out, [sorted(p) for p in positions]


@dataclass
class TrappedDocument:
    """One document's entry in the registry."""

    id: str
    source: str
    source_sha256: str
    output: str
    output_sha256: str
    traps: list[TrapSequence]
    controls: list[TrapSequence]

    def check(self, text: str) -> None:
        """Refuse an output text that does not hold every copy of every trap where the registry says."""
        for trap in self.traps:
            for pos in trap.positions:
                if text[pos : pos + len(trap.text)] != trap.text:
                    raise DocauditError(f"{self.output}: trap copy not found at offset {pos}")


@dataclass
class TrapRegistry:
    """The private record of a ``traps make`` run (see the module docstring); ``run_seed`` is the seed of that run,
    written as the registry's ``seed``."""

    generator: dict
    run_seed: int
    config: dict
    documents: list[TrappedDocument]
    created: str = ""
    docaudit_version: str = ""

    def as_json(self) -> dict:
        return {
            "format": REGISTRY_FORMAT,
            "private_note": PRIVATE_NOTE,
            "docaudit_version": self.docaudit_version,
            "created": self.created,
            "generator": self.generator,
            "seed": self.run_seed,
            "config": self.config,
            "documents": [asdict(d) for d in self.documents],
        }

    def write(self, path: Path) -> None:
        from docaudit.io import atomic_write_text

        atomic_write_text(Path(path), json_text(self.as_json()))


def check_id(value: str, what: str) -> None:
    """Refuse an id (a registry's document, a trapped copy's file name) holding a control character (NUL, a line
    break), a path separator, or more than ``MAX_ID_CHARS`` characters: no folder could hold its file."""
    if not value or len(value) > MAX_ID_CHARS or "/" in value or any(unicodedata.category(c) == "Cc" for c in value):
        shown = value[:60].encode("unicode_escape").decode("ascii") + ("..." if len(value) > 60 else "")
        raise DocauditError(
            f"{what} {shown!r} ({len(value):,} characters) is not a usable name: at most {MAX_ID_CHARS} characters, "
            "without control characters or '/'"
        )


def _sequence(raw, where: str) -> TrapSequence:
    if not isinstance(raw, dict) or not isinstance(raw.get("text"), str) or not raw["text"].strip():
        raise DocauditError(f"{where}: a sequence without text")
    if len(raw["text"]) > MAX_SEQUENCE_CHARS:
        raise DocauditError(f"{where}: a sequence of {len(raw['text']):,} characters (at most {MAX_SEQUENCE_CHARS:,})")
    ids = raw.get("token_ids", [])
    ppl = raw.get("perplexity")
    positions = raw.get("positions", [])
    if not isinstance(ids, list) or len(ids) > MAX_SEQUENCE_TOKENS or not all(isinstance(i, int) for i in ids):
        raise DocauditError(f"{where}: token_ids must be a list of at most {MAX_SEQUENCE_TOKENS:,} integers")
    if not isinstance(positions, list) or not all(isinstance(i, int) and i >= 0 for i in positions):
        raise DocauditError(f"{where}: positions must be a list of offsets")
    if ppl is not None and not isinstance(ppl, (int, float)):
        raise DocauditError(f"{where}: perplexity must be a number")
    return TrapSequence(raw["text"], ids, float("nan") if ppl is None else float(ppl), positions)


def read_registry(path) -> TrapRegistry:
    """Read and check a registry file; anything malformed is a one-line DocauditError naming what is wrong."""
    path = Path(path)
    try:
        raw = load_untrusted_json(path, "registry")
    except OSError as e:
        raise DocauditError(f"registry {path}: cannot read ({e.strerror or e})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise DocauditError(f"registry {path}: not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(raw, dict) or raw.get("format") != REGISTRY_FORMAT:
        raise DocauditError(f"registry {path}: not a docaudit trap registry (format {REGISTRY_FORMAT} expected)")
    docs = raw.get("documents")
    if not isinstance(docs, list) or not docs:
        raise DocauditError(f"registry {path}: no documents")
    if len(docs) > MAX_REGISTRY_DOCUMENTS:
        raise DocauditError(f"registry {path}: {len(docs):,} documents (at most {MAX_REGISTRY_DOCUMENTS:,})")
    out, sequences = [], 0
    for i, d in enumerate(docs):
        where = f"registry {path}, document {i + 1}"
        if not isinstance(d, dict) or not isinstance(d.get("id"), str):
            raise DocauditError(f"{where}: no id")
        check_id(d["id"], f"{where}: the id")
        traps, controls = d.get("traps"), d.get("controls")
        if not isinstance(traps, list) or not isinstance(controls, list) or not traps or not controls:
            raise DocauditError(f"{where} ({d['id']}): needs a non-empty list of traps and of controls")
        sequences += len(traps) + len(controls)
        if sequences > MAX_REGISTRY_SEQUENCES:
            raise DocauditError(f"registry {path}: more than {MAX_REGISTRY_SEQUENCES:,} traps and controls in all")
        out.append(
            TrappedDocument(
                d["id"],
                str(d.get("source", "")),
                str(d.get("source_sha256", "")),
                str(d.get("output", "")),
                str(d.get("output_sha256", "")),
                [_sequence(t, f"{where} ({d['id']}) trap") for t in traps],
                [_sequence(c, f"{where} ({d['id']}) control") for c in controls],
            )
        )
    seed = raw.get("seed")
    return TrapRegistry(
        raw.get("generator") if isinstance(raw.get("generator"), dict) else {},
        seed if isinstance(seed, int) else -1,
        raw.get("config") if isinstance(raw.get("config"), dict) else {},
        out,
        str(raw.get("created", "")),
        str(raw.get("docaudit_version", "")),
    )


def jaccard(a: set, b: set) -> float:
    """Jaccard similarity of two sets (the authors' ``utils.jaccard_similarity``)."""
    return len(a & b) / len(a | b) if a or b else 1.0


def plant(
    doc_id: str,
    source: str,
    text: str,
    sequences: Sequence[TrapSequence],
    per_document: int,
    copies: int,
    rng: np.random.Generator,
    output: str,
) -> tuple[str, TrappedDocument]:
    """Split a document's ``2 * per_document`` sequences at random into traps and controls, insert ``copies`` copies
    of each trap (:func:`insert_copies`) and return the trapped text with the document's registry entry."""
    if len(sequences) != 2 * per_document:
        raise DocauditError(f"{doc_id}: {2 * per_document} sequences needed, {len(sequences)} given")
    order = rng.permutation(len(sequences))
    traps = [TrapSequence(**asdict(sequences[i])) for i in order[:per_document]]
    controls = [TrapSequence(**asdict(sequences[i])) for i in order[per_document:]]
    trapped, positions = insert_copies(text, [t.text for t in traps], copies, rng)
    for trap, pos in zip(traps, positions):
        trap.positions = pos
    entry = TrappedDocument(doc_id, source, sha256_text(text), output, sha256_text(trapped), traps, controls)
    entry.check(trapped)
    return trapped, entry
