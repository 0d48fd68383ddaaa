"""Book titles and authors from Project Gutenberg headers, and how reports name a book."""

import math

from conftest import CORPUS

from docaudit.corpus.documents import load_document
from docaudit.corpus.metadata import display_name, header_metadata

HEADER = (
    "The Project Gutenberg EBook of Hell, by Dante Alighieri\r\n\r\n"
    "Title: Hell\r\n       The Inferno from The Divine Comedy\r\n\r\n"
    "Author: Dante Alighieri\r\n\r\nRelease Date: August 7, 2004 [EBook #1005]\r\n\r\n"
    "*** START OF THIS PROJECT GUTENBERG EBOOK HELL ***\r\n\r\n"
    "Title: not a header field\r\nIn the midway of this our mortal life\r\n"
    "*** END OF THIS PROJECT GUTENBERG EBOOK HELL ***\r\n"
)


def test_header_fields_with_continuation_lines():
    assert header_metadata(HEADER) == {
        "title": "Hell: The Inferno from The Divine Comedy",
        "author": "Dante Alighieri",
    }


def test_text_after_the_start_marker_is_not_a_header():
    body_only = HEADER.split("*** START", 1)[1]
    assert header_metadata("*** START" + body_only) == {"title": None, "author": None}


def test_loaded_documents_carry_the_header_fields(tmp_path):
    path = tmp_path / "1005.txt"
    path.write_bytes(HEADER.encode())
    doc = load_document(path)
    assert (doc.title, doc.author) == ("Hell: The Inferno from The Divine Comedy", "Dante Alighieri")
    assert doc.text.startswith("Title: not a header field")  # the header itself is cleaned away


def test_display_name():
    assert display_name("1005", "Hell", "Dante Alighieri") == "Hell, by Dante Alighieri (1005)"
    assert display_name("1005", "Hell", None) == "Hell (1005)"
    assert display_name("74346", None, "Someone") == "74346"
    assert display_name("74346", math.nan, math.nan) == "74346"


def test_a_book_without_a_header_is_named_from_the_shipped_manifests(tmp_path):
    """A post-2024 book has no Project Gutenberg header; the shipped manifest names it by its bytes' SHA-256, and a
    different file under the same name gets no name from it."""
    book = load_document(CORPUS / "nonmembers" / "74346.txt")
    assert book.title.startswith("Flint's Letters from America") and book.author == "James Flint"
    other = tmp_path / "74346.txt"
    other.write_bytes((CORPUS / "nonmembers" / "74346.txt").read_bytes() + b"\nA line of my own.\n")
    assert load_document(other).title is None
