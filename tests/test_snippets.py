"""Snippets of a book for the contamination rate: never overlapping, uniform over placements, and the warning says
what was drawn."""

import itertools
from collections import Counter

import numpy as np
import pandas as pd
from scipy.stats import chisquare

from docaudit.audit.contamination import book_snippets, overlap_warning, overlapping_snippets, snippet_starts
from docaudit.corpus.documents import Document
from docaudit.io import sha256_text


def _book(n_words):
    text = " ".join(f"w{i}" for i in range(n_words))
    return Document("book", "book.txt", text, sha256_text(text))


def test_default_snippets_of_an_80k_word_book_do_not_overlap():
    """100 snippets x 512 words of an 80,000-word book: drawn at random starts, about 72% would overlap another;
    drawn as non-overlapping runs, none does, and each is the book's 512 words from its start."""
    snippets = book_snippets(_book(80_000), 100, 512, seed=3)
    starts = [s for s, _ in snippets]
    assert len(snippets) == 100 and overlapping_snippets(starts, 512) == 0
    assert all(text.split() == [f"w{i}" for i in range(s, s + 512)] for s, text in snippets)
    assert overlapping_snippets([0, 100, 700, 2000], 512) == 2  # the count itself, by definition


def test_a_short_book_gives_as_many_disjoint_snippets_as_fit():
    snippets = book_snippets(_book(1_000), 8, 300, seed=0)
    assert len(snippets) == 3 and overlapping_snippets([s for s, _ in snippets], 300) == 0
    assert len(book_snippets(_book(300), 8, 300)) == 1


def test_placements_are_uniform():
    """Every placement of 2 disjoint runs of 3 words among 10 is drawn equally often (against the enumeration)."""
    placements = [p for p in itertools.combinations(range(8), 2) if p[1] - p[0] >= 3]
    rng = np.random.default_rng(0)
    drawn = Counter(tuple(snippet_starts(10, 2, 3, rng).tolist()) for _ in range(6000))
    assert set(drawn) == set(placements)
    assert chisquare([drawn[p] for p in placements]).pvalue > 0.001


def test_warning_says_what_was_drawn():
    books = pd.DataFrame(
        {"book": ["a", "b"], "n_words": [250, 90_000], "n_snippets": [6, 8], "overlapping_snippets": [0, 0]}
    )
    warning = overlap_warning(books, 8, 40)
    assert "1 of 2 books have fewer than 8 x 40 words" in warning and "a: 6 snippets from 250 words" in warning
    assert "overlap another" not in warning
    assert overlap_warning(books.assign(n_snippets=8, n_words=90_000), 8, 40) is None
    assert "3 snippets overlap" in overlap_warning(books.assign(n_snippets=8, overlapping_snippets=[0, 3]), 8, 40)
