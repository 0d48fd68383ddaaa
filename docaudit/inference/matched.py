"""The rank p-value of a text's statistic among a null library's at matched geometry (docs/methods.md, "Matched
geometry").

Every text, the judged book and each library text alike, gives its per-passage values in text order, one passage
at random in each of consecutive stretches of one fixed width, the first at a random offset
(``corpus.segments.stretch_starts``). A book with ``k`` passages is compared with every library text that holds at
least ``k``, each through ``k`` consecutive passages of its own, from a random first one: the book's ``k`` passages
and each library text's lie alike (the same count, the same spacing law, a random place), so under H0 "the book is
a text like the library's" the ``n + 1`` means are exchangeable whatever the values' correlation along a text
(monotone, periodic, negative, chapters), as long as the text's law does not depend on the place. A library text
too short to hold the book's layout is not compared; which texts are compared depends on passage counts alone."""

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


def matched_rank(book, library, rng: np.random.Generator) -> MatchedRank:
    """``(1 + #{library statistics ≥ the book's}) / (n + 1)`` (ties count against the book): the book's mean
    value against, for each library text that holds at least ``k = len(book)`` passages, the mean of ``k``
    consecutive passages of it from a first one drawn uniformly by ``rng``."""
    book = np.asarray(book, dtype=float)
    k = len(book)
    compared = hosting(k, [len(x) for x in library]) if k else np.array([], dtype=int)
    if compared.size == 0:
        return MatchedRank(None, k, float(book.mean()) if k else None, 0)
    null = []
    for i in compared:
        values = np.asarray(library[i], dtype=float)
        first = int(rng.integers(0, len(values) - k + 1))
        null.append(values[first : first + k].mean())
    statistic = float(book.mean())
    return MatchedRank(conformal_p(statistic, null), k, statistic, len(null))
