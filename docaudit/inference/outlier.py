"""How far a book's model-free profile lies from a null library's, as a conformal p-value (docs/methods.md, "The
library checked against the book").

Every one of the ``n + 1`` texts (the book and the ``n`` library texts) gets the same outlier score: the mean
Euclidean distance to its ``neighbours`` nearest other texts, the columns standardized over all ``n + 1`` texts
together. The score of each text is a symmetric function of all of them, so under H0 "the book is a text like the
library's" (the ``n + 1`` profiles exchangeable) the book's rank is uniform and
``(1 + #{library texts at least as outlying}) / (n + 1)`` is a valid p-value (Vovk, Gammerman & Shafer 2005),
whatever the profile's features. A small value says the library texts differ from the book by their text alone."""

from __future__ import annotations

import numpy as np

NEIGHBOURS = 5


def outlier_scores(profiles: np.ndarray, neighbours: int = NEIGHBOURS) -> np.ndarray:
    """Each row's mean distance to its ``neighbours`` nearest other rows, the columns standardized over the rows."""
    X = np.asarray(profiles, dtype=np.float64)
    sd = X.std(axis=0)
    Z = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    D = np.sqrt(((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    k = min(neighbours, len(X) - 1)
    return np.sort(D, axis=1)[:, :k].mean(axis=1)


def outlier_p(book, library, neighbours: int = NEIGHBOURS) -> float:
    """The conformal p-value of ``book``'s profile among the ``library`` profiles (at least one)."""
    scores = outlier_scores(np.vstack([book, *library]), neighbours)
    return float((1 + (scores[1:] >= scores[0]).sum()) / len(scores))
