"""Transcriber's notes in Project Gutenberg texts (step 5 of :mod:`docaudit.corpus.documents`' cleaning):
bracketed ``[Transcriber's Note: ...]`` / ``{...}`` anywhere; note blocks headed "Transcriber's Note(s)" near the
beginning (up to the next section break); notes in the last few percent of the text (from the heading to the end:
lists of corrections); elsewhere, the paragraph holding the heading. Also the line tests the rest of the cleaning
shares (blank lines, separator lines)."""

from __future__ import annotations

import bisect
import re

_TN_WORD = r"transcriber(?:['\u2019]s|s['\u2019]|s)?\s*(?:['\u2019]s\s*)?(?:end-?)?notes?\b"


_TN_HEAD_RE = re.compile(
    r"^(?:" + _TN_WORD + r"|(?:list\s+of\s+)?typographical\s+errors?\s+corrected\s+"
    r"(?:by\s+the\s+(?:e-?text\s+)?transcriber|in\s+this\s+e-?text)"
    r"|notes?\s+(?:by|from)\s+the\s+transcriber"
    r"|(?:a\s+)?note\s+on\s+the\s+(?:text|transcription)\W*$"
    r"|e-?text\s+editor[\u2019']?s\s+bookmarks"
    r")",
    re.I,
)


_TN_QUICK_RE = re.compile(r"transcriber|typographical|note\s+on\s+the|editor[\u2019']?s\s+bookmarks", re.I)


_TN_BRACKET_RE = re.compile(r"[\[{]\s*" + _TN_WORD, re.I)


_DECOR_RE = re.compile(r"^[\s|\[\]{}●○•*=#~+\-]*")


SEPARATOR_RE = re.compile(r"^\s*[-=#*_+~|.·•●]{3,}[-=#*_+~|.·•●\s]*$|^\s*(?:\*\s+){2,}\*\s*$")


_BOX_BORDER_RE = re.compile(r"^\s*\+[-=+]+\+\s*$")


_BOX_LINE_RE = re.compile(r"^\s*\|")


_NOTE_VOCAB_RE = re.compile(
    r"\b(?:denoted|underscores?|italics?|bold|small\s+cap|typographical|typos?|corrected|changed|changes|retained|"
    r"hyphenat\w*|spelling|e-?books?|e-?texts?|transcri\w*|public\s+domain|cover\s+art|HTML|plain\s+text|"
    r"original\s+(?:book|edition|text|publication)|silently|standardi[sz]ed|inconsisten\w*|printer[\u2019']?s\s+errors?)\b",
    re.I,
)


_BACK_MATTER_RE = re.compile(r"^\s*(?:FOOTNOTES?|ENDNOTES|NOTES|INDEX|APPENDIX|GLOSSARY)\b[\s.:]*$")


_TRAIL_FRACTION = 0.05  # a note heading in the last 5% of the text ...


_TRAIL_MAX_CHARS = 30_000  # ... with at most this much text after it: the rest of the text is the note


_LEAD_LINES = 250  # note headings within the first lines: a block up to the next section break


_LEAD_FRACTION = 0.03


_BLOCK_MAX_LINES = 80


_BLOCK_MAX_CHARS = 8_000


def _remove_bracketed_notes(text: str) -> str:
    """``[Transcriber's Note: ...]`` and ``{Transcriber's note: ...}`` anywhere, up to the matching bracket (or the
    end of the paragraph when the bracket does not close within a few thousand characters)."""
    out, pos = [], 0
    for m in _TN_BRACKET_RE.finditer(text):
        if m.start() < pos:
            continue
        open_ch = text[m.start()]
        close_ch = "]" if open_ch == "[" else "}"
        depth, end = 0, None
        for k in range(m.start(), min(len(text), m.start() + 5000)):
            c = text[k]
            if c == open_ch:
                depth += 1
            elif c == close_ch:
                depth -= 1
                if depth == 0:
                    end = k + 1
                    break
            elif c == "\n" and text.startswith("\n\n\n", k):  # a section break: the bracket never closed
                break
        if end is None:
            para = text.find("\n\n", m.end())
            end = len(text) if para < 0 else para
        out.append(text[pos : m.start()])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def is_blank(line: str) -> bool:
    return not line.strip()


def _note_block_end(lines: list[str], i: int) -> int:
    """Exclusive end of a note block starting at heading line ``i``: the next run of two or more blank lines or a
    separator line; a boxed note (``| ... |`` lines) ends with its box."""
    n = len(lines)
    if _BOX_LINE_RE.match(lines[i]):
        j = i + 1
        while j < n and (_BOX_LINE_RE.match(lines[j]) or _BOX_BORDER_RE.match(lines[j])):
            j += 1
        return j
    j = i + 1
    while j < n and is_blank(lines[j]):  # blank lines right after the heading belong to the note
        j += 1
    blanks = 0
    while j < n:
        if is_blank(lines[j]):
            blanks += 1
            if blanks >= 2:
                return j - blanks + 1
        else:
            if SEPARATOR_RE.match(lines[j]) or _BOX_BORDER_RE.match(lines[j]):
                return j - blanks
            blanks = 0
        j += 1
    return n


def _note_paragraphs_end(lines: list[str], i: int) -> int:
    """Exclusive end of a note at heading ``i`` that has no short section of its own: the heading's paragraph and
    the following paragraphs (single blank lines apart) as long as they read like a note about the edition."""
    a, b = _paragraph_bounds(lines, i)
    end = b
    while True:
        j = end
        while j < len(lines) and is_blank(lines[j]):
            j += 1
        if j >= len(lines) or j - end >= 2:
            return end
        _, nb = _paragraph_bounds(lines, j)
        if not _NOTE_VOCAB_RE.search(" ".join(lines[j:nb])):
            return end
        end = nb


def _trailing_note_end(lines: list[str], i: int) -> int:
    """A note near the end runs to the end of the text, unless a section of the book proper (footnotes, index,
    appendix) follows it after a section break."""
    blanks = 0
    for j in range(i + 1, len(lines)):
        if is_blank(lines[j]):
            blanks += 1
            continue
        if blanks >= 2 and _BACK_MATTER_RE.match(lines[j]):
            return j - blanks
        blanks = 0
    return len(lines)


def _paragraph_bounds(lines: list[str], i: int) -> tuple[int, int]:
    a = i
    while a > 0 and not is_blank(lines[a - 1]):
        a -= 1
    b = i
    while b < len(lines) and not is_blank(lines[b]):
        b += 1
    return a, b


def _drop_adjacent_separators(lines: list[str], keep: list[bool], a: int, b: int) -> None:
    """Also drop a separator or box border directly before ``a`` / after ``b`` (blank lines in between allowed)."""
    for step, k in ((-1, a - 1), (1, b)):
        seen = 0
        while 0 <= k < len(lines) and is_blank(lines[k]) and seen < 3:
            k += step
            seen += 1
        if 0 <= k < len(lines) and (SEPARATOR_RE.match(lines[k]) or _BOX_BORDER_RE.match(lines[k])):
            keep[k] = False


def remove_transcriber_notes(text: str) -> str:
    """Remove transcriber's notes (see the module docstring for the rules)."""
    text = _remove_bracketed_notes(text)
    lines = text.split("\n")
    n_chars = len(text)
    keep = [True] * len(lines)
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    candidates = sorted({bisect.bisect_right(offsets, m.start()) - 1 for m in _TN_QUICK_RE.finditer(text)})
    done = 0  # lines before this index are already handled
    for i in candidates:
        if i < done or not keep[i] or not _TN_HEAD_RE.match(_DECOR_RE.sub("", lines[i])):
            continue
        remaining = n_chars - offsets[i]
        if offsets[i] >= (1 - _TRAIL_FRACTION) * n_chars and remaining <= _TRAIL_MAX_CHARS:
            a, b = i, _trailing_note_end(lines, i)
        elif i < _LEAD_LINES or offsets[i] <= _LEAD_FRACTION * n_chars:
            a, b = i, _note_block_end(lines, i)
            if b - a > _BLOCK_MAX_LINES or sum(len(x) for x in lines[a:b]) > _BLOCK_MAX_CHARS:
                a, b = i, _note_paragraphs_end(lines, i)
            if _BOX_LINE_RE.match(lines[i]):  # the box's top border
                k = i - 1
                while k >= 0 and _BOX_LINE_RE.match(lines[k]):
                    k -= 1
                a = k + 1 if k < 0 or not _BOX_BORDER_RE.match(lines[k]) else k
        else:
            a, b = _paragraph_bounds(lines, i)
        for k in range(a, b):
            keep[k] = False
        _drop_adjacent_separators(lines, keep, a, b)
        done = b
    return "\n".join(line for line, k in zip(lines, keep) if k)
