"""The meta-classifier (docs/methods.md, "Meta-classifier"): normalization → features → min-max scaling → random
forest in one Pipeline, so every fitted statistic (dictionaries, bin edges, scaling, trees) is learned on training
documents only. Checked against computationalprivacy/document-level-membership-inference
``src/meta_classifier.py`` (``scale_features``: min-max scaling fit on the training features; ``train_RandomForest``:
500 trees, max depth 5, min samples per leaf 3) and ``main.py`` (train on k-1 chunks, test on the held-out one).

With ``norm``/``features`` = "auto" the pipeline is wrapped in an inner cross-validated grid search, so the
configuration is chosen inside each training fold and the outer AUC measures the whole procedure."""
from __future__ import annotations

import json
from zipfile import ZIP_DEFLATED
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler
from tqdm.auto import tqdm

from .cache import atomic_write, atomic_write_text
from .config import MetaConfig
from .errors import DocauditError
from .features import DocumentFeatures
from .metrics import FoldMetrics, chunk_folds, fold_metrics, summarize
from .normalize import TokenNormalizer

CLASSIFIER_FILE = "classifier.skops"
CARD_FILE = "card.json"


def as_documents(stats) -> np.ndarray:
    """TokenStats in a 1-d object array, the X that scikit-learn's splitters and searches index."""
    out = np.empty(len(stats), dtype=object)
    out[:] = list(stats)
    return out


def build_pipeline(meta: MetaConfig, norm: str = "max_tf", features: str = "hist") -> Pipeline:
    return Pipeline([
        ("normalize", TokenNormalizer(method=norm, eps=meta.maxnorm_eps)),
        ("features", DocumentFeatures(kind=features, bins=meta.bins, token_count=meta.agg_token_count)),
        ("scale", MinMaxScaler()),
        ("forest", RandomForestClassifier(n_estimators=meta.n_estimators, max_depth=meta.max_depth,
                                          min_samples_leaf=meta.min_samples_leaf, random_state=meta.seed,
                                          n_jobs=meta.n_jobs)),
    ])


def build_estimator(meta: MetaConfig):
    """A single pipeline, or an inner-CV search over the candidate (normalization, features) pairs."""
    candidates = meta.candidates()
    if len(candidates) == 1:
        return build_pipeline(meta, *candidates[0])
    grid = [{"normalize__method": [n], "features__kind": [f]} for n, f in candidates]
    inner = StratifiedKFold(n_splits=meta.inner_folds, shuffle=True, random_state=meta.seed)
    return GridSearchCV(build_pipeline(meta), grid, cv=inner, scoring="roc_auc", refit=True)


def chosen(estimator) -> str:
    """The (normalization, features) configuration a fitted estimator uses, e.g. ``max_tf+hist``."""
    pipe = getattr(estimator, "best_estimator_", estimator)
    return f"{pipe.named_steps['normalize'].method}+{pipe.named_steps['features'].kind}"


def fit(stats, labels, meta: MetaConfig):
    """Fit the meta-classifier on all given documents."""
    labels = np.asarray(labels)
    _check_inner(labels, meta)
    return build_estimator(meta).fit(as_documents(stats), labels)


def _check_inner(labels, meta: MetaConfig) -> None:
    if len(meta.candidates()) > 1 and min((labels == 0).sum(), (labels == 1).sum()) < meta.inner_folds:
        raise DocauditError(
            f"too few documents for --norm/--features auto: the inner cross-validation needs {meta.inner_folds} "
            "members and non-members in every training fold (use more documents, fewer --folds, or fix the config)"
        )


@dataclass
class Evaluation:
    """Out-of-fold results of k-fold chunk evaluation."""

    labels: np.ndarray
    scores: np.ndarray
    fold_of: np.ndarray
    folds: list[FoldMetrics]
    configs: list[str]

    @property
    def summary(self) -> dict:
        return summarize(self.folds)


def evaluate(stats, labels, meta: MetaConfig, folds=None, progress: bool = True) -> Evaluation:
    """Train on k-1 chunks, score the held-out chunk, for every fold; scores are P(member)."""
    labels = np.asarray(labels)
    folds = folds or chunk_folds(labels, meta.folds, meta.seed)
    X = as_documents(stats)
    scores, fold_of, results, configs = np.zeros(len(labels)), np.zeros(len(labels), dtype=int), [], []
    for i, (train, test) in enumerate(tqdm(folds, desc="folds", disable=not progress)):
        _check_inner(labels[train], meta)
        est = clone(build_estimator(meta)).fit(X[train], labels[train])
        scores[test] = est.predict_proba(X[test])[:, 1]
        fold_of[test] = i
        results.append(fold_metrics(labels[test], scores[test]))
        configs.append(chosen(est))
    return Evaluation(labels, scores, fold_of, results, configs)


def trusted_types() -> list[str]:
    """Every type a saved docaudit classifier may contain; anything else in a file is refused."""
    return [
        "docaudit.normalize.TokenNormalizer",
        "docaudit.features.DocumentFeatures",
        "sklearn.pipeline.Pipeline",
        "sklearn.preprocessing._data.MinMaxScaler",
        "sklearn.ensemble._forest.RandomForestClassifier",
        "sklearn.tree._classes.DecisionTreeClassifier",
        "sklearn.tree._tree.Tree",
        "numpy.dtype",
        "numpy.ndarray",
        "numpy.float64",
        "numpy.int64",
        "numpy.random.mtrand.RandomState",
        "builtins.slice",
    ]


def save_classifier(directory: Path, estimator, card: dict) -> None:
    """Write the fitted pipeline (skops, no pickle) and its card (JSON) atomically into ``directory``."""
    import skops.io as sio

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    pipe = getattr(estimator, "best_estimator_", estimator)
    atomic_write(directory / CLASSIFIER_FILE, lambda f: f.write(sio.dumps(pipe, compression=ZIP_DEFLATED)))
    atomic_write_text(directory / CARD_FILE, json.dumps(card, indent=2, default=_jsonable))


def load_classifier(directory: Path):
    """The saved pipeline and its card. Refuses a file holding any type outside ``trusted_types()``, so loading
    never runs code from an untrusted file."""
    import skops.io as sio

    directory = Path(directory)
    path = directory / CLASSIFIER_FILE
    if not path.is_file() or not (directory / CARD_FILE).is_file():
        raise DocauditError(f"no docaudit classifier in {directory} (expected {CLASSIFIER_FILE} and {CARD_FILE})")
    data = path.read_bytes()
    try:
        untrusted = set(sio.get_untrusted_types(data=data)) - set(trusted_types())
        if untrusted:
            raise DocauditError(f"refusing to load {path}: it contains untrusted types {sorted(untrusted)}")
        pipe = sio.loads(data, trusted=trusted_types())
    except DocauditError:
        raise
    except Exception as e:
        raise DocauditError(f"cannot read classifier {path}: {type(e).__name__}: {e}") from e
    if not isinstance(pipe, Pipeline):
        raise DocauditError(f"refusing to load {path}: not a docaudit classifier")
    card = json.loads((directory / CARD_FILE).read_text())
    return pipe, card


def _jsonable(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    raise TypeError(type(obj).__name__)
