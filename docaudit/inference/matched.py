"""The rank p-value of a text's statistic among a null library's at matched geometry (docs/methods.md, "Matched
geometry").

Every text, the judged book and each library text alike, gives its per-passage values in text order, one passage
at random in each of consecutive stretches of one fixed width, the first at a random offset
(``corpus.segments.stretch_starts``). The book is compared at a count ``k`` with every library text that holds at
least ``k`` passages, each text (the book too, when it holds more) through ``k`` consecutive passages of its own
from a random first one: every statistic is a mean over ``k`` passages laid out alike (the same count, the same
spacing law, a random place), so under H0 "the book is a text like the library's" the ``n + 1`` means are
exchangeable whatever the values' correlation along a text (monotone, periodic, negative, chapters), as long as
the text's law does not depend on the place. ``k`` is the book's own count where enough library texts hold it,
else the largest count that enough of them hold (a library text too short for it is not compared); it depends on
passage counts alone, never on values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from docaudit.inference.conformal import conformal_p


@dataclass(frozen=True)
class MatchedRank:
    """A book's rank p-value (None when no library text holds its layout or it has no passage), its passage count
    ``passages``, its statistic (the mean of its values) and the number ``texts`` of library texts compared, with
    the smallest p-value that number allows, 1/(texts + 1)."""

    p_value: float | None
    passages: int
    statistic: float | None
    texts: int

    @property
    def smallest_p(self) -> float:
        return 1 / (self.texts + 1)


def hosting(k: int, counts) -> np.ndarray:
    """The indices of the library texts (their passage counts ``counts``) that hold a layout of ``k`` passages."""
    return np.flatnonzero(np.asarray(counts, dtype=int) >= k)


def compared_at(n_book: int, counts, needed: int, least: int) -> int:
    """The count a book of ``n_book`` passages is compared at: its own where at least ``needed`` library texts (their
    passage counts ``counts``) hold it, else the largest count from ``least`` up that ``needed`` of them hold (the
    book's own when none does: too few texts for the comparison ``needed`` asks)."""
    counts = np.asarray(counts, dtype=int)
    for k in range(n_book, least - 1, -1):
        if np.sum(counts >= k) >= needed:
            return k
    return n_book


def _window_mean(values, k: int, rng: np.random.Generator) -> float:
    """The mean of ``k`` consecutive values from a first one drawn uniformly."""
    values = np.asarray(values, dtype=float)
    first = int(rng.integers(0, len(values) - k + 1))
    return float(values[first : first + k].mean())


def matched_rank(book, library, rng: np.random.Generator, needed: int = 0, least: int = 1) -> MatchedRank:
    """``(1 + #{library statistics ≥ the book's}) / (n + 1)`` (ties count against the book) at the count ``k``
    (:func:`compared_at`, with ``needed`` the fewest library texts that make the comparison worth having and
    ``least`` the fewest passages): the mean of ``k`` consecutive passages of the book (all of them when ``k`` is its
    count) against, for each library text that holds at least ``k``, the mean of ``k`` consecutive passages of it,
    every first passage drawn uniformly by ``rng``."""
    n_book = len(book)
    k = compared_at(n_book, [len(x) for x in library], needed, min(least, n_book)) if n_book else 0
    compared = hosting(k, [len(x) for x in library]) if k else np.array([], dtype=int)
    if compared.size == 0:
        return MatchedRank(None, k, float(np.mean(book)) if k else None, 0)
    statistic = _window_mean(book, k, rng)
    null = [_window_mean(library[i], k, rng) for i in compared]
    return MatchedRank(conformal_p(statistic, null), k, statistic, len(null))
