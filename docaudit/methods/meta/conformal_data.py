"""What ``predict``'s full-conformal p-values need from training (docs/methods.md, "Per-document p-values in
predict"), saved as data beside the classifier (``conformal.skops``) and loaded with the classifier's checks.

The representation (normalization dictionary, histogram edges, scaling) of the chosen configuration is fit on the
known members only, so it treats the known non-members and a judged document alike; the file holds it (as the
first steps of a meta-classifier pipeline whose forest, fit on all training rows, is the template of every
refit), the feature rows of every training document and their labels."""

from __future__ import annotations

import os
from pathlib import Path
from zipfile import ZIP_DEFLATED

import numpy as np
from sklearn.base import clone
from sklearn.pipeline import Pipeline

from docaudit.errors import DocauditError
from docaudit.inference.conformal import FullConformal, length_class
from docaudit.io import atomic_write
from docaudit.methods.meta.classifier import as_documents
from docaudit.methods.meta.persistence import check_pipeline, read_file, trusted_types, untrusted_types

CONFORMAL_FILE = "conformal.skops"


def fit_conformal_data(stats, labels, estimator) -> dict:
    """The chosen configuration of ``estimator`` (a fitted pipeline or search) refit with its representation on
    the members of ``stats`` and its forest on every document's features: ``{"pipeline", "features", "labels",
    "tokens"}`` (each document's queried tokens, for its length class)."""
    labels = np.asarray(labels).astype(np.int64)
    pipe = clone(getattr(estimator, "best_estimator_", estimator))
    representation = Pipeline(pipe.steps[:-1])
    representation.fit(as_documents([s for s, y in zip(stats, labels) if y == 1]))
    features = np.asarray(representation.transform(as_documents(stats)), dtype=np.float64)
    pipe.steps[-1][1].fit(features, labels)
    tokens = np.array([s.n_tokens for s in stats], dtype=np.int64)
    return {"pipeline": pipe, "features": features, "labels": labels, "tokens": tokens}


def save_conformal(directory: Path, data: dict) -> None:
    """Write ``data`` (:func:`fit_conformal_data`) into ``directory`` as skops, no pickle."""
    import skops.io as sio

    payload = sio.dumps(dict(data), compression=ZIP_DEFLATED)
    atomic_write(Path(directory) / CONFORMAL_FILE, lambda f: f.write(payload))


def load_conformal(directory: Path) -> dict | None:
    """The saved conformal data of the classifier in ``directory``, refused unless every type is allowed and the
    pieces fit together; None when the folder has none (a classifier written before it existed)."""
    import skops.io as sio

    path = Path(directory) / CONFORMAL_FILE
    if not os.path.lexists(path):  # anything there (a FIFO, a link) is read, and refused, as the file
        return None
    data = read_file(path, "conformal")
    untrusted = untrusted_types(data, path)
    if untrusted:
        raise DocauditError(f"refusing to load {path}: it contains untrusted types {sorted(untrusted)}")
    try:
        loaded = sio.loads(data, trusted=trusted_types())
    except Exception as e:
        raise DocauditError(f"cannot read {path}: {type(e).__name__}: {e}") from e
    if type(loaded) is not dict or set(loaded) - {"tokens"} != {"pipeline", "features", "labels"}:
        raise DocauditError(f"refusing to load {path}: expected a pipeline, feature rows, labels (and token counts)")
    check_pipeline(loaded["pipeline"], path)
    X, y = loaded["features"], loaded["labels"]
    width = loaded["pipeline"].steps[-1][1].n_features_in_
    ok = isinstance(X, np.ndarray) and isinstance(y, np.ndarray) and X.ndim == 2 and X.shape[1] == width
    ok = ok and y.ndim == 1 and len(y) == len(X) and X.dtype.kind == "f" and bool(np.isfinite(X).all())
    ok = ok and y.dtype.kind in "iu" and set(np.unique(y).tolist()) == {0, 1}
    tokens = loaded.get("tokens")
    ok = ok and (tokens is None or (isinstance(tokens, np.ndarray) and tokens.shape == y.shape))
    ok = ok and (tokens is None or (tokens.dtype.kind in "iu" and bool((tokens >= 0).all())))
    if not ok:
        raise DocauditError(f"refusing to load {path}: its feature rows and labels do not fit its pipeline")
    return loaded


def conformal_predictor(data: dict, seed: int, cap: int | None) -> tuple[Pipeline, FullConformal]:
    """The representation that turns TokenStats into feature rows, and the fitted :class:`FullConformal` whose
    refits copy the saved forest's settings, with the training rows' length classes at the token budget ``cap``
    where the data hold their token counts."""
    pipe = data["pipeline"]
    forest = clone(pipe.steps[-1][1])
    tokens = data.get("tokens")
    classes = None if tokens is None else [length_class(int(n), cap) for n in tokens]
    return Pipeline(pipe.steps[:-1]), FullConformal(forest, seed).fit(data["features"], data["labels"], classes)


def conformal_p_values(data: dict, stats, keys, seed: int, cap: int | None) -> tuple[list, list[int]]:
    """Full-conformal p-values of the documents ``stats`` (``keys``: their SHA-256) against the known non-members
    of their length class (every known non-member for data saved without token counts; None where none is of the
    class), and how many each was ranked among."""
    representation, predictor = conformal_predictor(data, seed, cap)
    rows = representation.transform(as_documents(stats))
    matched = "tokens" in data
    classes = [length_class(s.n_tokens, cap) for s in stats] if matched else None
    p = predictor.p_values(rows, keys, classes)
    return [None if np.isnan(v) else float(v) for v in p], predictor.compared_
