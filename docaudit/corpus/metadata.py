"""A book's title and author, for naming it in reports: from its Project Gutenberg header, else from the shipped
manifests (``data_manifests/``), which name the books that come without a header (the post-2024 books).

Only the header before the ``*** START OF ...`` marker is read (a book whose own text says "Title:" is not
mistaken for a header), and only in its first lines: PG headers are short. A manifest names a file only by its
SHA-256 (the ``sha256`` column), never by its name: a user's ``45.txt`` is not Project Gutenberg's book 45."""

from __future__ import annotations

import functools
import re

from docaudit.config import MANIFESTS_DIR
from docaudit.errors import DocauditError

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


@functools.lru_cache(maxsize=1)
def _manifest_names() -> dict[str, tuple[str, str]]:
    """``{sha256: (title, author)}`` over every shipped manifest that records files' SHA-256."""
    from docaudit.corpus.manifest import read_manifest

    found: dict[str, tuple[str, str]] = {}
    for path in sorted(MANIFESTS_DIR.glob("*.csv")):
        try:
            rows = read_manifest(path)
        except (OSError, DocauditError):  # a damaged shipped manifest only costs the names it held
            continue
        found |= {r.sha256: (r.title, r.author) for r in rows if r.sha256 and r.title}
    return found


def manifest_metadata(file_sha256: str) -> dict[str, str | None]:
    """``{"title": ..., "author": ...}`` of the file whose bytes have this SHA-256 in a shipped manifest, ``None``
    for each not known."""
    title, author = _manifest_names().get(file_sha256, (None, None))
    return {"title": title or None, "author": author or None}
