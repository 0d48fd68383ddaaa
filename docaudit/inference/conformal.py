"""Conformal p-values: how a new document's score ranks among known non-members' scores (docs/methods.md,
"Per-document p-values in predict"). Scores: higher = more member-like; ties count against the document.

- :func:`conformal_p`: the rank p-value ``(1 + #{null scores >= score}) / (n + 1)``. Valid (``P(p <= a) <= a``)
  whenever the score and the ``n`` null scores are exchangeable under H0 (Vovk, Gammerman & Shafer 2005).
- :class:`FullConformal`: full conformal with out-of-bag scores. For each new document the estimator (a bagged
  forest) is fit again on the training rows with the document added as a non-member, at a position among the
  non-members drawn independently of the data; every non-member's score and the document's are their out-of-bag
  scores in that one fit. Under H0 ("the document is exchangeable with the known non-members") the ``n + 1``
  scores come from one fit that places the document at a uniformly random non-member position, so the document's
  rank is uniform and the p-value is valid in finite samples for any fitting procedure (Vovk et al. 2005, ch. 2;
  Lei et al. 2018, Theorem 2.1). Smallest attainable: ``1 / (n + 1)``. Given each training row's length class
  (:func:`length_class`), the document is ranked among the non-members of its own class only (Mondrian
  conformal, Vovk et al. 2005, ch. 4): a point's class is a function of the point, so exchangeability of all
  ``n + 1`` scores gives exchangeability within the class, whatever the scores' dependence on length; the smallest
  attainable p-value is then ``1 / (m + 1)`` for the ``m`` non-members of the class.
- :func:`cross_conformal_p`: cross-conformal (Vovk 2015), each fold's model scoring the document against the
  non-members it held out. Not a valid p-value in general: its rate under H0 can exceed the level by a factor of
  about 2 plus an additive term (Barber et al. 2021; Gasparin & Ramdas 2025). docaudit uses it only where a p-value
  that errs small errs on the safe side (the blind gate: a smaller blind p-value only makes "inconclusive" more
  frequent).
"""

from __future__ import annotations

import hashlib

import numpy as np
from sklearn.base import BaseEstimator, clone

from docaudit.errors import DocauditError


def conformal_p(score: float, null_scores) -> float:
    """``(1 + number of null scores at least score) / (n + 1)``: the conformal p-value of ``score`` against the
    ``n`` ``null_scores``, H0 "exchangeable with them"."""
    null = np.asarray(null_scores, dtype=np.float64).ravel()
    if not np.isfinite(null).all() or not np.isfinite(score):
        raise DocauditError("conformal scores contain NaN or infinite values")
    return float((1.0 + (null >= score).sum()) / (len(null) + 1.0))


def length_class(n_tokens: int, cap: int | None) -> int:
    """The length class of a document of ``n_tokens`` queried tokens, fixed before any document is seen: ``-1``
    for a document read to the token budget ``cap`` (every longer document is cut there, so all of them are read
    alike), else ``floor(log2(n_tokens))`` (lengths within a factor of two)."""
    if cap is not None and n_tokens >= cap:
        return -1
    return int(np.floor(np.log2(max(int(n_tokens), 1))))


def insert_position(n_nonmembers: int, seed: int, key: str) -> int:
    """Where among the ``n_nonmembers + 1`` non-member slots the judged document goes: uniform, from ``seed`` and
    ``key`` (the document's SHA-256), so a document's p-value does not depend on the other documents of the run."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int(np.random.default_rng(list(digest[:16])).integers(n_nonmembers + 1))


class FullConformal(BaseEstimator):
    """Full-conformal p-values from out-of-bag scores (see the module docstring), scikit-learn style:
    ``fit(X, y)`` keeps the training rows (labels 1 member, 0 known non-member); ``p_values(X_new, keys)`` refits
    ``estimator`` (a bagged ensemble, ``oob_score`` turned on) once per new row and returns the rows' p-values,
    keeping each refit's scores in ``scores_`` (the document's, then the non-members', in training order)."""

    def __init__(self, estimator, seed: int = 0):
        self.estimator = estimator
        self.seed = seed

    def fit(self, X, y, classes=None) -> FullConformal:
        """Keep the training rows; ``classes``: each row's length class (:func:`length_class`), None to rank a
        document among every non-member."""
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y)
        if X.ndim != 2 or len(X) != len(y) or not set(np.unique(y)) <= {0, 1}:
            raise DocauditError("full conformal needs a 2-d feature matrix and one 0/1 label per row")
        if not np.isfinite(X).all():
            raise DocauditError("full conformal features contain NaN or infinite values")
        if (y == 0).sum() == 0 or (y == 1).sum() == 0:
            raise DocauditError("full conformal needs known members and known non-members")
        order = np.r_[np.flatnonzero(y == 1), np.flatnonzero(y == 0)]
        self.X_, self.y_ = X[order], y[order]
        self.n_members_, self.n_nonmembers_ = int((y == 1).sum()), int((y == 0).sum())
        self.classes_ = None if classes is None else np.asarray(classes)[order][self.n_members_ :]
        return self

    def refit_scores(self, x, key: str) -> tuple[float, np.ndarray]:
        """Out-of-bag scores of the row ``x`` and of every known non-member, in one fit with ``x`` added as a
        non-member at its position (:func:`insert_position`)."""
        at = self.n_members_ + insert_position(self.n_nonmembers_, self.seed, key)
        X = np.insert(self.X_, at, np.asarray(x, dtype=np.float64), axis=0)
        y = np.insert(self.y_, at, 0)
        model = clone(self.estimator).set_params(oob_score=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            model.fit(X, y)
            oob = np.asarray(model.oob_decision_function_, dtype=np.float64)[:, list(model.classes_).index(1)]
        oob = np.where(np.isfinite(oob), oob, 0.5)  # a row no tree left out (only with very few trees): 0.5
        nonmembers = np.r_[oob[self.n_members_ : at], oob[at + 1 :]]
        return float(oob[at]), nonmembers

    def p_values(self, X_new, keys, classes=None) -> np.ndarray:
        """One p-value per row of ``X_new`` (``keys``: each row's SHA-256, which fixes its position); with
        ``classes`` (each row's length class, the training rows' given to :meth:`fit`) ranked among the
        non-members of its class, NaN where none is (``compared_``: how many each row was ranked among)."""
        X_new = np.atleast_2d(np.asarray(X_new, dtype=np.float64))
        if X_new.shape[1:] != self.X_.shape[1:] or not np.isfinite(X_new).all():
            raise DocauditError(
                f"full conformal: {X_new.shape[1]} features per document, the training rows have {self.X_.shape[1]}"
            )
        self.scores_ = [self.refit_scores(x, key) for x, key in zip(X_new, keys)]
        if classes is None or self.classes_ is None:
            self.compared_ = [self.n_nonmembers_] * len(self.scores_)
            return np.array([conformal_p(s, null) for s, null in self.scores_])
        kept = [self.classes_ == c for c in classes]
        self.compared_ = [int(k.sum()) for k in kept]
        return np.array([conformal_p(s, null[k]) if k.any() else np.nan for (s, null), k in zip(self.scores_, kept)])


def cross_conformal_p(book_scores, nonmember_scores, factor: int = 1) -> np.ndarray:
    """One cross-conformal p-value per document (not valid in general: see the module docstring). ``book_scores``:
    ``[k, n_documents]``, fold ``i``'s classifier's score of each document; ``nonmember_scores``: ``k`` arrays,
    the scores fold ``i``'s classifier gave the non-members it held out. Returns ``min(1, factor * p_cc)`` with
    ``p_cc = (1 + held-out non-members scoring at least as high) / (n + 1)``."""
    book_scores = np.atleast_2d(np.asarray(book_scores, dtype=np.float64))
    folds = [np.asarray(s, dtype=np.float64).ravel() for s in nonmember_scores]
    if len(folds) != book_scores.shape[0]:
        raise DocauditError(f"{book_scores.shape[0]} folds of document scores but {len(folds)} of non-member scores")
    if not all(np.isfinite(s).all() for s in folds) or not np.isfinite(book_scores).all():
        raise DocauditError("conformal scores contain NaN or infinite values")
    n = sum(len(s) for s in folds)
    if n == 0:
        raise DocauditError("no known non-member scores to compare with")
    at_least = sum((s[:, None] >= b[None, :]).sum(axis=0) for s, b in zip(folds, book_scores))
    return np.minimum(1.0, factor * (1.0 + at_least) / (n + 1.0))
