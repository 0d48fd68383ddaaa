"""Project Gutenberg cleaning: headers, licences, producer and transcriber notes; optional character
normalization (docs/methods.md, "Cleaning")."""

from __future__ import annotations

import html
import re
import unicodedata

from docaudit.corpus.notes import SEPARATOR_RE, is_blank, remove_transcriber_notes

_CHAR_MAP = {
    # quotes and apostrophes
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201b": "'",
    "\u2032": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\u201f": '"',
    "\u2033": '"',
    # dashes: em dash and horizontal bar -> "--"; en dash, figure dash, hyphens, minus -> "-"
    "\u2014": "--",
    "\u2015": "--",
    "\u2013": "-",
    "\u2012": "-",
    "\u2010": "-",
    "\u2011": "-",
    "\u2212": "-",
    "\u2026": "...",
    # spaces of fixed width -> space
    "\u00a0": " ",
    "\u2007": " ",
    "\u2009": " ",
    "\u200a": " ",
    "\u202f": " ",
    "\u2002": " ",
    "\u2003": " ",
    "\u2004": " ",
    "\u2005": " ",
    "\u2006": " ",
    "\u2008": " ",
    "\u205f": " ",
    "\u3000": " ",
    # invisible characters
    "\u00ad": "",
    "\u200b": "",
    "\u200c": "",
    "\u200d": "",
    "\u2060": "",
    "\ufeff": "",
}


_CHAR_RE = re.compile("[" + "".join(_CHAR_MAP) + "]")


def normalize_newlines(text: str) -> str:
    """CRLF and CR line endings to LF: the one change made to every text, so a file's line endings never change its
    tokens."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def normalize_characters(text: str) -> str:
    """Line endings to LF, NFC, and the character conventions listed in the module docstring."""
    text = normalize_newlines(text)
    if text.isascii():
        return text
    return _CHAR_RE.sub(lambda m: _CHAR_MAP[m.group()], unicodedata.normalize("NFC", text))


# "*** START OF THIS PROJECT GUTENBERG EBOOK X ***", "***START OF THE PROJECT GUTENBERG EBOOK X***",
# "*** START OF THE PROJECT GUTENBERG EBOOK 74346 ***", "*** START: FULL LICENSE ***" is a footer start.
_START_RE = re.compile(r"^\s*\*{3}\s*START\s+OF\s+(?:THE|THIS)\s+PROJECT\s+GUTENBERG\b", re.I)


_END_RE = re.compile(r"^\s*\*{3}\s*END\s+OF\s+(?:THE|THIS)\s+PROJECT\s+GUTENBERG\b", re.I)


# very old files put the "Small Print" license first: the header ends with "*END*THE SMALL PRINT! ... *END*"
_SMALLPRINT_END_RE = re.compile(r"^\s*\*END\*?\s*THE\s+SMALL\s+PRINT", re.I)


# footer starts that may come without an END marker
_FOOTER_RE = re.compile(
    r"^\s*(?:"
    r"\*{3}\s*START\*\*\s*(?:THE\s+)?SMALL\s+PRINT"  # ***START**THE SMALL PRINT!**FOR PUBLIC DOMAIN EBOOKS**
    r"|\*{3}\s*START:?\s+FULL\s+LICENSE"
    r"|End\s+of\s+(?:the\s+|this\s+)?Project\s+Gutenberg"  # End of the Project Gutenberg EBook of ...
    r"|End\s+of\s+Project\s+Gutenberg[\u2019']s"
    r")",
    re.I,
)


# a marker wrapped over several lines ends with "***"
_MARKER_TAIL_RE = re.compile(r"\*{3}\s*$")


def _marker_end(lines: list[str], i: int, limit: int = 4) -> int:
    """Index of the last line of the marker starting at line ``i`` (markers with long titles wrap)."""
    if _MARKER_TAIL_RE.search(lines[i]):
        return i
    for j in range(i + 1, min(i + 1 + limit, len(lines))):
        if not lines[j].strip():
            break
        if _MARKER_TAIL_RE.search(lines[j]):
            return j
    return i


def gutenberg_bounds(lines: list[str]) -> tuple[int, int]:
    """Lines ``[start, end)`` between the Project Gutenberg header and footer (``(0, len(lines))`` without any)."""
    start = 0
    for i, line in enumerate(lines):
        if _START_RE.match(line):
            start = _marker_end(lines, i) + 1
            break
    else:
        # no START marker: an old header ending with the Small Print, in the first half of the file
        for i, line in enumerate(lines[: len(lines) // 2]):
            if _SMALLPRINT_END_RE.match(line):
                start = i + 1
                break
    end = len(lines)
    for i in range(start, len(lines)):
        if _END_RE.match(lines[i]) or _FOOTER_RE.match(lines[i]):
            end = i
            break
    return start, end


def strip_gutenberg(text: str) -> str:
    """Project Gutenberg header and footer removal only (the "first version" of the cleaning): keep the text
    between the START and END markers, cut the "End of the Project Gutenberg EBook ..." line and license blocks.
    Text without any marker is returned unchanged (line endings normalized to LF)."""
    text = normalize_newlines(text)
    lines = text.split("\n")
    start, end = gutenberg_bounds(lines)
    if start == 0 and end == len(lines):
        return text
    return "\n".join(lines[start:end]).strip("\n")


def body_lines(text: str) -> tuple[int, int]:
    """Lines ``[first, last + 1)`` of ``text`` (split as :func:`normalize_newlines` leaves it) from the first to the
    last line that :func:`clean_text` keeps: what lies outside is header, licence or front and back matter that
    docaudit's cleaning removes. Each line is looked for between the Project Gutenberg markers (a line changed by
    the cleaning, as by HTML removal, is not found: the markers bound the body then)."""
    lines = normalize_newlines(text).split("\n")
    start, end = gutenberg_bounds(lines)
    kept = [line for line in clean_text(text).split("\n") if line.strip()]
    if not kept:
        return start, start
    first = next((i for i in range(start, end) if lines[i] == kept[0]), start)
    last = next((i for i in range(end - 1, first - 1, -1) if lines[i] == kept[-1]), end - 1)
    return first, last + 1


_TAG_RE = re.compile(
    r"</?(?:p|br|div|span|h[1-6]|i|b|em|strong|pre|a|img|hr|table|tbody|thead|tr|td|th|blockquote|center|sup|sub"
    r"|small|big|u|ul|ol|li|dl|dt|dd|body|html|head|title|style|font|cite|tt|ins|del|abbr|acronym)\b[^<>]*?/?>",
    re.I,
)


_HTML_COMMENT_RE = re.compile(r"<!--.*?-->", re.S)


def strip_html(text: str) -> str:
    """Remove HTML tags and decode entities when the text is mostly markup (at least 50 tags and one per 2,000
    characters); a few ``<i>`` in a plain text are removed too, but entities are then left alone."""
    n_tags = len(_TAG_RE.findall(text))
    if n_tags == 0:
        return text
    text = _HTML_COMMENT_RE.sub("", _TAG_RE.sub("", text))
    if n_tags >= 50 and n_tags * 2000 >= len(text):
        text = html.unescape(text)
    return text


_CREDIT_RE = re.compile(
    r"^\s*(?:"
    r"(?:Produced|Prepared|Scanned|Proofread|Proofed|Digitized|Transcribed)\s+(?:by|from|for)\b"
    r"|E-?text\s+(?:was\s+)?(?:prepared|produced|transcribed|scanned)\b"
    r"|eBook\s+(?:was\s+)?(?:prepared|produced|transcribed)\s+by\b"
    r"|This\s+(?:Project\s+Gutenberg\s+)?e-?(?:text|book)\s+(?:was|is)\s+(?:prepared|produced|transcribed|created|made)\b"
    r"|This\s+(?:file|e-?text|e-?book)\s+was\s+(?:produced|prepared|created|made)\s+from\b"
    r"|HTML\s+version\s+by\b"
    r"|Note:\s+(?:Project\s+Gutenberg\s+also\s+has|Images\s+of\s+the\s+original)\b"
    r"|Credits?\s*$"
    r")",
    re.I,
)


_CREDIT_FIRST_CHAR_RE = re.compile(r"^\s*[A-Z(]")  # a credit paragraph starts capitalized


# names of Project Gutenberg and its sites only: a paragraph with any other web address is words of the text
_PG_MENTION_RE = re.compile(
    r"Project\s+Gutenberg|gutenberg\.(?:org|net)|pgdp\.net|Distributed\s+Proofread|archive\.org",
    re.I,
)


_LICENSE_PARA_RE = re.compile(
    r"legal\s+small\s+print|small\s+print!|project\s+gutenberg(?:-tm)?\s+licen[cs]e|gutenberg\s+literary\s+archive",
    re.I,
)


_CREDIT_EDGE = 12  # credits are looked for among the first and last paragraphs only


def _paragraph_spans(lines: list[str]) -> list[tuple[int, int]]:
    spans, i, n = [], 0, len(lines)
    while i < n:
        if is_blank(lines[i]):
            i += 1
            continue
        j = i
        while j < n and not is_blank(lines[j]):
            j += 1
        spans.append((i, j))
        i = j
    return spans


def remove_credits(text: str) -> str:
    """Drop producer/transcriber credit paragraphs and paragraphs naming Project Gutenberg or its proofreading
    sites among the first and last paragraphs of the text, and paragraphs quoting the PG license anywhere."""
    lines = text.split("\n")
    spans = _paragraph_spans(lines)
    if not spans:
        return text
    drop = set(range(min(_CREDIT_EDGE, len(spans)))) | set(range(max(0, len(spans) - _CREDIT_EDGE), len(spans)))
    drop = {
        idx
        for idx in drop
        if (_CREDIT_RE.match(lines[spans[idx][0]]) and _CREDIT_FIRST_CHAR_RE.match(lines[spans[idx][0]]))
        or _PG_MENTION_RE.search(" ".join(x.strip() for x in lines[spans[idx][0] : spans[idx][1]]))
    }
    if _LICENSE_PARA_RE.search(text):
        for idx, (a, b) in enumerate(spans):
            if idx not in drop and _LICENSE_PARA_RE.search(" ".join(x.strip() for x in lines[a:b])):
                drop.add(idx)
    keep = [True] * len(lines)
    for idx in drop:
        a, b = spans[idx]
        for k in range(a, b):
            keep[k] = False
    return "\n".join(line for line, k in zip(lines, keep) if k)


# an underscore opening emphasis follows a non-word character and precedes a non-space; a closing one mirrors it.
# Runs of two or more underscores (blanks to fill in, rules) and snake_case are left alone.
# (the patterns start with the literal character so that the regex engine can scan for it quickly)
_US_OPEN_RE = re.compile(r"_(?<![\w_]_)(?=[^\s_])")


_US_CLOSE_RE = re.compile(r"_(?<=[^\s_]_)(?![\w_])")


_BOLD_RE = re.compile(r"=(?<![\w=]=)([^\s=](?:[^=\n]{0,200}?[^\s=])?)=(?![\w=])")


_SPACED_RE = re.compile(r"~(?<![\w~]~)([^\s~](?:[^~\n]{0,200}?[^\s~])?)~(?![\w~])")


_TRAILING_WS_RE = re.compile(r"[ \t\f\v]+$", re.M)


_BLANK_RUN_RE = re.compile(r"\n{4,}")  # three or more blank lines


def strip_emphasis(text: str) -> str:
    """``_italic_`` -> ``italic``, ``=bold=`` -> ``bold``, ``~spaced~`` -> ``spaced``."""
    if "_" in text:
        text = _US_OPEN_RE.sub("", text)
        text = _US_CLOSE_RE.sub("", text)
    if "=" in text:
        text = _BOLD_RE.sub(r"\1", text)
    return _SPACED_RE.sub(r"\1", text) if "~" in text else text


def normalize_whitespace(text: str) -> str:
    """Trailing whitespace, runs of 3+ blank lines, then :func:`trim_ends`."""
    return trim_ends(_BLANK_RUN_RE.sub("\n\n", _TRAILING_WS_RE.sub("", text)))


def trim_ends(text: str) -> str:
    """Blank or separator-only lines at either end (left behind where a header, note or credit was cut)."""
    lines = text.strip("\n").split("\n")
    a, b = 0, len(lines)
    while a < b and (is_blank(lines[a]) or SEPARATOR_RE.match(lines[a])):
        a += 1
    while b > a and (is_blank(lines[b - 1]) or SEPARATOR_RE.match(lines[b - 1])):
        b -= 1
    return "\n".join(lines[a:b])


_BARE_MARKER_RE = re.compile(
    r"^[ \t]*\[(?:Illustration|Frontispiece|Decoration|Image|Picture|Logo)s?\][ \t]*(?:\n|\Z)", re.I | re.M
)


def remove_bare_markers(text: str) -> str:
    """Lines holding only a caption-less ``[Illustration]``-style marker (no words of the book)."""
    return _BARE_MARKER_RE.sub("", text) if "[" in text else text


def remove_boilerplate(text: str) -> str:
    """Steps 2-5 and 7 of the module docstring: what is not part of the work. The work's own characters are left
    as they are, and a text in which nothing is found comes back unchanged."""
    text = strip_gutenberg(text)
    text = strip_html(text)
    text = remove_credits(text)
    text = remove_transcriber_notes(text)
    return remove_bare_markers(text)


def clean_text(text: str, normalize_chars: bool = False) -> str:
    """The cleaning used by every command that reads documents (see the module docstring): boilerplate removal,
    and with ``normalize_chars`` the character, emphasis and whitespace normalization too."""
    text = normalize_newlines(text)
    if not normalize_chars:
        body = remove_boilerplate(text)
        return body if body == text else trim_ends(body)
    # characters first so that the boilerplate patterns see one convention, again after HTML entities are decoded
    body = normalize_characters(remove_boilerplate(normalize_characters(text)))
    return normalize_whitespace(strip_emphasis(body))
