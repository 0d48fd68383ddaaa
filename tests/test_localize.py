"""The chapter map (``docaudit map``): segments from headings, one pass per book, p-values against windows of the
calibration books recomputed by a slow reference, and a tiny target trained on half of the chapters of two books."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import CORPUS

from docaudit.audit.localize import BookPass, MapSpec, book_map, book_pass, calibration_windows
from docaudit.config import LocalizeConfig
from docaudit.corpus.base import Document
from docaudit.corpus.segments import Segment, headings, split_segments, word_segments
from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE
from docaudit.io import sha256_text
from docaudit.methods.segment_level import scored_bounds
from docaudit.query.stats import TokenStats

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()


def prose(n: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, size=n))


# --- segments ------------------------------------------------------------------------------------------------------


def test_chapters_are_cut_at_their_headings_and_a_table_of_contents_is_joined():
    toc = "CONTENTS\n\nCHAPTER I. The Start\nCHAPTER II. The End\n\n"
    body = "".join(f"CHAPTER {r}. Title\n\n{prose(400, i)}\n\n" for i, r in enumerate(["I", "II", "III"]))
    text = "A Book\n\n" + toc + body
    segments, how = split_segments(text, 2000, 300)
    assert how == "chapters"
    # the front matter and the contents (too short) are joined to the first chapter, named by its heading; every
    # character is in one segment
    assert [s.name for s in segments] == ["CHAPTER I. Title", "CHAPTER II. Title", "CHAPTER III. Title"]
    assert len(headings(text[segments[0].start : segments[0].end])) == 3
    assert segments[0].start == 0 and segments[-1].end == len(text)
    assert all(a.end == b.start for a, b in zip(segments, segments[1:]))
    assert text[segments[1].start :].startswith("CHAPTER II. Title")


@pytest.mark.parametrize(
    "line, found",
    [
        ("CHAPTER XII.", True),
        ("Chapter 3: The Storm", True),
        ("PART ONE", True),
        ("XIV.", True),
        ("xiv.", False),
        ("The chapter 3 of this story", False),
        ("I went home.", False),
    ],
)
def test_heading_lines(line, found):
    assert bool(headings(f"text\n{line}\nmore text")) is found


def test_a_book_without_headings_is_cut_into_runs_of_words():
    text = prose(1050, 1)
    segments, how = split_segments(text, 500, 100)
    assert how == "words"
    assert [s.words(text) for s in segments] == [500, 550]  # the 50-word remainder joins the last run
    assert [s.name for s in segments] == ["words 1-500", "words 501-1050"]
    assert "".join(text[s.start : s.end] for s in segments) == text
    assert word_segments("", 10) == [Segment("words 1-0", 0, 0)]


def test_scored_bounds_follow_token_counts():
    assert scored_bounds(99, [10, 30, 60]).tolist() == [0, 10, 40, 99]
    assert scored_bounds(50, [10, 10]).tolist() == [0, 25, 50]


# --- p-values against a slow reference --------------------------------------------------------------------------


def fake_book(name: str, n: int, rng, shift: float = 0.0, chapters: int = 4) -> BookPass:
    """A book of ``chapters`` equal word segments whose per-token statistics are drawn at random (``shift`` added
    to every log-probability)."""
    text = prose(200 * chapters, int(rng.integers(1 << 30)))
    segments = word_segments(text, 200)
    logp = rng.normal(-3, 1, n) + shift
    stats = TokenStats(
        token_ids=rng.integers(0, 50, n + 1),
        logp=logp,
        max_logp=np.zeros(n),
        mu=rng.normal(-3, 0.5, n),
        sigma=np.abs(rng.normal(1, 0.2, n)) + 0.1,
        gp_sum=None,
        vocab_size=50,
        context=64,
        stride=63,
    )
    bounds = scored_bounds(n, [1] * len(segments))
    doc = Document(name, name, text, sha256_text(text))
    return BookPass(doc, stats, segments, "words", bounds, bounds[:-1].tolist())


class Decoder:
    def decode(self, ids):
        return " ".join(map(str, ids))


def reference_p(book: BookPass, i: int, calibration: list[BookPass], method: str) -> float:
    """The p-value of segment ``i`` written out plainly: the same relative place and length in every calibration
    book long enough, the score recomputed by hand, ``(1 + #at least as high) / (B + 1)``."""
    lo, hi = book.body(i)
    length, n = hi - lo, book.stats.n_scored

    def score(s: TokenStats, a: int, b: int) -> float:
        logp = s.logp[a:b]
        if method == "loss":
            return float(np.mean(logp))
        if method == "mink":
            return float(np.sort(logp)[: max(1, int(0.2 * len(logp)))].mean())
        if method == "minkpp":
            z = (logp - s.mu[a:b]) / s.sigma[a:b]
            return float(np.sort(z)[: max(1, int(0.2 * len(z)))].mean())
        text = " ".join(map(str, s.token_ids[a + 1 : b + 1]))
        return float(np.mean(logp)) / len(zlib.compress(text.encode()))

    own = score(book.stats, lo, hi)
    place = lo / (n - length) if n > length else 0.0
    null = []
    for c in calibration:
        m = c.stats.n_scored
        if m >= length:
            start = int(round(place * (m - length)))
            null.append(score(c.stats, start, start + length))
    return (1 + sum(v >= own for v in null)) / (len(null) + 1)


@pytest.mark.parametrize("method", ["loss", "mink", "minkpp", "zlib"])
def test_p_values_match_a_slow_reference(method):
    rng = np.random.default_rng(3)
    calibration = [fake_book(f"c{i}", int(rng.integers(300, 900)), rng) for i in range(40)]
    book = fake_book("judged", 600, rng, shift=0.4)
    spec = MapSpec(LocalizeConfig(method=method, min_segment_tokens=16))
    rows = book_map(book, calibration, Decoder(), spec)
    for i, row in enumerate(rows):
        assert row["p_value"] == pytest.approx(reference_p(book, i, calibration, method), abs=1e-12)
        assert row["calibration_books"] == len(calibration_windows(row["n_scored"], 0, calibration))


def test_too_few_long_calibration_books_or_a_short_segment_is_inconclusive():
    rng = np.random.default_rng(4)
    calibration = [fake_book(f"c{i}", 700 if i < 10 else 100, rng) for i in range(30)]
    rows = book_map(
        fake_book("judged", 700, rng), calibration, Decoder(), MapSpec(LocalizeConfig(min_segment_tokens=16))
    )
    assert all(r["verdict"] == INCONCLUSIVE and "too few calibration books" in r["reason"] for r in rows)
    assert all(r["calibration_books"] == 10 for r in rows)
    rows = book_map(
        fake_book("judged", 40, rng), calibration, Decoder(), MapSpec(LocalizeConfig(min_segment_tokens=16))
    )
    assert all(r["verdict"] == INCONCLUSIVE and r["reason"].startswith("too short") for r in rows)


def test_the_judged_book_is_never_its_own_calibration():
    rng = np.random.default_rng(5)
    calibration = [fake_book(f"c{i}", 500, rng) for i in range(25)]
    rows = book_map(calibration[0], calibration, Decoder(), MapSpec(LocalizeConfig(min_segment_tokens=16)))
    assert {r["calibration_books"] for r in rows} == {24}


class WordTokenizer:
    """One token per word: a chaptered fake book's segments then hold exactly their words' share of its tokens."""

    def __call__(self, text, add_special_tokens=False, verbose=False):
        return {"input_ids": list(range(len(text.split())))}


def roman(i: int) -> str:
    return ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"][i]


def chaptered_book(
    name: str,
    rng,
    chapter_sd: float,
    book_sd: float = 0.1,
    shifted=(),
    shift: float = 0.0,
    opening: float = 0.0,
    words: int | None = None,
):
    """A book as a reader has it: a title and a table of contents (scored 1.5 nats more predictable than prose; the
    same words in every book, so that the text gate sees only the prose), then 8 chapters of 120-400 words under
    their headings. A token's log-probability is N(-3, 1) plus the book's level (SD ``book_sd``) plus its
    chapter's (SD ``chapter_sd``); chapters ``shifted`` (0-based) get ``shift`` more, and each chapter's first 40
    words ``opening`` more (an opening that reads otherwise than the rest); ``words``: every chapter that long. Cut,
    located and given heading-free bodies by the map's own ``book_pass`` with one token per word."""
    level = rng.normal(0, book_sd)
    parts = [("A BOOK OF MANY CHAPTERS\n\nCONTENTS\n\n" + "\n".join(f"CHAPTER {roman(i)}" for i in range(8)), 1.5)]
    for i in range(8):
        effect = rng.normal(0, chapter_sd) + (shift if i in shifted else 0.0)
        length = words or int(rng.integers(120, 401))
        parts.append((f"CHAPTER {roman(i)}\n\n" + prose(length, int(rng.integers(1 << 30))), effect))
    text = "\n\n".join(t for t, _ in parts)
    raised = [np.zeros(len(t.split())) for t, _ in parts]
    for r in raised[1:]:
        r[2:42] = opening  # the words after the heading's two
    logp = np.concatenate([rng.normal(-3, 1, len(t.split())) + e + level + r for (t, e), r in zip(parts, raised)])
    n = len(logp)
    stats = TokenStats(
        token_ids=rng.integers(0, 50, n + 1),
        logp=logp,
        max_logp=np.zeros(n),
        mu=np.full(n, -3.0),
        sigma=np.ones(n),
        gp_sum=None,
        vocab_size=50,
        context=64,
        stride=63,
    )
    doc = Document(name, name, text, sha256_text(text))
    return book_pass(doc, stats, WordTokenizer(), LocalizeConfig(min_segment_words=20, min_segment_tokens=16))


def chapter_map(
    chapter_sd: float,
    draws: int,
    shift: float = 0.0,
    book_sd: float = 0.1,
    judged: int = 10,
    n_calibration: int = 40,
    opening: float = 0.0,
):
    """Map ``judged`` chaptered books against ``n_calibration`` never-trained ones, ``draws`` times (seeded):
    chapters 3, 5 and 7 (0-based 2, 4, 6) of each judged book shifted by ``shift`` (trained, when positive), the
    others never trained. Returns the never-trained chapters' p-values, per judged book its false and its total
    "evidence" verdicts, and how many books the text gate stopped."""
    rng = np.random.default_rng(7)
    spec = MapSpec(LocalizeConfig(method="loss", min_segment_words=20, min_segment_tokens=16))
    null_p, found, gated = [], [], 0
    trained = {f"CHAPTER {roman(c)}" for c in (2, 4, 6)} if shift else set()
    for _ in range(draws):
        calibration = [chaptered_book(f"c{i}", rng, chapter_sd, book_sd, opening=opening) for i in range(n_calibration)]
        for j in range(judged):
            book = chaptered_book(f"j{j}", rng, chapter_sd, book_sd, (2, 4, 6), shift, opening)
            rows = book_map(book, calibration, Decoder(), spec)
            assert "headings (a table of contents" in rows[0]["reason"]  # the title and contents: gated
            null = [r for r in rows[1:] if r["name"] not in trained]
            null_p += [r["p_value"] for r in null if r["p_value"] is not None]
            found.append((sum(r["verdict"] == EVIDENCE for r in null), sum(r["verdict"] == EVIDENCE for r in rows)))
            gated += rows[0]["text_gate_p"] < 0.05
    return np.array(null_p), np.array(found), gated


def slow_window(book: BookPass, length: int, place: float) -> int | None:
    """The calibration window of a chaptered book written out plainly: of every start whose window lies inside one
    chapter body (heading lines, the table of contents and the front matter out), the one nearest the relative
    place; None when no chapter body is that long."""
    n = book.stats.n_scored
    target = place * (n - length)
    best = None
    for i, seg in enumerate(book.segments):
        if seg.name == "front matter" or len(headings(book.doc.text[seg.start : seg.end])) >= 3:
            continue
        lo, hi = book.body(i)
        for s in range(lo, hi - length + 1):
            if best is None or abs(s - target) < abs(best - target):
                best = s
    return best


def test_calibration_windows_lie_inside_one_chapter_body_as_a_slow_reference_finds_them():
    """A calibration window never holds a heading, the contents or parts of two chapters (each chapter has its own
    level): it is the start nearest the segment's place among those inside one chapter body."""
    rng = np.random.default_rng(8)
    books = [chaptered_book(f"c{i}", rng, 0.3) for i in range(6)]
    for length in (50, 150, 300):
        for place in (0.0, 0.13, 0.5, 0.77, 1.0):
            found = dict((b.doc.id, s) for b, s in calibration_windows(length, place, books))
            for b in books:
                expected = slow_window(b, length, place)
                assert found.get(b.doc.id) == (None if expected is None else pytest.approx(expected, abs=1)), (
                    length,
                    place,
                )
                if expected is not None:
                    s = found[b.doc.id]
                    assert any(lo <= s and s + length <= hi for lo, hi in b.usable_bodies)


def slow_opening_window(book: BookPass, length: int, place: float) -> int | None:
    """The window of a chapter segment written out: of the chapter bodies at least ``length`` long (heading lines,
    contents and front matter out), the start of the one whose start is nearest the relative place."""
    target = place * (book.stats.n_scored - length)
    starts = []
    for i, seg in enumerate(book.segments):
        if seg.name == "front matter" or len(headings(book.doc.text[seg.start : seg.end])) >= 3:
            continue
        lo, hi = book.body(i)
        if hi - lo >= length:
            starts.append(lo)
    return min(starts, key=lambda s: abs(s - target)) if starts else None


def test_a_chapter_is_compared_with_windows_that_open_a_chapter_body():
    rng = np.random.default_rng(9)
    books = [chaptered_book(f"c{i}", rng, 0.3) for i in range(6)]
    for length in (50, 150, 300):
        for place in (0.0, 0.13, 0.5, 0.77, 1.0):
            found = dict((b.doc.id, s) for b, s in calibration_windows(length, place, books, opening=True))
            assert found == {b.doc.id: w for b in books if (w := slow_opening_window(b, length, place)) is not None}, (
                length,
                place,
            )


@pytest.mark.parametrize("words", [150, 300])
def test_every_chapter_gets_a_p_value_against_calibration_books_cut_into_chapters_of_its_length(words):
    """Calibration books whose chapters are as long as the book's: each chapter is compared with windows that open
    a calibration chapter body, and every one of them holds the chapter, so no chapter is left without a p-value."""
    rng = np.random.default_rng(words)
    spec = MapSpec(LocalizeConfig(method="loss", min_segment_words=20, min_segment_tokens=16))
    calibration = [chaptered_book(f"c{i}", rng, 0.3, words=words) for i in range(40)]
    for j in range(3):
        rows = book_map(chaptered_book(f"j{j}", rng, 0.3, words=words), calibration, Decoder(), spec)
        assert len(rows) == 9 and all(r["p_value"] is not None for r in rows[1:]), [r["reason"] for r in rows[1:]]


@pytest.mark.slow
def test_chapter_openings_that_read_otherwise_do_not_raise_the_null_rate():
    """Every chapter's first 40 words 1 nat more predictable: a chapter holds its opening, a window inside a
    longer chapter need not, so windows placed anywhere in a body gave p < 0.05 for 7.0% of about 1,400
    never-trained chapters (above the bound); windows that open a body, at most 5% (+ noise)."""
    null_p = chapter_map(0.3, draws=20, opening=1.0)[0]
    assert len(null_p) >= 1200
    assert (null_p < 0.05).mean() <= 0.05 + 2.33 * np.sqrt(0.05 * 0.95 / len(null_p)), (null_p < 0.05).mean()


@pytest.mark.slow
def test_the_null_rate_of_a_chapter_with_chapter_level_effects_is_at_most_alpha():
    """Never-trained books with a table of contents and 8 chapters whose levels differ (SD 0.3; the book's, 0.1):
    windows that straddled chapters or held the contents gave p <= 0.05 for 7.7% of 1,576 chapters. Drawn inside
    one chapter body, at most 5% (+ noise) over about 1,400 chapters (a bound of 6.4%, which Bin(1400, 0.10)
    exceeds with probability above 0.99: a doubled rate is seen), and books with "evidence" and books the text
    gate stops at most 5% (+ noise) of 200."""
    null_p, found, gated = chapter_map(0.3, draws=20)
    assert len(null_p) >= 1200
    assert (null_p <= 0.05).mean() <= 0.05 + 2.33 * np.sqrt(0.05 * 0.95 / len(null_p)), (null_p <= 0.05).mean()
    assert (found[:, 1] > 0).mean() <= 0.05 + 2.33 * np.sqrt(0.05 * 0.95 / len(found))
    assert gated / len(found) <= 0.05 + 2.33 * np.sqrt(0.05 * 0.95 / len(found))  # the text gate is a valid test


@pytest.mark.slow
def test_benjamini_hochberg_over_a_books_chapters_keeps_the_false_discovery_rate_with_dependence():
    """The chapters' p-values of one book are dependent: they share the book's level (SD 0.5 here, strong) and
    each has its own calibration windows, so no theorem gives Benjamini-Hochberg's guarantee. Simulated: 3 of 8
    chapters trained (shift 1.0), 100 calibration books, 300 books: the false discovery proportion averages at
    most 5% (+ 2.33 standard errors of the mean)."""
    _, found, _ = chapter_map(0.3, draws=30, shift=1.0, book_sd=0.5, n_calibration=100)
    fdp = found[:, 0] / np.maximum(found[:, 1], 1)
    assert found[:, 1].mean() > 0.3  # the trained chapters are found: the check sees discoveries
    assert fdp.mean() <= 0.05 + 2.33 * fdp.std(ddof=1) / np.sqrt(len(fdp)), fdp.mean()


# --- a tiny target trained on half of the chapters of two books ---------------------------------------------


def lab_books(n: int, chapters: int, words: int, skip: int = 0) -> list[list[str]]:
    """``n`` books of ``chapters`` runs of ``words`` words spread over real books (cleaned), each under its
    heading, each taken from the middle of its part of the book (not from a title page or a contents list)."""
    from docaudit.corpus.cleaning import clean_text

    out = []
    for path in sorted((CORPUS / "members").glob("*.txt"))[skip : skip + n]:
        text = clean_text(path.read_text(encoding="utf-8")).split()
        starts = [(2 * k + 1) * len(text) // (2 * chapters) for k in range(chapters)]
        out.append([f"CHAPTER {k + 1}\n\n" + " ".join(text[a : a + words]) for k, a in enumerate(starts)])
    return out


@pytest.fixture(scope="module")
def lab(tmp_path_factory, one_thread):
    """Two prose books of four chapters, chapters 1 and 3 of each trained into a tiny target beside every chapter
    of 12 other books (so that it learns the corpus's language, not only the judged books); 60 never-trained books
    of the same kind as calibration, whose chapters (150 words) are longer than the judged books' (130): a window
    lies inside one chapter, so a calibration book's chapters must be at least as long as the judged segment."""
    from docaudit.config import TargetConfig
    from docaudit.lab.target import train_target

    root = tmp_path_factory.mktemp("map")
    judged, calibration = lab_books(2, 4, 130, skip=2), lab_books(60, 4, 150, skip=4)
    background = lab_books(12, 4, 150, skip=64)
    members = [book[k] for book in judged for k in (0, 2)] + [chapter for book in background for chapter in book]
    texts = ["\n\n".join(b) for b in judged + calibration + background]
    target = TargetConfig(
        layers=2, width=64, heads=4, positions=64, vocab_size=512, epochs=30, batch_size=8, doc_tokens=None
    )
    model = train_target(members, texts, root / "target", target)
    for name, books in (("books", judged), ("calibration", calibration)):
        (root / name).mkdir()
        for i, book in enumerate(books):
            (root / name / f"{name}{i:02d}.txt").write_text("\n\n".join(book), encoding="utf-8")
    return root, model


@pytest.mark.slow
def test_trained_chapters_are_flagged_and_the_others_are_not(lab):
    from docaudit.cli import main

    root, model = lab
    args = ["map", str(root / "books"), "--calibrate-nonmembers", str(root / "calibration"), "--model", str(model)]
    args += ["--context", "63", "--min-segment-words", "20", "--out", str(root / "out")]
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["schema"]["name"] == "map"
    flagged = {(Path(r["file"]).name, r["segment"]) for r in out["rows"] if r["verdict"] == EVIDENCE}
    assert flagged == {(f"books{b:02d}.txt", k) for b in (0, 1) for k in (1, 3)}, [
        (r["segment"], r["p_value"], r["calibration_books"]) for r in out["rows"]
    ]
    # one window per calibration book with a chapter body as long as the segment: most of the 60, never too few
    assert all(20 <= r["calibration_books"] <= 60 for r in out["rows"]), [r["calibration_books"] for r in out["rows"]]
    assert sorted(p.name for p in (root / "out").iterdir()) == [
        ".docaudit-output.json",
        "map.csv",
        "map.html",
        "map.json",
        "map.png",
    ]
    from test_schemas import validate

    validate(out, "map")
    text = CliRunner().invoke(main, [*args[:-2], "--format", "table"])
    assert text.exit_code == 0 and "2 evidence of membership, 2 no evidence of membership" in text.stdout


@pytest.mark.slow
def test_max_tokens_maps_the_first_tokens_of_each_book_as_the_same_books_cut_by_hand(tiny_gpt2, tmp_path):
    """``map --max-tokens N`` gives the map of the books cut to the text of their first N tokens: the same rows as
    files holding exactly that text (a slow reference: each cut found by tokenizing ever longer prefixes)."""
    from transformers import AutoTokenizer

    from docaudit.audit.localize import leading_part
    from docaudit.cli import main

    tok = AutoTokenizer.from_pretrained(tiny_gpt2)
    books = {f"b{i}": "\n\n".join(prose(220, 40 + 4 * i + k) for k in range(3)) for i in range(4)}
    n = 300

    def by_hand(text: str, near: int) -> str:
        """The longest prefix of at most n tokens, among those ending within 40 characters of ``near``."""
        ends = [k for k in range(near - 40, near + 41) if len(tok(text[:k]).input_ids) <= n]
        return text[: max(ends)]

    cut = {name: leading_part(Document(name, name, t, sha256_text(t)), tok, n).text for name, t in books.items()}
    for name, text in books.items():
        longest = by_hand(text, len(cut[name]))
        assert len(tok(cut[name]).input_ids) == n and longest.startswith(cut[name])
        assert len(longest) - len(cut[name]) <= 12  # at most the rest of the token it cuts into
    assert leading_part(Document("s", "s", "short text", sha256_text("short text")), tok, n).text == "short text"
    folders = {}
    for kind, texts in (("whole", books), ("cut", cut)):
        folders[kind] = tmp_path / kind
        for name, text in texts.items():
            (folders[kind] / ("books" if name == "b0" else "cal")).mkdir(parents=True, exist_ok=True)
            (folders[kind] / ("books" if name == "b0" else "cal") / f"{name}.txt").write_text(text, encoding="utf-8")
    rows = {}
    for kind, extra in (("whole", ["--max-tokens", str(n)]), ("cut", [])):
        root = folders[kind]
        args = ["map", str(root / "books"), "--calibrate-nonmembers", str(root / "cal"), "--model", str(tiny_gpt2)]
        result = CliRunner().invoke(
            main, [*args, "--context", "32", "--segment-words", "60", "--alpha", "0.5", *extra, "--format", "json"]
        )
        assert result.exit_code == 0, result.output
        rows[kind] = [{k: v for k, v in r.items() if k not in ("file",)} for r in json.loads(result.stdout)["rows"]]
    assert rows["whole"] and rows["whole"] == rows["cut"]
