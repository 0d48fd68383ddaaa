"""Documents: cleaning real Project Gutenberg files of both corpus groups, normalization, bad input, filters."""

from __future__ import annotations

import hashlib
import pathlib
import re

import pytest
from conftest import CORPUS

from docaudit.corpus.cleaning import clean_text, normalize_characters, strip_gutenberg
from docaudit.corpus.documents import (
    Document,
    expand_paths,
    load_document,
    load_documents,
    read_text,
)
from docaudit.corpus.filters import filter_documents, is_english
from docaudit.errors import DocauditError

# members: every header style of the corpus
MEMBERS = {
    "8723": "old header and 'Small Print' license after the END marker, 'End of the Project Gutenberg EBook' line",
    "8897": "'***START OF THE ...***' without spaces, copyrighted introduction with its own Small Print",
    "45": "'*** START OF THIS ...', 'End of Project Gutenberg's ...' line",
    "10466": "START marker wrapped over two lines, 'E-text prepared by' credit",
    "24754": "credit, 'Note: Project Gutenberg also has an HTML version', boxed transcriber's note",
    "26663": "bracketed '[ Transcriber's Note: ... ]' at the start and the end",
    "2791": "a lone 'Credit' line, 'Transcribed from the 1888 ... edition by' credit",
}
# non-members: one-line markers, no markers, transcriber's notes at the start and/or the end
NONMEMBERS = {
    "74346": "markers, transcriber's note at the end",
    "74356": "markers, notes at the start and the end",
    "74953": "markers, '[Transcriber's Note: ...]' at the end",
    "74347": "no markers, note at the end",
    "74360": "no markers, note in a '####' box at the start",
    "74418": "no markers, a chapter titled 'THE START OF AN EXPEDITION'",
    "74719": "no markers, note at the start followed by blank lines, notes at the end",
}

LEFTOVER = re.compile(
    r"project\s+gutenberg|gutenberg\.(?:org|net)|pgdp\.net|small\s+print|transcriber|\*\*\*\s*(?:START|END)\b"
    r"|^\s*(?-i:Produced|E-?text\s+prepared|Transcribed)\s+(?:by|from)\b|distributed\s+proofread|HTML\s+version",
    re.I | re.M,
)
_MARKER = re.compile(r"^\s*\*{3}\s*(START|END)\s+OF\s+TH(?:E|IS)\s+PROJECT\s+GUTENBERG", re.I)


def between_markers(raw: str) -> str:
    """The text strictly between the START and END marker lines, found independently of the code under test
    (the whole text when the file has no markers)."""
    lines = raw.replace("\r\n", "\n").split("\n")
    start = next(
        (i for i, line in enumerate(lines) if (m := _MARKER.match(line)) and m.group(1).upper() == "START"), None
    )
    if start is None:
        return "\n".join(lines)
    end = next(i for i in range(start, len(lines)) if (m := _MARKER.match(lines[i])) and m.group(1).upper() == "END")
    return "\n".join(lines[start + 1 : end])


def body_sample(between: str) -> str:
    """A plain line from the middle of the body (ASCII, no emphasis or bracket markup) that cleaning must keep."""
    lines = between.split("\n")
    for line in lines[len(lines) // 2 :]:
        s = line.strip()
        if len(s) >= 50 and s.isascii() and not set(s) & set("_=~[]{}*"):
            return s
    raise AssertionError("no sample line found")


def corpus_file(group: str, book_id: str) -> pathlib.Path:
    return CORPUS / group / f"{book_id}.txt"


@pytest.mark.parametrize("normalize", [False, True], ids=["default", "normalize_chars"])
@pytest.mark.parametrize(
    "group,book_id",
    [("members", i) for i in MEMBERS] + [("nonmembers", i) for i in NONMEMBERS],
)
def test_cleaning_real_books(group, book_id, normalize):
    path = corpus_file(group, book_id)
    raw = read_text(path)
    cleaned = clean_text(raw, normalize_chars=normalize)
    leftovers = [m.group(0) for m in LEFTOVER.finditer(cleaned)]
    assert not leftovers, f"{book_id}: boilerplate left: {leftovers[:5]}"
    # indentation is kept; the ends are trimmed where something was cut (74418 has no boilerplate at all)
    assert "\r" not in cleaned and (cleaned == cleaned.strip("\n") or cleaned == raw.replace("\r\n", "\n"))
    if normalize:
        assert not any(q in cleaned for q in "\u2018\u2019\u201c\u201d\u00a0") and "\n\n\n\n" not in cleaned
    else:
        # whole lines are dropped, none is rewritten (only an inline bracketed note may shorten a line)
        changed = set(cleaned.split("\n")) - set(raw.replace("\r\n", "\n").split("\n"))
        assert len(changed) <= 2, (book_id, sorted(changed)[:3])
    # the body is intact: word count within 2% below the text between the markers (credits, notes and the
    # "End of the Project Gutenberg EBook" line are all that may go), and a sentence from the middle survives
    between = between_markers(raw)
    n_between, n_clean = len(between.split()), len(cleaned.split())
    assert 0.98 * n_between <= n_clean <= n_between, (book_id, n_between, n_clean)
    assert body_sample(between) in cleaned


def test_known_passages_and_edges():
    anne = clean_text(read_text(corpus_file("members", "45")))
    assert "MRS. Rachel Lynde lived just where the Avonlea main road dipped down\ninto a little hollow" in anne
    assert anne.endswith(
        "\u201c\u2018God\u2019s in his heaven, all\u2019s right with the world,\u2019\u201d whispered Anne\nsoftly."
    )
    rome = clean_text(read_text(corpus_file("members", "8723")))
    assert rome.split()[:3] == ["THE", "THREE", "CITIES"]
    assert rome.rstrip().endswith('"Very good, I will\nset to work and see everybody."')
    wrapped = clean_text(read_text(corpus_file("members", "10466")))
    assert not wrapped.startswith("STORIES") and "LITTLE SAINT ELIZABETH" in wrapped.split("\n\n")[0]
    expedition = clean_text(read_text(corpus_file("nonmembers", "74418")))
    assert "THE START OF AN EXPEDITION" in expedition  # a chapter title, not a marker
    projectile = clean_text(read_text(corpus_file("nonmembers", "74719")))
    assert projectile.split()[:2] == ["THE", "PROJECTILE-THROWING"]


def test_strip_gutenberg_only_cuts_header_and_footer():
    raw = read_text(corpus_file("members", "24754"))
    first = strip_gutenberg(raw)
    assert "START OF THE PROJECT" not in first and "END OF THE PROJECT" not in first
    assert first.startswith("E-text prepared by")  # credits are the next step's job
    assert "Transcriber's note" in first
    assert strip_gutenberg("no markers\r\nat all\r\n") == "no markers\nat all\n"
    # the oldest files put the Small Print first and have no START marker
    old = "Header\n*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n\nBody.\nMore body.\n"
    assert strip_gutenberg(old + "\n" * 5) == "Body.\nMore body."
    assert clean_text(old) == "Body.\nMore body."
    # a footer without END marker
    assert strip_gutenberg("*** START OF THE PROJECT GUTENBERG EBOOK X ***\nText.\n*** START: FULL LICENSE ***\nL") == (
        "Text."
    )


def test_normalization_keeps_words():
    raw = (
        "\r\n\r\nTitle  \r\n\u201cQuoted,\u201d she said\u2014it\u2019s \u2018fine\u2019\u2026 pages 10\u201312."
        "\r\nA\u00a0non-breaking space, _italic words_ and =bold= here.\r\n\r\n\r\n\r\n\r\nNext\u00adline.\r\n\r\n"
    )
    out = clean_text(raw, normalize_chars=True)
    assert out == (
        "Title\n\"Quoted,\" she said--it's 'fine'... pages 10-12.\n"
        "A non-breaking space, italic words and bold here.\n\nNextline."
    )
    assert normalize_characters("e\u0301") == "\u00e9"  # NFC
    # snake_case, blanks to fill in and arithmetic are not emphasis
    text = "a snake_case name, a blank ____, 2 = 3 - 1"
    assert clean_text(text, normalize_chars=True) == text


SNIPPET = (
    "\u201cIt\u2019s late,\u201d she said \u2014 and  then, after a pause\u2026 \u2018Very late.\u2019\n"
    "See https://example.org/notes for the  rest \u2013 pages 3\u20134.\n"
)


def test_a_snippet_without_boilerplate_reaches_the_model_unchanged(tmp_path):
    """By default only boilerplate is removed: curly quotes, dashes, ellipses, double spaces, a web address and the
    final newline of a benchmark snippet stay byte for byte; ``normalize_chars`` is an explicit choice."""
    path = tmp_path / "snippet.txt"
    path.write_bytes(SNIPPET.encode("utf-8"))
    assert load_document(path).text.encode("utf-8") == path.read_bytes()
    assert load_documents([path])[0].text == clean_text(SNIPPET) == SNIPPET
    assert load_document(path, raw=True).text == SNIPPET
    normalized = load_document(path, normalize_chars=True).text
    assert normalized == (
        "\"It's late,\" she said -- and  then, after a pause... 'Very late.'\n"
        "See https://example.org/notes for the  rest - pages 3-4."
    )


def test_html_saved_as_text():
    body = "\n".join(f"<p>\n  Paragraph {i} &mdash; it&rsquo;s here.<br />\n</p>" for i in range(60))
    raw = (
        "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n<h1>Title</h1>\n<!-- a comment -->\n"
        + body
        + "\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n"
    )
    out, normalized = clean_text(raw), clean_text(raw, normalize_chars=True)
    assert not any(mark in text for mark in ("<", "&", "comment") for text in (out, normalized))
    assert "Paragraph 7 \u2014 it\u2019s here." in out and "Paragraph 7 -- it's here." in normalized


def test_credits_and_notes_synthetic():
    text = "\n".join(
        [
            "Header line",
            "*** START OF THE PROJECT GUTENBERG EBOOK A LONG",
            "TITLE ***",
            "",
            "Produced by Jane Doe and the Online Distributed",
            "Proofreading Team at http://www.pgdp.net",
            "",
            "",
            "",
            "Transcriber's Notes:",
            "",
            "Italic text is denoted by _underscores_.",
            "",
            "Obvious typographical errors have been corrected.",
            "",
            "",
            "",
            "THE BOOK",
            "",
            "It was a dark night [Transcriber's note: sic] and the wind blew.",
            *(["Filler line of the body of the book, long enough to count."] * 400),
            "The end.",
            "",
            "",
            "Transcriber's Note:",
            "",
            "Page 12: changed teh to the.",
            "",
            "End of the Project Gutenberg EBook of A Long Title, by Nobody",
            "",
            "*** END OF THE PROJECT GUTENBERG EBOOK A LONG TITLE ***",
            "license text",
        ]
    )
    out = clean_text(text)
    assert out.startswith("THE BOOK\n\nIt was a dark night  and the wind blew.")
    assert out.endswith("The end.")
    assert "Transcriber" not in out and "Produced" not in out and "Title ***" not in out


def write(path: pathlib.Path, data: bytes) -> pathlib.Path:
    path.write_bytes(data)
    return path


def test_bad_input_errors(tmp_path):
    cases = {
        "missing.txt": (None, "no such file"),
        "empty.txt": (b"", "empty file"),
        "blank.txt": (b"  \n\n", "empty file"),
        "binary.txt": (b"abc\x00def", "binary"),
        "latin1.txt": ("caf\u00e9 au lait".encode("latin-1"), "not valid UTF-8"),
        "boiler.txt": (
            b"The Project Gutenberg EBook of Nothing\r\n\r\n*** START OF THIS PROJECT GUTENBERG EBOOK NOTHING ***\r\n"
            b"\r\nProduced by Somebody\r\n\r\n\r\n\r\n*** END OF THIS PROJECT GUTENBERG EBOOK NOTHING ***\r\n"
            b"Full license text here.\r\n",
            "no text left after cleaning",
        ),
    }
    for name, (data, message) in cases.items():
        path = tmp_path / name
        if data is not None:
            write(path, data)
        with pytest.raises(DocauditError) as err:
            load_document(path)
        text = str(err.value)
        assert message in text and name in text and "\n" not in text, text
    with pytest.raises(DocauditError, match="not a file"):
        read_text(tmp_path)
    # the all-boilerplate file is fine when read raw
    assert load_document(tmp_path / "boiler.txt", raw=True).text.startswith("The Project Gutenberg EBook")


def test_document_hash_and_raw(tmp_path):
    raw = "\ufeffCaf\u00e9\r\n\u201cHi\u201d\r\n"
    path = write(tmp_path / "12345.txt", raw.encode("utf-8"))
    doc = load_document(path, normalize_chars=True)
    assert doc == Document(
        id="12345",
        path=str(path),
        text='Caf\u00e9\n"Hi"',
        sha256=hashlib.sha256('Caf\u00e9\n"Hi"'.encode()).hexdigest(),
    )
    assert load_document(path).text == "Caf\u00e9\n\u201cHi\u201d\n"  # by default only line endings change
    raw_doc = load_document(path, raw=True)
    assert raw_doc.text == raw[1:] and raw_doc.sha256 == hashlib.sha256(raw[1:].encode()).hexdigest()


def test_expand_paths(tmp_path):
    d = tmp_path / "books"
    d.mkdir()
    for name in ("b.txt", "a.txt", "10.txt", "notes.md"):
        write(d / name, b"Some words of text here.")
    (d / "sub").mkdir()
    write(d / "sub" / "c.txt", b"nested")
    single = write(tmp_path / "single.txt", b"One file given directly.")
    assert [p.name for p in expand_paths([d])] == ["10.txt", "a.txt", "b.txt"]
    assert [p.name for p in expand_paths([single, d, d / "a.txt"])] == ["single.txt", "10.txt", "a.txt", "b.txt"]
    assert [p.name for p in expand_paths(str(single))] == ["single.txt"]
    with pytest.raises(DocauditError, match="no such file or directory"):
        expand_paths([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(DocauditError, match="no .txt files"):
        expand_paths([tmp_path / "empty"])
    docs = load_documents([d], progress=True)
    assert [doc.id for doc in docs] == ["10", "a", "b"]


def test_filter_documents(tmp_path):
    english = "The cat sat on the mat and it was happy with the fish that he had. " * 20
    french = "Le chat est sur le tapis et il est content avec le poisson qu'il avait. " * 20
    docs = [
        Document("1", "1.txt", english, ""),
        Document("2", "2.txt", french, ""),
        Document("3", "3.txt", "The end of it.", ""),
        Document("4", "4.txt", english, ""),
        Document("5", "5.txt", english, ""),
    ]
    assert is_english(english) and not is_english(french)
    manifest = tmp_path / "m.csv"
    manifest.write_text("id,pub_year\n1,1890\n4,1925\n", encoding="utf-8")
    kept, skipped = filter_documents(docs, min_words=10, language="en", years=(1850, 1910), manifest=manifest)
    assert [d.id for d in kept] == ["1", "5"]  # 5 has no known year: kept
    assert set(skipped) == {"2", "3", "4"}
    assert "not English" in skipped["2"] and "too short" in skipped["3"] and "1925" in skipped["4"]
    kept, skipped = filter_documents(docs, language=None, years=(1920, 1930), manifest={"1": {"pub_year": 1890}})
    assert [d.id for d in kept] == ["2", "3", "4", "5"] and set(skipped) == {"1"}
    with pytest.raises(DocauditError):
        filter_documents(docs, language="fr")
