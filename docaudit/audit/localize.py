"""Which parts of a book the model was trained on: a map along the book with error control (``docaudit map``;
docs/methods.md, "Which chapters: the map along a book").

1. Segments: the book's chapters, from its headings, else runs of ``segment_words`` words
   (:mod:`docaudit.corpus.segments`); a chapter is scored from its body, the heading line left out.
2. One pass: the whole book is queried once (windows of ``--context`` with ``--stride``, cached like any document);
   a segment's score is the detector's score on the scored positions that fall in it
   (:mod:`docaudit.methods.segment_level`).
3. The null: windows of known non-member books (the calibration books), each of the segment's length in scored
   tokens and as near the same relative place in its book as its chapters allow (a chapter at the start of a
   book is compared with the starts of the calibration books). The calibration books are cut by the same rules
   as the judged one, and a window lies inside one of their chapter bodies: never across a chapter boundary, and
   never over a heading, the front matter or a table of contents (:func:`calibration_windows`); where the segments
   are chapters, a window starts where a chapter body starts, so it holds a chapter's opening as the segment does
   (an opening can read otherwise than the rest: a window inside a chapter would miss it). One window per
   calibration book, so the calibration scores are independent of one another whatever the dependence between
   the parts of one book.
4. The p-value of a segment: ``(1 + #calibration windows scoring at least as high) / (B + 1)`` with ``B`` the
   calibration books with a chapter body at least as long as the segment. It is valid (``P(p <= a) <= a``) when the
   judged book and the calibration books are exchangeable draws from one distribution of never-trained books and
   the opening stretch of a never-trained chapter scores like a never-trained chapter of its length (an
   assumption: the judged segment is a whole chapter, a window a chapter's opening without its ending).
   Benjamini–Hochberg over the segments of the book.
   No theorem gives its guarantee here (each segment has its own calibration windows, and a book's segments share
   its level); its false discovery rate was measured with that dependence (``scripts/nulls/null_map.py``,
   docs/methods.md): below 2.5% where 5% was allowed.
5. Verdicts per segment in the one vocabulary (``inference/verdicts.py``); "inconclusive" with the reason for a
   segment too short to judge, one that holds several headings (a table of contents), the front matter, or one for
   which too few calibration books are long enough for a p-value below ``alpha``.

A trained book's never-trained chapters are not never-seen text: the model learned the book's names and style from
its other chapters, so they can score like trained text. The map says which parts score like text the model was
trained on, and docs/localize.md measures how often that happens to never-trained chapters of trained books.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from docaudit.audit.specs import MapSpec
from docaudit.config import DetectorConfig, LocalizeConfig
from docaudit.corpus.base import Document
from docaudit.corpus.segments import Segment, headings, split_segments
from docaudit.inference.conformal import conformal_p
from docaudit.inference.verdicts import INCONCLUSIVE, bh_adjust, decide
from docaudit.methods.segment_level import scored_bounds, segment_score
from docaudit.provenance import Rows, document_records, model_record
from docaudit.query.stats import TokenStats
from docaudit.query.tokens import token_ids

BAND = (5, 95)  # percentiles of the calibration scores drawn around each segment
TEXT_GATE = 0.05  # a book whose text alone is this atypical of the calibration books is not mapped (see text_gate)


@dataclass
class BookPass:
    """One book queried once: its document, statistics, segments (how they were found) and their bounds in scored
    positions, and the bounds of their bodies (a chapter's heading line left out)."""

    doc: Document
    stats: TokenStats
    segments: list[Segment]
    how: str
    bounds: np.ndarray
    body_start: list[int] = field(default_factory=list)

    def body(self, i: int) -> tuple[int, int]:
        return self.body_start[i], int(self.bounds[i + 1])

    @cached_property
    def usable_bodies(self) -> list[tuple[int, int]]:
        """The scored ranges a calibration window may be drawn from: the bodies of the chapters a judged book's
        segment could be compared with (without their heading lines; the front matter and any segment holding a
        table of contents left out), or the whole book when it has no chapters (its runs of words are not parts
        of the book, only of the map)."""
        if self.how != "chapters":
            return [(int(self.bounds[0]), int(self.bounds[-1]))]
        return [self.body(i) for i in range(len(self.segments)) if _cut_out(self, i) is None]


def book_pass(doc: Document, stats: TokenStats, tokenizer, config: LocalizeConfig) -> BookPass:
    """The book's segments located in its scored positions: each segment's text (and its heading line) tokenized
    on its own gives its share of the book's tokens (:func:`segment_level.scored_bounds`)."""
    segments, how = split_segments(doc.text, config.segment_words, config.min_segment_words)

    def n_tokens(text: str) -> int:
        return len(token_ids(tokenizer, text)) if text else 0

    counts = [n_tokens(doc.text[s.start : s.end]) for s in segments]
    bounds = scored_bounds(stats.n_scored, counts)
    body_start = []
    for i, s in enumerate(segments):
        heading = doc.text[s.start : s.end].split("\n", 1)[0] if how == "chapters" and s.name != "front matter" else ""
        skip = n_tokens(heading) * (bounds[i + 1] - bounds[i]) / counts[i] if counts[i] else 0
        body_start.append(int(min(bounds[i + 1], bounds[i] + math.ceil(skip))))
    return BookPass(doc, stats, segments, how, bounds, body_start)


def window_score(book: BookPass, lo: int, hi: int, method: str, tokenizer, detector: DetectorConfig) -> float:
    """The detector's score of scored positions ``lo:hi`` of a book (the text, for Zlib, decoded from the tokens
    predicted there, the same way for the judged segment and the calibration windows)."""
    s = book.stats
    text = tokenizer.decode(s.token_ids[lo + 1 : hi + 1].tolist()) if method == "zlib" else None
    return segment_score(method, s.logp[lo:hi], s.mu[lo:hi], s.sigma[lo:hi], text, detector)


def calibration_windows(
    length: int, place: float, calibration: list[BookPass], opening: bool = False
) -> list[tuple[BookPass, int]]:
    """For a segment of ``length`` scored tokens at relative place ``place`` (0 = the start of its book, 1 = the
    end), at most one window per calibration book: the book and the window's first scored position. The window
    lies inside one of the book's ``usable_bodies`` (no heading, front matter or contents in it, never across two
    chapters, as the judged segment): of the bodies at least ``length`` long, the one nearest the place ``place``
    of the book, the window as near that place as the body allows; with ``opening`` (the segment is a whole
    chapter, so it holds its chapter's opening) the window starts where its body starts, the body the one whose
    start is nearest that place, so that the window holds a chapter's opening as the segment does. A book with no
    body that long gives none. The choice reads positions only, never scores."""
    out = []
    for book in calibration:
        n = book.stats.n_scored
        bodies = [(lo, hi) for lo, hi in book.usable_bodies if hi - lo >= length]
        if not bodies:
            continue
        start = place * (n - length)
        if opening:
            out.append((book, min(bodies, key=lambda b: abs(b[0] - start))[0]))
            continue
        lo, hi = min(bodies, key=lambda b: abs(min(max(start, b[0]), b[1] - length) - start))
        out.append((book, int(round(min(max(start, lo), hi - length)))))
    return out


def book_map(book: BookPass, calibration: list[BookPass], tokenizer, spec: MapSpec = MapSpec()) -> list[dict]:
    """One row per segment of ``book``: its name and place, its score, the calibration band, the p-value, the
    Benjamini–Hochberg q-value over the book's segments and the verdict (see the module's docstring).
    ``calibration`` must not hold the judged book itself (it is left out by SHA-256 when it does)."""
    config, method = spec.config, spec.config.method
    calibration = [c for c in calibration if c.doc.sha256 != book.doc.sha256]
    n = book.stats.n_scored
    rows, p_values, reasons = [], [], []
    gate = text_gate(book.doc, [c.doc for c in calibration])
    atypical = (
        f"the text alone sets this book apart from the calibration books (p = {gate:.3g} < {TEXT_GATE:g} for its "
        "compressibility, line breaks, word length and characters, no model): they are not comparable"
        if gate < TEXT_GATE
        else None
    )
    for i, seg in enumerate(book.segments):
        lo, hi = book.body(i)
        length = hi - lo
        row = {
            "segment": i + 1,
            "name": seg.name,
            "start_char": seg.start,
            "end_char": seg.end,
            "words": seg.words(book.doc.text),
            "n_scored": length,
        }
        why = _reason(book, i, length, config) or atypical
        score = window_score(book, lo, hi, method, tokenizer, spec.detector) if length > 0 else None
        p, band = None, (None, None)
        if why is None:
            place = lo / (n - length) if n > length else 0.0
            windows = calibration_windows(length, place, calibration, opening=book.how == "chapters")
            null = np.array([window_score(c, s, s + length, method, tokenizer, spec.detector) for c, s in windows])
            row["calibration_books"] = len(null)
            if 1 / (len(null) + 1) >= spec.alpha:
                need = math.ceil(1 / spec.alpha)
                why = (
                    f"too few calibration books at least as long as this segment ({len(null)}): a p-value below "
                    f"{spec.alpha:g} needs {need}"
                )
            else:
                p = conformal_p(score, null)
                band = tuple(float(v) for v in np.percentile(null, BAND))
        row.setdefault("calibration_books", None)
        row.update(score=score, band_low=band[0], band_high=band[1], p_value=p, text_gate_p=gate)
        rows.append(row)
        p_values.append(p)
        reasons.append(why)
    q_values = bh_adjust(p_values)
    for row, p, q, why in zip(rows, p_values, q_values, reasons):
        verdict = decide(p, q, spec.alpha, inconclusive_reason=why)
        row.update(q_value=q, verdict=verdict.verdict, reason=verdict.reason)
    return rows


def text_features(text: str) -> np.ndarray:
    """What the text alone shows, no model: compressibility (zlib bytes per byte), line breaks per character, mean
    word length, and the shares of capitals, digits and punctuation among the characters (each kind of character
    counted once over its occurrences)."""
    import zlib
    from collections import Counter

    data = text.encode("utf-8")
    n = max(len(text), 1)
    words = text.split()
    counts = Counter(text)

    def share(kind) -> float:
        return sum(k for c, k in counts.items() if kind(c)) / n

    return np.array(
        [
            len(zlib.compress(data)) / max(len(data), 1),
            counts["\n"] / n,
            np.mean([len(w) for w in words]) if words else 0.0,
            share(str.isupper),
            share(str.isdigit),
            share(lambda c: not c.isalnum() and not c.isspace()),
        ]
    )


_FEATURES: dict[tuple[str, int], np.ndarray] = {}  # text_features by the book's SHA-256 and its text's hash


def document_features(doc: Document) -> np.ndarray:
    """:func:`text_features` of a document, computed once per text (a calibration book is compared with every
    judged book)."""
    key = (doc.sha256, hash(doc.text))
    found = _FEATURES.get(key)
    if found is None:
        if len(_FEATURES) >= 100_000:
            _FEATURES.clear()
        found = _FEATURES[key] = text_features(doc.text)
    return found


def text_gate(book: Document, calibration: list[Document]) -> float:
    """A p-value for "the book's text is as typical of the calibration books as they are of one another": each of
    the ``B + 1`` books' distance from the mean of all of them (features standardized over all of them, so the
    rule is symmetric in the books), and the book's rank among those distances, ``(1 + #at least as far) /
    (B + 1)``. Valid when the book and the calibration books are exchangeable; no model is involved."""
    if not calibration:
        return 1.0
    features = np.array([document_features(d) for d in [book, *calibration]])
    spread = features.std(axis=0)
    z = (features - features.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    distance = np.sqrt((z**2).sum(axis=1))
    return conformal_p(distance[0], distance[1:])


def _cut_out(book: BookPass, i: int) -> str | None:
    """Why segment ``i`` is not running text that a window may be compared with (the front matter, a table of
    contents), or None."""
    seg = book.segments[i]
    if seg.name == "front matter":
        return "front matter (title pages, contents, prefaces): not comparable with running text"
    inside = len(headings(book.doc.text[seg.start : seg.end]))
    if book.how == "chapters" and inside >= 3:
        return f"holds {inside} headings (a table of contents or a run of short parts)"
    return None


def _reason(book: BookPass, i: int, length: int, config: LocalizeConfig) -> str | None:
    """Why segment ``i`` cannot be compared fairly with the calibration windows, or None."""
    cut = _cut_out(book, i)
    if cut is not None:
        return cut
    if length < config.min_segment_tokens:
        return f"too short: {length} scored tokens (at least {config.min_segment_tokens}: --min-segment-tokens)"
    return None


def book_summary(book: BookPass, rows: list[dict]) -> dict:
    """A book's line: how it was cut, how many segments, and how many got each verdict."""
    counts = {v: sum(r["verdict"] == v for r in rows) for v in {r["verdict"] for r in rows}}
    return {
        "file": book.doc.path,
        "id": book.doc.id,
        "title": book.doc.title,
        "segmented_by": book.how,
        "segments": len(rows),
        "n_scored": book.stats.n_scored,
        "verdicts": counts,
        "inconclusive": counts.get(INCONCLUSIVE, 0),
    }


@dataclass
class MapResult:
    """A map run: one row per segment of every judged book, one summary per book, and the calibration used."""

    rows: list[dict]
    books: list[dict]
    info: dict


def leading_part(doc: Document, tokenizer, max_tokens: int | None) -> Document:
    """``doc`` cut to the text of its first ``max_tokens`` tokens (whole when it is shorter, or without a bound), so
    that a map's work per book is bounded: the cut falls where the decoded first tokens end in the text (in
    proportion to the tokens where a tokenizer does not decode back to the text); its hash is the cut text's."""
    from dataclasses import replace

    from docaudit.io import sha256_text

    if max_tokens is None:
        return doc
    ids = token_ids(tokenizer, doc.text)
    if len(ids) <= max_tokens:
        return doc
    head = tokenizer.decode(ids[:max_tokens], skip_special_tokens=True, clean_up_tokenization_spaces=False)
    cut = len(head) if doc.text.startswith(head) else len(doc.text) * max_tokens // len(ids)
    text = doc.text[:cut]
    return replace(doc, text=text, sha256=sha256_text(text))


def map_documents(
    books: list[Document], calibration: list[Document], lm, spec: MapSpec = MapSpec(), progress: bool = True
) -> MapResult:
    """Query every book and calibration book once (whole, or its first ``spec.query.max_tokens`` tokens:
    :func:`leading_part`; through the cached querier of the loaded model ``lm``), then map each judged book against
    the calibration books."""
    from dataclasses import replace

    from docaudit.query.models import served_query
    from docaudit.query.querier import open_querier, query_documents

    bound = spec.query.max_tokens
    books = [leading_part(d, lm.tokenizer, bound) for d in books]
    calibration = [leading_part(d, lm.tokenizer, bound) for d in calibration]
    querier = open_querier(lm, served_query(replace(spec.query, max_tokens=None), lm))  # no GP sums from a server
    stats = query_documents(querier, [*books, *calibration], progress=progress)
    passes = [book_pass(d, s, lm.tokenizer, spec.config) for d, s in zip([*books, *calibration], stats)]
    judged, null = passes[: len(books)], passes[len(books) :]
    rows, summaries = Rows(), []
    for book in judged:
        book_rows = book_map(book, null, lm.tokenizer, spec)
        rows += [{"file": book.doc.path, "id": book.doc.id, **r} for r in book_rows]
        summaries.append(book_summary(book, book_rows))
    info = {
        "method": spec.config.method,
        "segment_words": spec.config.segment_words,
        "min_segment_tokens": spec.config.min_segment_tokens,
        "alpha": spec.alpha,
        "calibration_books": len(calibration),
        "context": querier.query.context,
        "stride": querier.stride,
    }
    tokens = {str(p.doc.path): (p.stats.n_tokens, p.stats.n_tokens) for p in passes}
    roles = ["judged"] * len(judged) + ["non-member"] * len(null)
    rows.inputs = document_records([p.doc for p in passes], roles, tokens)
    rows.model = model_record(lm)
    return MapResult(rows, summaries, info)
