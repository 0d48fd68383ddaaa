"""A book cut into the parts a reader names: its chapters where its headings show them, else equal runs of words.

A heading is a line of its own that starts with CHAPTER, BOOK, PART, VOLUME, LETTER, ACT or SCENE (any case) and a
number, a roman numeral or a number word ("CHAPTER XII.", "Chapter 3: The Storm", "PART ONE"), or a line holding
only a roman numeral ("XIV."). A book needs ``min_headings`` of them to be cut by chapter. The text before the
first heading is a segment of its own ("front matter"); a segment of fewer than ``min_words`` words (a table of
contents lists every heading with nothing between them) is joined to the segment after it, the last one to the one
before. Each segment is named by its heading and located by its character range in the (cleaned) text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from docaudit.errors import DocauditError

# Every repeat is bounded, so that a match tried at a line's start ends within a few hundred characters whatever
# the line holds (a 10 MB line of roman numerals after "CHAPTER" took minutes with unbounded ones)
_NUMBER = (
    r"(?:\d{1,9}|[IVXLCDM]{1,20}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|the[ \t]{1,9}\w{1,40})"
)
_HEADING = re.compile(
    rf"^[ \t]{{0,200}}(?:(?:chapter|book|part|volume|letter|act|scene)[ \t]{{1,9}}{_NUMBER}\b[^\n]{{0,80}}"
    rf"|[IVXLCDM]{{1,20}}\.?)[ \t]{{0,200}}$",
    re.IGNORECASE | re.MULTILINE,
)
MAX_HEADINGS = 100_000  # heading lines of one book: more are no book's chapters
MAX_SEGMENTS = 10_000  # segments of one book (each is scored against the calibration books)
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Segment:
    """A part of a book: its name (the heading, or "words A–B"), and its characters ``text[start:end]``."""

    name: str
    start: int
    end: int

    def words(self, text: str) -> int:
        return len(_WORD.findall(text, self.start, self.end))


def headings(text: str) -> list[tuple[int, str]]:
    """The character offset and the line of every chapter heading in ``text`` (roman numerals in upper case only:
    "I." alone on a line is a heading, "i." is not)."""
    found = []
    for m in _HEADING.finditer(text):
        line = m.group(0).strip()
        if re.fullmatch(r"[ivxlcdm]+\.?", line) and not line.isupper():
            continue
        found.append((m.start(), line))
        if len(found) > MAX_HEADINGS:
            raise DocauditError(
                f"the book has more than {MAX_HEADINGS:,} lines that read as chapter headings: no book's chapters "
                "(cut it by words: map takes --segment-words for a book without headings)"
            )
    return found


def chapter_segments(text: str, min_words: int, min_headings: int = 2) -> list[Segment] | None:
    """The book's chapters (see the module's docstring), or None when it has fewer than ``min_headings``."""
    found = headings(text)
    if len(found) < min_headings:
        return None
    cuts = [(0, "front matter")] if found[0][0] > 0 else []
    cuts += found
    parts = [Segment(name, start, end) for (start, name), (end, _) in zip(cuts, [*cuts[1:], (len(text), "")])]
    return _joined(parts, text, min_words)


def word_segments(text: str, words: int) -> list[Segment]:
    """Consecutive runs of ``words`` words (the last one takes the remainder when it is shorter than half)."""
    spans = [m.span() for m in _WORD.finditer(text)]
    if not spans:
        return [Segment("words 1-0", 0, len(text))]
    starts = list(range(0, len(spans), words))
    if len(starts) > 1 and len(spans) - starts[-1] < words / 2:
        starts.pop()
    out = []
    for i, first in enumerate(starts):
        last = (starts[i + 1] if i + 1 < len(starts) else len(spans)) - 1
        start = 0 if i == 0 else spans[first][0]
        end = len(text) if i + 1 == len(starts) else spans[last + 1][0]
        out.append(Segment(f"words {first + 1}-{last + 1}", start, end))
    return out


def split_segments(text: str, segment_words: int, min_words: int) -> tuple[list[Segment], str]:
    """The book's segments and how they were found: ``"chapters"`` from its headings, else ``"words"``: runs of
    ``segment_words`` words."""
    chapters = chapter_segments(text, min_words)
    if chapters is not None and len(chapters) >= 2:
        segments, how, option = chapters, "chapters", "--min-segment-words"
    else:
        segments, how, option = word_segments(text, segment_words), "words", "--segment-words"
    if len(segments) > MAX_SEGMENTS:
        raise DocauditError(
            f"the book cuts into {len(segments):,} segments by its {how}, more than the {MAX_SEGMENTS:,} a map may "
            f"hold: raise {option}"
        )
    return segments, how


def _joined(parts: list[Segment], text: str, min_words: int) -> list[Segment]:
    """``parts`` with each one under ``min_words`` words joined to the next (the last to the one before); a joined
    segment keeps the name of its last heading, the one its text follows."""
    out: list[Segment] = []
    pending: Segment | None = None
    held = 0  # the words of ``pending`` (each part's words counted once: a joined part is never counted again)
    for part in parts:
        words = part.words(text)
        if pending is not None:
            part, words = Segment(part.name, pending.start, part.end), words + held
            pending = None
        if words < min_words:
            pending, held = part, words
        else:
            out.append(part)
    if pending is not None:
        if out:
            last = out.pop()
            out.append(Segment(last.name, last.start, pending.end))
        else:
            out.append(pending)
    return out


def stretch_starts(n_units: int, length: int, width: int, count: int, rng) -> list[int]:
    """Starts of up to ``count`` non-overlapping runs of ``length`` units, one at random (from the NumPy generator
    ``rng``) in each of as many consecutive stretches of ``width`` units, the first stretch at a random offset in
    the text after its first ``length`` units (fewer runs when the rest holds fewer whole stretches). Every text
    gets the same layout, the same spacing whatever its length: ``k`` consecutive runs of one text lie as ``k``
    runs of any other text do, which is what makes a book's passages comparable with a library text's
    (docs/methods.md, "Matched geometry"). No run holds a text's first ``length`` units: a text's start (a word cut
    from its sentence, read without what came before) is a place of its own, and a text that barely holds the
    layout would otherwise always have a run there while a longer text rarely does."""
    if width < length:
        raise ValueError("a stretch must hold a run")
    n = min(count, max(0, n_units - length) // width)
    if n == 0:
        return []
    offset = length + int(rng.integers(0, n_units - length - n * width + 1))
    return [offset + k * width + int(rng.integers(0, width - length + 1)) for k in range(n)]
