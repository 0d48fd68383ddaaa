"""Model-free ("blind") baselines: how well can the two document sets be told apart without any language model?

Das, Zhang and Tramèr (2024, "Blind Baselines Beat Membership Inference Attacks for Foundation Models") showed
that such model-free classifiers beat published membership attacks on several benchmarks.
If a bag-of-words or a date classifier separates members from non-members, the sets differ by distribution (era,
topic, formatting), and a membership-inference AUC on them says little about training (docs/methods.md, "Blind
baseline"). Every kind is evaluated on the same k-fold chunks as the membership methods
(:func:`docaudit.metrics.chunk_folds`), fitting only on the training chunks.

Each kind is a scikit-learn estimator of texts, :class:`BlindClassifier` (``fit(texts, y)``, ``predict_proba``,
``decision_function``), over a Pipeline whose first step is stateless, so it is computed once for all documents
(:class:`BlindFeatures`) and the rest of the pipeline is fit per fold:

- ``"tfidf"``: word unigrams and bigrams (lowercased) -> the ``max_features`` (50,000) most frequent n-grams among
  those in at least ``min_df`` (2) training documents -> TF-IDF with sublinear tf -> logistic regression.
  N-grams are counted with a hashing vectorizer (2**21 buckets) rather than a fitted vocabulary so that counting
  is done once; the vocabulary (document-frequency filter and top-k) is still chosen on the training fold only.
- ``"nb"``: the same n-gram counts and selection -> multinomial naive Bayes (score: log-odds of membership).
- ``"dates"``: four-digit years 1500-2029 named in the text: counts per decade (log1p), the max and median year,
  the number of year mentions and the share at or after 1919 -> a small random forest.

Long texts are truncated to their first ``max_chars`` characters (default 200,000, about 35,000 words) to keep
the baseline fast; the start of a book (title page, preface, first chapters) is where era and edition cues are
densest, so truncation does not hide a shift. Scores are oriented like every docaudit score: higher = more
member-like (label 1).
"""

from __future__ import annotations

import logging
import re

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import Pipeline

from docaudit.errors import DocauditError
from docaudit.metrics import fold_metrics, summarize
from docaudit.query.progress import shown

log = logging.getLogger(__name__)

KINDS = ("tfidf", "nb", "dates")


DEFAULT_MAX_CHARS = 200_000


HASH_FEATURES = 2**21


BLIND_AUC_ALERT = 0.60  # a blind AUC at or above this means the sets differ by distribution


BLIND_MARGIN = 0.05  # ... as does one within this margin of the best membership AUC


def truncate(texts, max_chars: int | None = DEFAULT_MAX_CHARS) -> list[str]:
    """Each text cut to its first ``max_chars`` characters (None: no cut)."""
    if max_chars is None:
        return list(texts)
    if max_chars <= 0:
        raise DocauditError(f"max_chars must be positive, got {max_chars}")
    return [t[:max_chars] for t in texts]


def ngram_hasher() -> HashingVectorizer:
    """Stateless word unigram+bigram counts (no fitting, so no information flows between folds)."""
    return HashingVectorizer(
        ngram_range=(1, 2),
        lowercase=True,
        n_features=HASH_FEATURES,
        alternate_sign=False,
        norm=None,
        dtype=np.float32,
    )


class DocFreqSelector(TransformerMixin, BaseEstimator):
    """Keep the columns present in at least ``min_df`` training documents, then the ``max_features`` of them with
    the largest total count (the vocabulary rules of scikit-learn's CountVectorizer, for a count matrix)."""

    def __init__(self, min_df: int = 2, max_features: int | None = 50_000):
        self.min_df = min_df
        self.max_features = max_features

    def fit(self, X, y=None):
        X = sparse.csr_matrix(X)
        df = np.asarray((X > 0).sum(axis=0)).ravel()
        cols = np.flatnonzero(df >= self.min_df)
        if self.max_features is not None and len(cols) > self.max_features:
            totals = np.asarray(X[:, cols].sum(axis=0)).ravel()
            top = np.argsort(-totals, kind="stable")[: self.max_features]
            cols = np.sort(cols[top])
        if len(cols) == 0:  # tiny training sets: fall back to every column seen
            cols = np.flatnonzero(df > 0)
        self.columns_ = cols
        return self

    def transform(self, X):
        return sparse.csr_matrix(X)[:, self.columns_]


_YEAR_RE = re.compile(r"(?<![\d.,])(1[5-9]\d\d|20[0-2]\d)(?!\d|[.,]\d)")


_DECADES = np.arange(1500, 2030, 10)


MODERN_YEAR = 1919


def years_mentioned(text: str) -> np.ndarray:
    """Four-digit numbers 1500-2029 standing alone (not part of a longer number or a decimal)."""
    return np.array([int(m.group(1)) for m in _YEAR_RE.finditer(text)], dtype=np.int64)


class YearFeatures(TransformerMixin, BaseEstimator):
    """Per text: log1p counts of years per decade 1500-2020s, max and median year (0 when none), log1p number of
    year mentions, share of mentions >= 1919, and whether any year is named. Stateless."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        rows = []
        for text in X:
            years = years_mentioned(text)
            counts = (
                np.bincount((years - 1500) // 10, minlength=len(_DECADES)) if len(years) else np.zeros(len(_DECADES))
            )
            if len(years):
                extra = [years.max(), np.median(years), np.log1p(len(years)), (years >= MODERN_YEAR).mean(), 1.0]
            else:
                extra = [0.0, 0.0, 0.0, 0.0, 0.0]
            rows.append(np.concatenate([np.log1p(counts), extra]))
        return np.asarray(rows, dtype=np.float64)


def make_pipeline(kind: str, seed: int = 0) -> Pipeline:
    """The full pipeline of one kind; its first step (``"features"``) is stateless."""
    if kind == "tfidf":
        return Pipeline(
            [
                ("features", ngram_hasher()),
                ("select", DocFreqSelector(min_df=2, max_features=50_000)),
                ("tfidf", TfidfTransformer(sublinear_tf=True)),
                ("clf", LogisticRegression(C=10.0, solver="liblinear", dual=True, max_iter=1000, random_state=seed)),
            ]
        )
    if kind == "nb":
        return Pipeline(
            [
                ("features", ngram_hasher()),
                ("select", DocFreqSelector(min_df=2, max_features=50_000)),
                ("clf", MultinomialNB(alpha=1.0)),
            ]
        )
    if kind == "dates":
        return Pipeline(
            [
                ("features", YearFeatures()),
                (
                    "clf",
                    RandomForestClassifier(
                        n_estimators=300, max_depth=5, min_samples_leaf=3, random_state=seed, n_jobs=1
                    ),
                ),
            ]
        )
    raise DocauditError(f"unknown blind baseline kind {kind!r} (choose from {', '.join(KINDS)})")


def _check_labels(labels) -> np.ndarray:
    y = np.asarray(labels).astype(int)
    if not set(np.unique(y)) <= {0, 1}:
        raise DocauditError("labels must be 1 (member) or 0 (non-member)")
    if len(np.unique(y)) < 2:
        raise DocauditError("the training documents hold one class only")
    return y


def _member_scores(model, X) -> np.ndarray:
    """Member-likeness of ``X`` under a fitted model (class 1): log-odds where the model has them."""
    clf = model.steps[-1][1] if isinstance(model, Pipeline) else model
    col = int(np.flatnonzero(clf.classes_ == 1)[0])
    if isinstance(clf, MultinomialNB):  # probabilities saturate on long texts; log-odds stay finite and ranked
        logp = model.predict_log_proba(X)
        return logp[:, col] - logp[:, 1 - col]
    if hasattr(model, "decision_function"):
        d = np.asarray(model.decision_function(X), dtype=np.float64)
        return d if col == 1 else -d
    return model.predict_proba(X)[:, col]


def blind_scores(
    train_texts,
    train_labels,
    test_texts,
    kind: str = "tfidf",
    max_chars: int | None = DEFAULT_MAX_CHARS,
    seed: int = 0,
) -> np.ndarray:
    """Member-likeness scores of ``test_texts`` from a model-free classifier of ``kind`` fit on the training texts
    only (labels: 1 = member, 0 = non-member)."""
    model = BlindClassifier(kind, max_chars, random_state=seed).fit(train_texts, train_labels)
    return model.decision_function(test_texts)


class BlindFeatures:
    """Texts (cut to ``max_chars``) with the stateless first step of each kind's pipeline computed once, on first
    use (the word n-gram counts are shared by ``tfidf`` and ``nb``), so that any number of fits on index subsets
    (the folds, and the inner folds of :mod:`docaudit.methods.beyond_blind`) count nothing twice. ``features[rows]``
    is the view of those texts, sharing the computed steps: what a :class:`BlindClassifier` fits and scores."""

    def __init__(self, texts, max_chars: int | None = DEFAULT_MAX_CHARS):
        self.texts = truncate(texts, max_chars)
        self.max_chars = max_chars
        self._matrices: dict[str, object] = {}
        self._rows: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.texts) if self._rows is None else len(self._rows)

    def __getitem__(self, rows) -> BlindFeatures:
        view = object.__new__(BlindFeatures)
        view.texts, view.max_chars, view._matrices = self.texts, self.max_chars, self._matrices
        index = np.arange(len(self.texts)) if self._rows is None else self._rows
        view._rows = index[np.asarray(rows, dtype=np.intp)]
        return view

    def matrix(self, kind: str):
        """The first step's output for these texts (CSR for the n-gram kinds)."""
        step = make_pipeline(kind).steps[0][1]
        key = "ngrams" if isinstance(step, HashingVectorizer) else kind
        if key not in self._matrices:
            X = step.transform(self.texts)
            self._matrices[key] = sparse.csr_matrix(X) if sparse.issparse(X) else np.asarray(X)
        whole = self._matrices[key]
        return whole if self._rows is None else whole[self._rows]


class BlindClassifier(ClassifierMixin, BaseEstimator):
    """A model-free classifier of texts, one ``kind`` (module docstring): ``fit(texts, y)``, ``predict_proba(texts)``
    and ``decision_function(texts)``, the member-likeness docaudit scores with (log-odds where the classifier has
    them). ``texts`` is a list of strings (cut to ``max_chars``) or a :class:`BlindFeatures` view, whose stateless
    first step is computed once for every fit. ``random_state`` seeds the logistic regression and the forest."""

    def __init__(self, kind: str = "tfidf", max_chars: int | None = DEFAULT_MAX_CHARS, random_state: int = 0):
        self.kind = kind
        self.max_chars = max_chars
        self.random_state = random_state

    def _matrix(self, texts):
        if isinstance(texts, BlindFeatures):
            return texts.matrix(self.kind)
        return BlindFeatures(texts, self.max_chars).matrix(self.kind)

    def fit(self, texts, y):
        y = _check_labels(y)
        X = self._matrix(texts)
        if X.shape[0] != len(y):
            raise DocauditError(f"{X.shape[0]} training texts but {len(y)} labels")
        self.model_ = make_pipeline(self.kind, self.random_state)[1:].fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, texts) -> np.ndarray:
        return self.model_.predict_proba(self._matrix(texts))

    def decision_function(self, texts) -> np.ndarray:
        return _member_scores(self.model_, self._matrix(texts))


def evaluate_blind(
    texts,
    labels,
    folds,
    kinds=KINDS,
    max_chars: int | None = DEFAULT_MAX_CHARS,
    seed: int = 0,
    progress: bool | None = None,
) -> dict:
    """Run each kind on the given folds (``[(train_idx, test_idx), ...]`` from :func:`chunk_folds`). ``texts``: the
    texts, or their :class:`BlindFeatures` (then ``max_chars`` is theirs). ``progress``: a bar of the fits (None:
    as the running call shows progress).

    Returns ``{"kinds": {kind: {"folds": [FoldMetrics, ...], "summary": summarize(...), "scores": ndarray,
    "models": [fitted, ...]}}, "blind_auc": float, "best_kind": str, "max_chars": int | None, "splits": folds}``;
    ``scores`` holds each document's out-of-fold score (NaN for a document in no test fold), ``models`` each fold's
    fitted pipeline as :func:`fit_fold` makes it (reused by what needs the same fits on the same folds), and
    ``blind_auc`` is the largest mean AUC over kinds.
    """
    y = np.asarray(labels).astype(int)
    features = texts if isinstance(texts, BlindFeatures) else BlindFeatures(texts, max_chars)
    if len(features) != len(y):
        raise DocauditError(f"{len(features)} texts but {len(y)} labels")
    kinds = tuple(kinds)
    if not kinds:
        raise DocauditError("no blind baseline kind selected")
    out: dict = {"kinds": {}, "max_chars": features.max_chars, "splits": list(folds)}
    steps = [(kind, i) for kind in kinds for i in range(len(folds))]
    bar = None
    if shown() if progress is None else progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(steps), desc="blind baselines", unit="fold")
    for kind in kinds:
        scores = np.full(len(y), np.nan)
        fold_results, models = [], []
        estimator = BlindClassifier(kind, features.max_chars, random_state=seed)
        for train, test in folds:
            fitted = clone(estimator).fit(features[train], y[train])
            s = fitted.decision_function(features[test])
            scores[test] = s
            fold_results.append(fold_metrics(y[test], s))
            models.append(fitted.model_)
            if bar is not None:
                bar.update(1)
        out["kinds"][kind] = {
            "folds": fold_results,
            "summary": summarize(fold_results),
            "scores": scores,
            "models": models,
        }
        log.info("blind baseline %s: AUC %.3f", kind, out["kinds"][kind]["summary"]["auc_mean"])
    if bar is not None:
        bar.close()
    best = max(kinds, key=lambda k: out["kinds"][k]["summary"]["auc_mean"])
    out["best_kind"] = best
    out["blind_auc"] = out["kinds"][best]["summary"]["auc_mean"]
    return out


def shift_warning(blind_auc: float | None, best_membership_auc: float | None = None) -> str | None:
    """The warning to print when the blind baseline separates the sets (AUC >= 0.60) or reaches within 0.05 of the
    best membership AUC, or above it; None otherwise. Each reason is worded as it is: "above" when the blind AUC
    exceeds the best membership AUC, "within" when it is below it by at most the margin."""
    if blind_auc is None or not np.isfinite(blind_auc):
        return None
    reasons = []
    if blind_auc >= BLIND_AUC_ALERT:
        reasons.append(f"AUC {blind_auc:.3f} >= {BLIND_AUC_ALERT:.2f}")
    if best_membership_auc is not None and np.isfinite(best_membership_auc):
        gap = blind_auc - best_membership_auc
        if gap > 0:
            reasons.append(f"{gap:.3f} above the best membership AUC {best_membership_auc:.3f}")
        elif gap == 0:
            reasons.append(f"equal to the best membership AUC {best_membership_auc:.3f}")
        elif gap >= -BLIND_MARGIN:
            reasons.append(
                f"{-gap:.3f} below, so within {BLIND_MARGIN:.2f} of, the best membership AUC {best_membership_auc:.3f}"
            )
    if not reasons:
        return None
    return (
        f"WARNING: distribution shift. A model-free classifier (no language model) tells the two document sets "
        f"apart with AUC {blind_auc:.3f} ({'; '.join(reasons)}). The sets differ by distribution (era, topic, "
        f"formatting), so a membership AUC on them is not evidence that the model was trained on the members. "
        f"Compare against this baseline, or use sets where membership was assigned at random."
    )


def fitted_on(blind: dict, kind: str, folds) -> list[Pipeline] | None:
    """The fold models of ``kind`` that :func:`evaluate_blind` fit (``blind``, its result) when it ran on the same
    ``folds``, else None."""
    same = len(blind.get("splits", ())) == len(folds) and all(
        np.array_equal(a, c) and np.array_equal(b, d) for (a, b), (c, d) in zip(blind["splits"], folds)
    )
    return blind["kinds"][kind].get("models") if same and kind in blind["kinds"] else None


def fit_fold(features: BlindFeatures, kind: str, labels, train, seed: int = 0) -> Pipeline:
    """The ``kind`` pipeline without its stateless first step (``BlindClassifier.model_``), fit on the texts
    ``train``, kept (saved as data beside a classifier) to score other texts later with :func:`fold_scores`."""
    y = np.asarray(labels).astype(int)
    return BlindClassifier(kind, features.max_chars, random_state=seed).fit(features[train], y[train]).model_


def fold_scores(model: Pipeline, features: BlindFeatures, kind: str, rows=None) -> np.ndarray:
    """Member-likeness of the texts of ``features`` (those at ``rows``, or all) under a :func:`fit_fold` model."""
    X = features.matrix(kind)
    return _member_scores(model, X if rows is None else X[rows])
