"""``extract --mode continuation`` without a server: the matching functions against brute-force references (the
longest common substring by trying every pair of starts; the word recall on continuations whose matching blocks are
known by construction), and the audit with a writer that gives back the real continuation of the book's passages
and unrelated words for the library's (every book passage a long match at the positions quoted, no library one)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import corpus_ids, corpus_text

from docaudit.audit.extraction_continuation import continuation_audit, passages_of
from docaudit.config import ContinuationConfig
from docaudit.corpus.base import Document
from docaudit.errors import DocauditError
from docaudit.methods.probes.verbatim import longest_common, passage_match, recall
from docaudit.query.chat import Writer


def brute_longest(a, b) -> int:
    """The longest common contiguous run of ``a`` and ``b``, every pair of starts tried."""
    best = 0
    for i in range(len(a)):
        for j in range(len(b)):
            k = 0
            while i + k < len(a) and j + k < len(b) and a[i + k] == b[j + k]:
                k += 1
            best = max(best, k)
    return best


def test_longest_common_substring_agrees_with_brute_force():
    rng = np.random.default_rng(0)
    for case in range(400):
        alphabet = "ab c" if case % 2 else "abcdefgh "
        a = "".join(rng.choice(list(alphabet), rng.integers(0, 40)))
        b = "".join(rng.choice(list(alphabet), rng.integers(0, 40)))
        size, at = longest_common(a, b)
        assert size == brute_longest(a, b), (a, b)
        assert a[at : at + size] in b
        words_a, words_b = a.split(), b.split()
        assert longest_common(words_a, words_b)[0] == brute_longest(words_a, words_b)


@pytest.mark.parametrize("min_words", [1, 5, 12])
def test_word_recall_counts_the_blocks_known_by_construction(min_words):
    """50 distinct words; the continuation replaces some and inserts others: the blocks are the runs between the
    replaced words and the insertions, and the recall is the words of the runs of at least ``min_words`` over 50."""
    rng = np.random.default_rng(min_words)
    real = [f"w{i}" for i in range(50)]
    for _ in range(50):
        replaced = set(rng.choice(50, rng.integers(0, 8), replace=False).tolist())
        inserted = set(np.flatnonzero(rng.random(50) < 0.05).tolist())  # a new word after these: a run ends there
        written = []
        for i, word in enumerate(real):
            written.append(f"x{i}" if i in replaced else word)
            if i in inserted:
                written.append(f"new{i}")
        runs, run = [], 0
        for i in range(50):
            run = 0 if i in replaced else run + 1
            if i == 49 or (i + 1) in replaced or i in inserted:
                runs.append(run)
                run = 0
        expected = sum(r for r in runs if r >= min_words) / 50
        assert recall(real, written, min_words) == pytest.approx(expected)


def test_a_passage_takes_the_best_of_its_samples():
    real = "one two three four five six seven eight nine ten"
    found = passage_match(["zero one two three x", "six  seven\neight nine ten eleven", ""], real, 3)
    assert found["longest_words"] == 5 and found["match"] == "six seven eight nine ten"
    assert found["longest_chars"] == len("six seven eight nine ten")
    assert found["recall"] == pytest.approx(0.5)
    assert passage_match([], real, 3) == {"longest_words": 0, "longest_chars": 0, "recall": 0.0, "match": ""}


class Oracle(Writer):
    """Gives back the real next words after an opening found in ``book``, and words of no text otherwise."""

    def __init__(self, book: str):
        super().__init__("oracle", "completions")
        self.book = " ".join(book.split())

    def write(self, asks):
        out = []
        for ask in asks:
            opening = " ".join(ask.prompt.split())
            at = self.book.find(opening)
            text = self.book[at + len(opening) :][:2000] if at >= 0 else " ".join(["qqq"] * 80)
            out.append([text] * ask.samples)
            self.sent += ask.samples
        return out


def _doc(name: str, text: str) -> Document:
    import hashlib

    return Document(name, f"{name}.txt", text, hashlib.sha256(text.encode()).hexdigest())


def test_a_model_that_gives_the_book_back_has_every_passage_quoted_where_it_is():
    book = _doc("book", corpus_text("members", corpus_ids("members", 1)[0], n_chars=40_000))
    library = [
        _doc(f"n{i}", corpus_text("nonmembers", b, n_chars=40_000)) for i, b in enumerate(corpus_ids("nonmembers", 3))
    ]
    config = ContinuationConfig(prompts=6, stretch_words=600, prompt_words=30, continuation_words=40, samples=2)
    found = continuation_audit([book], library, Oracle(book.text), config, 1.0, 0)
    [mine] = found["books"]
    assert mine.summary["passages"] == 6 and mine.summary["long_match_share"] == 1.0
    assert mine.summary["longest_match_words"] == 40 and mine.summary["mean_recall"] == 1.0
    for passage in mine.quoted:
        real = book.text[passage["continuation_start"] : passage["char_end"]]
        assert passage["match"] == " ".join(real.split()) and passage["longest_words"] == 40
        assert book.text[passage["char_start"] : passage["continuation_start"]].split()[-1] != real.split()[0]
    assert all(t.summary["long_match_share"] == 0.0 for t in found["library"])
    [base] = found["baselines"]
    assert base["texts"] == 3 and base["at_or_above"] == 0 and base["rank"] == 1 and base["max_share"] == 0.0
    # the same run and seed lay the passages out the same; another seed elsewhere
    assert passages_of(book, config, 0) == passages_of(book, config, 0) != passages_of(book, config, 1)


def test_a_book_too_short_for_one_passage_is_refused_before_anything_is_sent():
    config = ContinuationConfig(prompts=2, stretch_words=100, prompt_words=30, continuation_words=40)
    writer = Oracle("")
    with pytest.raises(DocauditError, match="too short for one passage"):
        continuation_audit([_doc("short", "a few words " * 20)], [], writer, config, 1.0, 0)
    assert writer.sent == 0
