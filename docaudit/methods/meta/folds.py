"""The fold models a classifier keeps for per-document p-values (docs/methods.md, "Per-book p-values"): each
fold's meta-classifier and each fold's blind model, saved as data beside the classifier and loaded with the same
checks (an exact allow-list of types, then an exact shape), so loading never runs code from the file."""

from __future__ import annotations

from pathlib import Path
from zipfile import ZIP_DEFLATED

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import Pipeline
from sklearn.tree import DecisionTreeClassifier

from docaudit.errors import DocauditError
from docaudit.io import atomic_write
from docaudit.methods.blind import DocFreqSelector
from docaudit.methods.meta.classifier import one_job
from docaudit.methods.meta.persistence import (
    ALLOWED_NODES,
    check_pipeline,
    forest_problem,
    read_file,
    trusted_types,
    untrusted_types,
)

FOLDS_FILE = "folds.skops"  # each fold's meta-classifier (an older classifier: these and the blind models)
BLIND_FILE = "blind_folds.skops"  # each fold's blind model, apart: all that ``predict`` reads

# each blind kind's pipeline without its stateless first step (``methods.blind.fit_fold``)
BLIND_TAILS = {
    "tfidf": (("select", DocFreqSelector), ("tfidf", TfidfTransformer), ("clf", LogisticRegression)),
    "nb": (("select", DocFreqSelector), ("clf", MultinomialNB)),
    "dates": (("clf", RandomForestClassifier),),
}

BLIND_CLASSES = (DocFreqSelector, TfidfTransformer, LogisticRegression, MultinomialNB)
FOLD_NODES = {
    **ALLOWED_NODES,
    "ObjectNode": ALLOWED_NODES["ObjectNode"] | {f"{c.__module__}.{c.__qualname__}" for c in BLIND_CLASSES},
}


def save_folds(directory: Path, meta: list[Pipeline], blind: list[Pipeline]) -> None:
    """Write each fold's fitted meta-classifier pipeline and blind model (skops, no pickle) into ``directory``, in
    two files, so that ``predict`` reads only the blind models it needs."""
    import skops.io as sio

    for name, models in ((FOLDS_FILE, meta), (BLIND_FILE, blind)):
        data = sio.dumps(list(models), compression=ZIP_DEFLATED)
        atomic_write(Path(directory) / name, lambda f, data=data: f.write(data))


def _read_models(path: Path, k: int, what: str) -> object:
    """The checked contents of a fold-models file: every type allowed, then loaded as data (a list of ``k``
    models; an older classifier's ``folds.skops``: a dict of ``k`` meta-classifiers and ``k`` blind models)."""
    import skops.io as sio

    data = read_file(path, "folds")
    untrusted = untrusted_types(data, path, FOLD_NODES)
    if untrusted:
        raise DocauditError(
            f"refusing to load {path}: it contains untrusted types {sorted(untrusted)} "
            "(it holds only docaudit's fold models)"
        )
    try:
        models = sio.loads(data, trusted=trusted_types(FOLD_NODES))
    except Exception as e:
        raise DocauditError(f"cannot read fold models {path}: {type(e).__name__}: {e}") from e
    combined = type(models) is dict and set(models) == {"meta", "blind"}
    parts = [models["meta"], models["blind"]] if combined else [models]
    if not all(type(x) is list and len(x) == k for x in parts):
        raise DocauditError(f"refusing to load {path}: expected {k} {what}")
    return models


def _check_kind(directory: Path, blind_kind: str) -> None:
    if blind_kind not in BLIND_TAILS:
        raise DocauditError(f"classifier card in {directory}: unknown blind kind {blind_kind!r}")


def _blinds(models: list, blind_kind: str, path: Path) -> list[Pipeline]:
    for model in models:
        check_blind(model, blind_kind, path)
    return [one_job(model) for model in models]


def load_blind_folds(directory: Path, blind_kind: str, k: int) -> list[Pipeline]:
    """The ``k`` fold blind models of kind ``blind_kind`` saved in ``directory`` (from ``blind_folds.skops``; from
    an older classifier's ``folds.skops``), refused unless every type in the file is allowed and every model has
    the expected shape."""
    _check_kind(directory, blind_kind)
    path = Path(directory) / BLIND_FILE
    if path.is_file():
        return _blinds(_read_models(path, k, "fold blind models"), blind_kind, path)
    return load_folds(directory, blind_kind, k)[1]


def load_folds(directory: Path, blind_kind: str, k: int) -> tuple[list[Pipeline], list[Pipeline]]:
    """The ``k`` fold meta-classifiers and ``k`` fold blind models of kind ``blind_kind`` saved in ``directory``,
    refused unless every type in the files is allowed and every model has the expected shape."""
    _check_kind(directory, blind_kind)
    path = Path(directory) / FOLDS_FILE
    if not path.is_file():
        raise DocauditError(f"no fold models in {directory} (expected {FOLDS_FILE})")
    models = _read_models(path, k, "fold meta-classifiers")
    if type(models) is dict:
        metas, blinds = models["meta"], _blinds(models["blind"], blind_kind, path)
    else:
        blind_path = Path(directory) / BLIND_FILE
        if not blind_path.is_file():
            raise DocauditError(f"no fold blind models in {directory} (expected {BLIND_FILE})")
        metas = models
        blinds = _blinds(_read_models(blind_path, k, "fold blind models"), blind_kind, blind_path)
    for pipe in metas:
        check_pipeline(pipe, path)
    return [one_job(pipe) for pipe in metas], blinds


def check_blind(model: object, kind: str, path: Path) -> None:
    """Refuse anything but a fitted blind model of ``kind``: its steps, in order, of exactly the expected classes."""
    steps = getattr(model, "steps", None)
    ok = (
        type(model) is Pipeline
        and isinstance(steps, list)
        and getattr(model, "memory", None) is None
        and [(name, type(step)) for name, step in steps] == list(BLIND_TAILS[kind])
    )
    if ok:
        clf = steps[-1][1]
        ok = isinstance(getattr(clf, "classes_", None), np.ndarray) and list(clf.classes_) == [0, 1]
        if isinstance(clf, RandomForestClassifier):
            trees = getattr(clf, "estimators_", None)
            ok = ok and isinstance(trees, list) and len(trees) > 0
            ok = ok and all(type(t) is DecisionTreeClassifier for t in trees)
    if not ok:
        raise DocauditError(
            f"refusing to load {path}: not a docaudit blind model of kind {kind} (expected the steps "
            f"{' -> '.join(f'{n} ({c.__name__})' for n, c in BLIND_TAILS[kind])})"
        )
    problem = blind_problem(model)
    if problem is not None:
        raise DocauditError(f"refusing to load {path}: a blind model of kind {kind} is malformed ({problem})")


def blind_problem(model: Pipeline) -> str | None:
    """What makes a blind model's fitted state unusable, in words, or None: every fitted array of numbers finite,
    selected columns non-negative integers, and a forest's trees sound (``persistence.forest_problem``)."""
    for name, step in model.steps:
        for attr, value in vars(step).items():
            if attr.endswith("_") and isinstance(value, np.ndarray) and value.dtype.kind == "f":
                if not np.isfinite(value).all():
                    return f"{name}.{attr} holds values that are not finite"
        columns = getattr(step, "columns_", None)
        if isinstance(step, DocFreqSelector) and not (
            isinstance(columns, np.ndarray)
            and columns.ndim == 1
            and columns.dtype.kind in "iu"
            and (columns >= 0).all()
        ):
            return f"{name}.columns_ is not a list of column indices"
        if isinstance(step, RandomForestClassifier):
            width = getattr(step, "n_features_in_", None)
            if not isinstance(width, (int, np.integer)) or width < 1:
                return f"{name} has no number of features"
            return forest_problem(step, width)
    return None


def conformal_card(card: dict, directory: Path) -> dict | None:
    """The card's ``conformal`` section, checked (it comes from a file): per fold the held-out non-members' scores
    under the meta-classifier and under the blind model, the blind kind and its text cut, the fewest and (since
    it is recorded) the most tokens of a known non-member. None for a classifier saved before the section existed."""
    section = card.get("conformal")
    if section is None:
        return None
    where = f"classifier card in {directory}: conformal"

    def score_lists(key):
        lists = section.get(key) if isinstance(section, dict) else None
        ok = isinstance(lists, list) and len(lists) >= 2
        ok = ok and all(isinstance(s, list) and all(isinstance(v, (int, float)) for v in s) for s in lists)
        if not ok or not np.isfinite(np.concatenate([np.asarray(s, dtype=float) for s in lists])).all():
            raise DocauditError(f"{where}.{key} must be a list of per-fold lists of finite numbers")
        return lists

    meta, blind = score_lists("nonmember_scores"), score_lists("blind_nonmember_scores")
    if [len(s) for s in meta] != [len(s) for s in blind] or sum(map(len, meta)) == 0:
        raise DocauditError(f"{where}: the meta and blind non-member scores must hold the same non-members")
    if section.get("blind_kind") not in BLIND_TAILS:
        raise DocauditError(f"{where}.blind_kind must be one of {', '.join(BLIND_TAILS)}")
    cut = section.get("blind_max_chars")
    if cut is not None and (not isinstance(cut, int) or isinstance(cut, bool) or cut <= 0):
        raise DocauditError(f"{where}.blind_max_chars must be a positive integer or null")
    fewest = section.get("nonmember_tokens_min")
    if not isinstance(fewest, int) or isinstance(fewest, bool) or fewest < 0:
        raise DocauditError(f"{where}.nonmember_tokens_min must be a non-negative integer")
    most = section.get("nonmember_tokens_max", fewest)
    if not isinstance(most, int) or isinstance(most, bool) or most < fewest:
        raise DocauditError(f"{where}.nonmember_tokens_max must be an integer at least nonmember_tokens_min")
    return section
