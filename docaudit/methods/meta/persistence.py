"""Saving and loading a meta-classifier as data: skops with an exact allow-list, an exact pipeline shape and a
checked card."""

from __future__ import annotations

import io
import json
import re
import typing
import zipfile
import zlib
from dataclasses import asdict
from pathlib import Path
from zipfile import ZIP_DEFLATED

import numpy as np
import sklearn
from sklearn.ensemble import RandomForestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.tree import DecisionTreeClassifier

from docaudit.config import FEATURES, NORMS, ModelConfig, QueryConfig
from docaudit.errors import DocauditError
from docaudit.io import atomic_write, atomic_write_text
from docaudit.methods.meta.classifier import one_job
from docaudit.methods.meta.features import PERCENTILES, DocumentFeatures
from docaudit.methods.meta.normalize import TokenNormalizer
from docaudit.untrusted import inflate_problem, load_untrusted_json, members_problem, read_untrusted

# cards written before the ``normalize_chars`` field existed were trained on character-normalized text
CARD_NORMALIZE_CHARS_BEFORE_FIELD = True
CLASSIFIER_FILE = "classifier.skops"
# where docaudit 0.1 kept the pipeline's own estimators (before the package was split into layers)
FLAT_LAYOUT_MODULES = ("docaudit.normalize.", "docaudit.features.")


CARD_FILE = "card.json"


# What a saved docaudit classifier may contain, per skops node kind: the pipeline's own classes and the plain
# values they hold. Anything else (even types skops trusts by default, such as DummyClassifier or a
# FunctionTransformer of a numpy function) is refused before loading.
PIPELINE_STEPS = (
    ("normalize", TokenNormalizer),
    ("features", DocumentFeatures),
    ("scale", MinMaxScaler),
    ("forest", RandomForestClassifier),
)


_PLAIN = {f"builtins.{t}" for t in ("str", "int", "float", "bool", "NoneType")}


_NUMPY = {f"numpy.{t}" for t in ("ndarray", "int64", "int32", "float64", "float32", "bool", "bool_", "intp")}


ALLOWED_NODES = {
    "ObjectNode": {
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in (Pipeline, *(cls for _, cls in PIPELINE_STEPS), DecisionTreeClassifier)
    },
    "TreeNode": {"sklearn.tree._tree.Tree"},
    "DictNode": {"builtins.dict"},
    "ListNode": {"builtins.list"},
    "TupleNode": {"builtins.tuple"},
    "JsonNode": _PLAIN,
    "TypeNode": _PLAIN | _NUMPY,
    "NdArrayNode": _NUMPY,
}


REQUIRED_CARD_FIELDS = {
    "model_identity": str,
    "model_config": dict,
    "query": dict,
    "raw": bool,
    "pooled_bootstrap_95": dict,
    "sklearn_version": str,
    "skops_version": str,
    "configuration": str,
}


def trusted_types(allowed: dict = ALLOWED_NODES) -> list[str]:
    """The types outside skops' defaults that a docaudit classifier holds (passed to ``skops.io.loads``);
    ``allowed``: the allow-list of the file (the classifier's by default)."""
    return sorted(set().union(*allowed.values()) - _PLAIN - {"builtins.dict", "builtins.list", "builtins.tuple"})


def library_versions() -> dict:
    """The scikit-learn and skops versions that write a classifier, recorded in its card."""
    import skops

    return {"sklearn_version": sklearn.__version__, "skops_version": skops.__version__}


def save_classifier(directory: Path, pipe: Pipeline, card: dict) -> None:
    """Write the fitted pipeline (skops, no pickle) and its card (JSON) atomically into ``directory``."""
    import skops.io as sio

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write(directory / CLASSIFIER_FILE, lambda f: f.write(sio.dumps(pipe, compression=ZIP_DEFLATED)))
    atomic_write_text(directory / CARD_FILE, json.dumps(card, indent=2, default=_jsonable))


def load_classifier(directory: Path) -> tuple[Pipeline, dict]:
    """The saved pipeline and its card, checked before anything is built from them: the card's fields and types,
    the library versions that wrote it, and every type in the file (only docaudit's pipeline shape is accepted),
    so loading never runs code from an untrusted file."""
    import skops.io as sio

    directory = Path(directory)
    path = directory / CLASSIFIER_FILE
    if not path.is_file() or not (directory / CARD_FILE).is_file():
        raise DocauditError(f"no docaudit classifier in {directory} (expected {CLASSIFIER_FILE} and {CARD_FILE})")
    card = read_card(directory / CARD_FILE)
    check_versions(card, directory)
    data = read_file(path, "classifier")
    untrusted = untrusted_types(data, path)
    if untrusted and all(u.startswith(FLAT_LAYOUT_MODULES) for u in untrusted):
        raise DocauditError(
            f"cannot load {path}: it was written by docaudit 0.1, whose estimators lived in modules that no longer "
            "exist; train the classifier again with this version"
        )
    if untrusted:
        raise DocauditError(
            f"refusing to load {path}: it contains untrusted types {sorted(untrusted)} "
            "(a docaudit classifier holds only its own pipeline)"
        )
    try:
        pipe = sio.loads(data, trusted=trusted_types())
    except Exception as e:
        raise DocauditError(f"cannot read classifier {path}: {type(e).__name__}: {e}") from e
    check_pipeline(pipe, path)
    normalize, features = pipe.steps[0][1], pipe.steps[1][1]
    if card["configuration"] != f"{normalize.method}+{features.kind}":
        raise DocauditError(
            f"refusing to load {directory}: its card names the configuration {card['configuration']}, but the "
            f"classifier uses {normalize.method}+{features.kind}"
        )
    return one_job(pipe), card


def read_file(path: Path, what: str) -> bytes:
    """The bytes of a saved ``what`` (``classifier``, ``folds``, ``conformal``: a kind of ``READ_LIMITS``), a regular
    file within its size limit only: anything else is refused on one line rather than waited on or read."""
    try:
        return read_untrusted(path, what)
    except OSError as e:
        raise DocauditError(f"cannot read {what} {path}: {e.strerror or e}") from None


def untrusted_types(data: bytes, path: Path, allowed: dict = ALLOWED_NODES) -> set[str]:
    """Every node of the skops file whose kind or type is outside ``allowed`` (the classifier's allow-list by
    default), read from its schema."""
    if not data:
        raise DocauditError(f"cannot read classifier {path}: the file is empty")
    try:
        problem = members_problem(io.BytesIO(data), len(data))
        if problem is not None:
            raise DocauditError(f"refusing to load {path}: {problem}")
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            problem = inflate_problem(archive, len(data))
            if problem is not None:
                raise DocauditError(f"refusing to load {path}: {problem} (a decompression bomb?)")
            schema = json.loads(archive.read("schema.json"))
    except (zipfile.BadZipFile, KeyError, ValueError, RecursionError, OSError, EOFError, zlib.error) as e:
        reason = f"{type(e).__name__}: {str(e)[:200]}"
        raise DocauditError(f"cannot read classifier {path}: not a skops file ({reason})") from None
    found, stack = set(), [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if "__loader__" in node or "__class__" in node:
                name = f"{node.get('__module__')}.{node.get('__class__')}"
                if name not in allowed.get(node.get("__loader__"), ()):
                    found.add(f"{name} ({node.get('__loader__')})")
            stack.extend(node.values())
    return found


def check_pipeline(pipe: object, path: Path) -> None:
    """Refuse anything but docaudit's pipeline: its four steps, in order, of exactly the expected classes."""
    steps = getattr(pipe, "steps", None)
    ok = (
        type(pipe) is Pipeline
        and isinstance(steps, list)
        and getattr(pipe, "memory", None) is None
        and [(name, type(step)) for name, step in steps] == list(PIPELINE_STEPS)
    )
    if ok:
        normalize, features, _, forest = (step for _, step in steps)
        trees = getattr(forest, "estimators_", None)
        ok = (
            getattr(normalize, "method", None) in NORMS
            and getattr(features, "kind", None) in FEATURES
            and isinstance(trees, list)
            and len(trees) > 0
            and all(type(tree) is DecisionTreeClassifier for tree in trees)
        )
    if not ok:
        raise DocauditError(
            f"refusing to load {path}: not a docaudit classifier (expected the pipeline "
            f"{' -> '.join(f'{n} ({c.__name__})' for n, c in PIPELINE_STEPS)})"
        )
    problem = shape_problem(pipe)
    if problem is not None:
        raise DocauditError(f"refusing to load {path}: its steps do not fit together ({problem})")


def _vector(value, n: int | None = None) -> bool:
    """Whether ``value`` is a 1-D array of finite numbers (of length ``n`` when given)."""
    return (
        isinstance(value, np.ndarray)
        and value.ndim == 1
        and value.dtype.kind in "fiu"
        and (n is None or len(value) == n)
        and bool(np.isfinite(value).all())
    )


def shape_problem(pipe: Pipeline) -> str | None:
    """What makes the steps' fitted state inconsistent (feature counts, array shapes), in words, or None: the
    features step's width must be what the scaler and every tree of the forest were fitted on."""
    normalize, features, scaler, forest = (step for _, step in pipe.steps)
    reference = getattr(normalize, "reference_", None)
    if normalize.method != "none" and not (_vector(reference) and len(reference) > 0 and (reference > 0).all()):
        return f"the normalization '{normalize.method}' has no positive reference dictionary"
    if features.kind == "hist":
        bins = getattr(features, "bins", None)
        edges = getattr(features, "edges_", None)
        if not (isinstance(bins, int) and bins >= 1 and _vector(edges, bins + 1)):
            return "the histogram's bin edges do not match its number of bins"
        width = bins
    else:
        width = len(PERCENTILES) + 4 + bool(getattr(features, "token_count", False))
    for name in ("min_", "scale_", "data_min_", "data_max_"):
        if not _vector(getattr(scaler, name, None), width):
            return f"the scaler's {name} does not have the {width} features the features step makes"
    if getattr(scaler, "n_features_in_", None) != width or getattr(forest, "n_features_in_", None) != width:
        return f"the scaler or the forest was not fitted on the {width} features the features step makes"
    classes = getattr(forest, "classes_", None)
    if not (isinstance(classes, np.ndarray) and classes.tolist() == [0, 1]) or getattr(forest, "n_outputs_", 1) != 1:
        return "the forest does not separate the two classes 0 and 1"
    return forest_problem(forest, width)


def forest_problem(forest: RandomForestClassifier, width: int) -> str | None:
    """What makes a fitted forest on ``width`` features unusable, in words, or None: every tree fitted on those
    features for the two classes, and every tree's structure sound (:func:`tree_problem`)."""
    for i, tree in enumerate(forest.estimators_):
        state = getattr(tree, "tree_", None)
        if getattr(tree, "n_features_in_", None) != width or state is None or state.n_features != width:
            return f"a tree of the forest was not fitted on the {width} features"
        if state.n_outputs != 1 or list(np.atleast_1d(state.n_classes)) != [2]:
            return "a tree of the forest does not separate two classes"
        problem = tree_problem(state, width)
        if problem is not None:
            return f"tree {i} of the forest is malformed: {problem}"
    return None


LEAF = -2  # scikit-learn's TREE_UNDEFINED: a leaf's feature and threshold


def tree_problem(state, width: int) -> str | None:
    """What is wrong with a decision tree's structure, in words, or None. scikit-learn builds a tree so that every
    child comes after its parent in the node arrays; requiring that of every node (and one parent for every node but
    the root) rules out cycles, which would make prediction loop forever, and children out of range, which would
    make it read outside the arrays. A leaf has neither child, no feature and no threshold; an inner node has both
    children, a feature below ``width`` and a finite threshold; every node's class values are finite and not
    negative."""
    n = state.node_count
    left, right, feature, threshold = state.children_left, state.children_right, state.feature, state.threshold
    if n < 1 or any(len(a) != n for a in (left, right, feature, threshold)) or state.value.shape != (n, 1, 2):
        return "its arrays do not hold one entry per node"
    leaf = left == -1
    if not np.array_equal(leaf, right == -1):
        return "a node has one child"
    inner, index = ~leaf, np.arange(n)
    children = np.concatenate([left[inner], right[inner]])
    parents = np.concatenate([index[inner], index[inner]])
    if ((children <= parents) | (children >= n)).any():
        return "a node's child is not a later node of the tree (a cycle, or an index out of range)"
    if len(children) != n - 1 or len(np.unique(children)) != n - 1:
        return "its nodes do not form one tree"
    if not ((feature[leaf] == LEAF).all() and (threshold[leaf] == LEAF).all()):
        return "a leaf has a split"
    if ((feature[inner] < 0) | (feature[inner] >= width)).any() or not np.isfinite(threshold[inner]).all():
        return "a node splits on a feature that does not exist or at a threshold that is not a number"
    if not (np.isfinite(state.value).all() and (state.value >= 0).all()):
        return "its class values are not finite non-negative numbers"
    return None


def read_card(path: Path) -> dict:
    """The card's JSON, with the fields ``predict`` relies on present and of the right types."""
    try:
        card = load_untrusted_json(Path(path), "card")
    except OSError as e:
        raise DocauditError(f"cannot read classifier card {path}: {e.strerror or e}") from None
    except (ValueError, RecursionError) as e:
        raise DocauditError(f"classifier card {path} is not valid JSON ({str(e)[:200]})") from None
    if not isinstance(card, dict):
        raise DocauditError(f"classifier card {path} is not a JSON object")
    missing = [k for k in REQUIRED_CARD_FIELDS if k not in card]
    if missing:
        raise DocauditError(
            f"classifier card {path} lacks the field(s) {', '.join(missing)}; was it written by `docaudit train`?"
        )
    for key, kind in REQUIRED_CARD_FIELDS.items():
        if not isinstance(card[key], kind):
            raise DocauditError(f"classifier card {path}: '{key}' must be a {kind.__name__}")
    _check_fields(card["model_config"], ModelConfig, f"classifier card {path}: model_config")
    query = dict(card["query"])
    seed = query.pop("seed", 0)  # the run's seed, recorded beside the query settings
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise DocauditError(f"classifier card {path}: query: 'seed' has the wrong type ({type(seed).__name__})")
    _check_fields(query, QueryConfig, f"classifier card {path}: query")
    card = with_current_names(card)
    auc = card["pooled_bootstrap_95"].get("auc")
    values = [auc.get(k) for k in (INTERVAL[0], "point", INTERVAL[1])] if isinstance(auc, dict) else []
    if not (len(values) == 3 and all(_probability(v) for v in values) and values == sorted(values)):
        raise DocauditError(
            f"classifier card {path}: pooled_bootstrap_95.auc needs numbers ci_low <= point <= ci_high in [0, 1]"
        )
    configuration = card.get("configuration")
    norm, _, features = configuration.partition("+") if isinstance(configuration, str) else ("", "", "")
    if norm not in NORMS or features not in FEATURES:
        raise DocauditError(
            f"classifier card {path}: 'configuration' must name a normalization ({', '.join(NORMS)}) and features "
            f"({', '.join(FEATURES)}) as norm+features, got {str(configuration)[:80]!r}"
        )
    if not isinstance(card.get("normalize_chars", False), bool):
        raise DocauditError(f"classifier card {path}: 'normalize_chars' must be true or false")
    blind = card.get("blind")
    blind_auc = blind.get("blind_auc") if isinstance(blind, dict) else False
    if blind is not None and not (blind_auc is None or _probability(blind_auc)):
        raise DocauditError(f"classifier card {path}: blind.blind_auc must be a number in [0, 1] or null")
    return card


def _probability(value) -> bool:
    """Whether ``value`` is a number in [0, 1] (not NaN, not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1


INTERVAL = ("ci_low", "ci_high")  # the bounds of every interval a card or output records
FORMER_INTERVAL = ("lo", "hi")  # their names in cards written by docaudit 0.2 and earlier


def interval_json(interval) -> dict:
    """A ``metrics.Interval`` as a card records it: ``point``, ``ci_low``, ``ci_high`` (all null for a TPR that
    the non-members were too few to estimate, ``metrics.bootstrap_ci``)."""
    if interval is None:
        return {"point": None, "ci_low": None, "ci_high": None}
    return {"point": interval.point, "ci_low": interval.lo, "ci_high": interval.hi}


def with_current_names(card: dict) -> dict:
    """A card with its intervals' bounds under their current names: ``pooled_bootstrap_95``'s ``lo``/``hi`` and
    beyond-blind's ``delta_ci`` pair, as cards written by docaudit 0.2 and earlier name them, are read as
    ``ci_low``/``ci_high`` and ``delta_ci_low``/``delta_ci_high``."""
    card = card | {"pooled_bootstrap_95": {k: renamed_interval(v) for k, v in card["pooled_bootstrap_95"].items()}}
    beyond = card.get("beyond_blind")
    if isinstance(beyond, dict) and isinstance(beyond.get("delta_ci"), list) and len(beyond["delta_ci"]) == 2:
        low, high = beyond["delta_ci"]
        rest = {k: v for k, v in beyond.items() if k != "delta_ci"}
        card["beyond_blind"] = rest | {"delta_ci_low": low, "delta_ci_high": high}
    return card


def renamed_interval(value):
    """An interval a card records, with the bounds under their current names (``lo``/``hi`` read as
    ``ci_low``/``ci_high``); anything else as it is."""
    if not isinstance(value, dict):
        return value
    names = dict(zip(FORMER_INTERVAL, INTERVAL))
    return {names.get(k, k): v for k, v in value.items()}


def _check_fields(values: dict, cls, where: str) -> None:
    """Every key a field of the dataclass ``cls``, every value of that field's type (missing keys take defaults)."""
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        if key not in hints:
            raise DocauditError(f"{where}: unknown field '{key}'")
        allowed = typing.get_args(hints[key]) or (hints[key],)
        allowed += (int,) if float in allowed else ()
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise DocauditError(f"{where}: '{key}' has the wrong type ({type(value).__name__})")


def _minor(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else (0, 0)


def check_versions(card: dict, directory: Path) -> None:
    """Refuse a classifier written by another scikit-learn minor version (its trees' saved state may mean something
    else) or by a newer skops than the one installed."""
    installed = library_versions()
    written, current = card["sklearn_version"], installed["sklearn_version"]
    if _minor(written) != _minor(current):
        raise DocauditError(
            f"classifier {directory} was written with scikit-learn {written}, but {current} is "
            f"installed: install scikit-learn=={'.'.join(map(str, _minor(written)))}.* or retrain it "
            "with `docaudit train`"
        )
    written, current = card["skops_version"], installed["skops_version"]
    if _minor(written) > _minor(current):
        raise DocauditError(
            f"classifier {directory} was written with skops {written}, newer than the installed "
            f"{current}: upgrade skops (pip install 'skops>={written}')"
        )


def _jsonable(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    raise TypeError(type(obj).__name__)
