"""A book's title and author from its Project Gutenberg header, for naming it in reports.

Only the header before the ``*** START OF ...`` marker is read (a book whose own text says "Title:" is not
mistaken for a header), and only in its first lines: PG headers are short."""

from __future__ import annotations

import re

HEADER_LINES = 80  # PG headers end well within this many lines
_FIELD_RE = re.compile(r"^(Title|Author):[ \t]*(.*)$", re.I)
_START_RE = re.compile(r"^\s*\*\*\*\s*START OF", re.I)
MAX_FIELD_CHARS = 200  # a header field longer than this is not a title: the text is cut


def header_metadata(raw: str) -> dict[str, str | None]:
    """``{"title": ..., "author": ...}`` from the ``Title:`` and ``Author:`` lines of a Project Gutenberg header
    (a title continued on indented lines is joined), ``None`` for each not found."""
    found: dict[str, str | None] = {"title": None, "author": None}
    lines = raw.replace("\r\n", "\n").replace("\r", "\n").split("\n")[:HEADER_LINES]
    i = 0
    while i < len(lines):
        if _START_RE.match(lines[i]):
            break
        m = _FIELD_RE.match(lines[i])
        i += 1
        if not m or found[m.group(1).lower()] is not None:
            continue
        parts = [m.group(2).strip()]
        while i < len(lines) and lines[i][:1] in (" ", "\t") and lines[i].strip():
            parts.append(lines[i].strip())
            i += 1
        value = ": ".join(p for p in parts if p)
        found[m.group(1).lower()] = value[:MAX_FIELD_CHARS] or None
    return found


def display_name(book_id: str, title: str | None, author: str | None) -> str:
    """How a report names a book: "Title, by Author (id)" with what is known, else its id (a missing value may
    arrive as ``None`` or, from a table, as NaN)."""
    title, author = (v if isinstance(v, str) and v else None for v in (title, author))
    if not title:
        return book_id
    return f"{title}, by {author} ({book_id})" if author else f"{title} ({book_id})"
