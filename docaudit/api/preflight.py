"""What a command checks before torch or a model is loaded, so that a mistake answers at once: every document
path, the output folder, the folds against the documents given (:func:`check`); and the estimate of a run before it
runs (:func:`estimate`, ``--dry-run``): the documents read as the run reads them, the tokens and model passes the
run would take and its time (``audit.costs``), or what ``traps make`` would plant and ``controls`` would generate."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from docaudit.api.books import ControlsRequest, MapRequest
from docaudit.api.classifier import GridRequest, PredictRequest, TrainRequest
from docaudit.api.common import recorded
from docaudit.api.data import DataCheckRequest, DatasetTestRequest
from docaudit.api.extract import ExtractRequest
from docaudit.api.lab import TrapsMakeRequest, check_traps_outputs
from docaudit.api.probes import ProbeRequest
from docaudit.api.report import ReportRequest
from docaudit.api.scores import EvaluateRequest, ScoreRequest, SequenceRequest
from docaudit.audit import costs
from docaudit.config import DEFAULT_CLASSIFIER, DetectorConfig, MetaConfig, ModelConfig, QueryConfig, ScalingConfig
from docaudit.config.rules import TOKENS_PER_WORD, check_folds, check_inner_folds
from docaudit.corpus.base import DocumentError
from docaudit.corpus.datasets import HUB_PREFIX, is_dataset
from docaudit.corpus.documents import expand_paths
from docaudit.errors import DocauditError
from docaudit.inference.verdicts import nonmembers_needed, smallest_p
from docaudit.run import DocumentSpec

Checked = (
    TrainRequest
    | GridRequest
    | PredictRequest
    | ScoreRequest
    | EvaluateRequest
    | SequenceRequest
    | DatasetTestRequest
    | ReportRequest
    | MapRequest
    | DataCheckRequest
    | TrapsMakeRequest
    | ControlsRequest
    | ProbeRequest
    | ExtractRequest
)
"""The requests whose commands check their inputs before a model loads."""


@dataclass(frozen=True)
class Checks:
    """What one run of a command checks and estimates: its ``command``, its documents (``members`` alone, or both
    sets, called ``names``), the ``folds`` they must fill, the inner folds of the meta-classifier ``meta`` (None:
    not checked), its output folder (``output``: ``(out, kind, overwrite, inputs)``), and what its estimate needs:
    the main ``query`` of ``model``, the detectors ``methods`` (comma-separated; None: the default ones) with
    ``detector``, the meta-classifier ``plan_meta`` it fits, the ``n_sequences`` sampled per document, the
    ``blind`` baselines and the ``beyond``-blind comparison; ``no_model``: nothing is queried."""

    command: str
    members: Sequence[object]
    nonmembers: Sequence[object] | None = None
    names: tuple[str, str] = ("members", "non-members")
    folds: int | None = None
    meta: MetaConfig | None = None
    output: tuple | None = None
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    query: QueryConfig = field(default_factory=QueryConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    methods: str | None = None
    detector: DetectorConfig = field(default_factory=DetectorConfig)
    plan_meta: MetaConfig | None = None
    n_sequences: int = ScalingConfig.n_sequences
    blind: bool = False
    beyond: bool = False
    no_model: bool = False


@dataclass
class Estimate:
    """One run's checks passed: ``files`` (every file named; None when a dataset is among them, whose rows are
    counted only when read), ``sizes`` (each document's bytes as the run reads it; None: not read, the files' own
    sizes are used), ``cost`` (what ``traps make`` and ``controls`` estimate instead of a query plan; ``controls``: the
    estimated steps of ``controls``, ``audit.costs.controls_plan``), ``warnings``
    (what the run can give is limited before it starts: a report whose calibration cannot reach a verdict still
    gives its rates)."""

    checks: Checks
    files: list[Path] | None
    sizes: list[int] | None = None
    cost: dict | None = None
    warnings: list[str] = field(default_factory=list)
    controls: costs.Plan | None = None

    def plan(self) -> costs.Plan | None:
        """The estimated steps of the run (``audit.costs.command_plan``); None when nothing is queried or a dataset
        is among the inputs."""
        c = self.checks
        if c.no_model or self.files is None:
            return None
        names = [m.strip() for m in c.methods.split(",") if m.strip()] if c.methods is not None else None
        if names is None:
            from docaudit.methods.detectors.registry import default_methods

            names = list(default_methods())
        shape = costs.Shape(
            c.command,
            tuple(m for m in names if m != "blind"),
            c.detector,
            c.plan_meta,
            c.folds or 0,
            c.n_sequences,
            c.blind,
            c.beyond,
        )
        sizes = self.sizes if self.sizes is not None else file_sizes(self.files)
        return costs.command_plan(shape, sizes, c.query, c.model)


def document_files(paths: object) -> list[Path] | None:
    """The files ``paths`` name (folders expanded as when read), or None when one of them is a dataset (its rows
    are counted only when read). A path that does not exist, a dataset file that does not, or a folder without
    ``.txt`` files is an error (a file that cannot be read is reported when read, in reading order, as a skip or,
    with ``strict``, the error)."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if any(is_dataset(p) for p in paths):
        for p in paths:
            location = os.fspath(p)
            if not location.startswith(HUB_PREFIX) and not os.path.exists(location):
                raise DocumentError(Path(location), "unreadable", "no such file")
        return None
    return expand_paths(paths) if paths else []


def file_sizes(files: list[Path]) -> list[int]:
    """Each file's size in bytes (cleaning removes a little), for the start line."""
    sizes = []
    for f in files:
        try:
            sizes.append(f.stat().st_size)
        except OSError:
            continue
    return sizes


def check_inputs(checks: Checks) -> list[Path] | None:
    """Check a run's documents, its folds against the files of each set (a dataset is counted when read, later),
    the inner folds of its meta-classifier, and its output folder (checked as when written, nothing touched).
    Returns every file named (None when a dataset is among them)."""
    c = checks
    first = document_files(c.members)
    second = None if c.nonmembers is None else document_files(c.nonmembers)
    if c.output is not None and c.output[0] is not None:
        from docaudit.outputs import prepare_output

        out, kind, overwrite, inputs = c.output
        prepare_output(out, kind, overwrite, [i for i in inputs if i is not None])
    if c.folds is not None and first is not None and second is not None:
        check_folds(c.folds, len(first), len(second), c.names)
        if c.meta is not None:
            check_inner_folds(c.meta, c.folds, len(first), len(second))
    if c.nonmembers is None:
        return first
    return None if first is None or second is None else first + second


def read_as_run(checks: Checks) -> list[int]:
    """Read the documents as the run reads them, with its checks: a file that cannot be read (an error with
    ``strict``, else a skip), the same text in both sets, too few documents left for the folds. Returns each
    document's size in bytes, as read (cleaned)."""
    from docaudit.corpus.base import Skips
    from docaudit.corpus.documents import labelled_documents, load_documents

    c = checks
    reading = {"raw": c.reading.raw, "normalize_chars": c.reading.normalize_chars}
    skips = None if c.reading.strict else Skips()
    if c.nonmembers is None:
        docs = load_documents(c.members, progress=False, skips=skips, **reading)
    else:
        docs, labels, _ = labelled_documents(
            c.members, c.nonmembers, progress=False, skips=skips, drop_duplicates=c.reading.drop_duplicates, **reading
        )
        if c.folds is not None:
            first, second = int(labels.sum()), int((labels == 0).sum())
            check_folds(c.folds, first, second)
            if c.meta is not None:
                check_inner_folds(c.meta, c.folds, first, second)
    return [len(d.text.encode("utf-8")) for d in docs]


def card_query(classifier: Path | None) -> QueryConfig:
    """The query a saved classifier's card records (``predict`` queries with it); the default one when there is no
    card or it is damaged (loading the classifier reports why). A card that is not a regular file within its size
    limit is refused here, on one line."""
    from docaudit.untrusted import read_untrusted_text

    path = Path(classifier or DEFAULT_CLASSIFIER) / "card.json"
    try:
        text = read_untrusted_text(path, "card")
    except FileNotFoundError:
        return QueryConfig()
    except OSError as e:
        raise DocauditError(f"cannot read classifier card {path}: {e.strerror or e}") from None
    try:
        return QueryConfig.recorded(json.loads(text)["query"])[0]
    except Exception:  # any unreadable card: the estimate uses the defaults, and loading the classifier says why
        return QueryConfig()


def _methods(methods: Sequence[str] | str | None) -> str | None:
    return methods if methods is None or isinstance(methods, str) else ",".join(methods)


def _model(model: object) -> ModelConfig:
    """The model configuration an estimate is made for (a model already loaded: its own configuration's rates)."""
    if isinstance(model, ModelConfig):
        return model
    config = getattr(model, "config", None)
    return config if isinstance(config, ModelConfig) else ModelConfig()


def _training_reading(r: TrainRequest | GridRequest) -> DocumentSpec:
    """The documents read as training reads them: its configuration's cleaning and duplicates rule."""
    c = r.config
    return replace(
        r.reading,
        raw=r.reading.raw or c.raw,
        normalize_chars=r.reading.normalize_chars or c.normalize_chars,
        drop_duplicates=r.reading.drop_duplicates or c.drop_duplicates,
    )


def _train(r: TrainRequest) -> list[Checks]:
    output = (r.out, "classifier", r.overwrite, r.inputs())
    c = r.config
    reading = _training_reading(r)
    return [
        Checks("train", r.members, r.nonmembers, folds=c.meta.folds, meta=c.meta, output=output, reading=reading,
               query=c.query, model=c.model, plan_meta=c.meta, blind=True, beyond=True)
    ]  # fmt: skip


def _grid(r: GridRequest) -> list[Checks]:
    c = r.config
    return [
        Checks("train", r.members, r.nonmembers, folds=c.meta.folds, reading=_training_reading(r), query=c.query,
               model=c.model, plan_meta=c.meta, blind=True, beyond=True)
    ]  # fmt: skip


def _predict(r: PredictRequest) -> list[Checks]:
    query = card_query(r.classifier)  # the card's query; the estimate's rates are those of the user's settings
    return [Checks("predict", r.documents, reading=r.reading, query=query, model=_model(r.model))]


def _score(r: ScoreRequest) -> list[Checks]:
    d = r.detectors
    return [
        Checks("score", r.documents, reading=r.reading, query=r.query, model=_model(r.models.model),
               methods=_methods(d.methods), detector=d.detector, no_model=_blind_only(d.methods))
    ]  # fmt: skip


def _blind_only(methods: Sequence[str] | str | None) -> bool:
    """Whether ``methods`` is evaluate's model-free baseline alone."""
    return methods is not None and _methods(methods).strip() == "blind"


def _evaluate(r: EvaluateRequest) -> list[Checks]:
    s, d = r.spec, r.detectors
    methods = _methods(d.methods)
    meta = s.meta if methods != "blind" else None
    names = [] if methods is None else [m.strip() for m in methods.split(",")]
    output = (r.out, "evaluation", r.overwrite, r.inputs())
    return [
        Checks("evaluate", r.members, r.nonmembers, folds=s.folds, meta=meta, output=output, reading=r.reading,
               query=r.query, model=_model(r.models.model), methods=methods, detector=d.detector, plan_meta=meta,
               n_sequences=s.scaling.n_sequences, blind=bool(s.blind_kinds) or "blind" in names,
               beyond=s.beyond is not None, no_model=_blind_only(methods))
    ]  # fmt: skip


def _sequence(r: SequenceRequest) -> list[Checks]:
    d = r.detectors
    whole = QueryConfig(context=r.config.max_context, max_tokens=r.config.max_context)  # each text in one window
    return [
        Checks("sequence", r.members, r.nonmembers, output=(r.out, "sequence", r.overwrite, r.inputs()),
               reading=r.reading, query=whole, model=_model(r.models.model), methods=_methods(d.methods),
               detector=d.detector, no_model=_blind_only(d.methods))
    ]  # fmt: skip


def _dataset_test(r: DatasetTestRequest) -> list[Checks]:
    methods = _methods(r.config.methods)
    return [
        Checks("dataset-test", r.suspect, r.nonmembers, reading=r.reading, query=r.query, model=_model(r.model),
               methods=methods, no_model=_blind_only(methods))
    ]  # fmt: skip


def _report(r: ReportRequest) -> list[Checks]:
    """One run per method, each into its folder (with several, the folder holding them checked first); the
    snippets each queries: ``snippets`` of ``snippet_words`` words per book, counted as at most that many tokens."""
    from docaudit.outputs import prepare_parent

    folders = r.folders()
    if len(folders) > 1:
        prepare_parent(r.out, list(folders), r.inputs())
    c = r.spec.contamination
    tokens = max(2, math.ceil(c.snippets * c.snippet_words * TOKENS_PER_WORD))
    query = QueryConfig(context=c.max_context or QueryConfig.context, max_tokens=tokens)
    books = (*r.books, *r.calibrate_members, *r.calibrate_nonmembers)
    return [
        Checks("report", books, output=(where, "report", r.overwrite, r.inputs()), reading=r.reading, query=query,
               model=_model(r.models.model), methods=method, detector=r.detector)
        for method, where in folders.items()
    ]  # fmt: skip


def _map(r: MapRequest) -> list[Checks]:
    output = (r.out, "map", r.overwrite, r.inputs())
    books = (*r.books, *r.nonmembers)
    return [Checks("map", books, output=output, reading=r.reading, query=r.spec.query, model=_model(r.model))]


def _data_check(r: DataCheckRequest) -> list[Checks]:
    names = ("in set A", "in set B")
    return [Checks("data-check", r.set_a, r.set_b, names=names, folds=r.folds, reading=r.reading, no_model=True)]


def _traps_make(r: TrapsMakeRequest) -> list[Checks]:
    return [Checks("traps-make", list(r.documents), no_model=True)]


def _controls(r: ControlsRequest) -> list[Checks]:
    if r.uses_stored_library and r.stored_library is not None and Path(r.stored_library).is_file():
        from docaudit.audit.controls_library import refuse_other_precision

        models = {"generator": r.generator, "target": r.model}
        refuse_other_precision(r.stored_library, models, r.config.min_library)
    names = ("books", "null library")
    library = list(r.library) if r.library else None
    output = (r.out, "controls", r.overwrite, r.inputs())
    return [Checks("controls", list(r.books), library, names=names, output=output, reading=r.reading, no_model=True)]


def _probe(r: ProbeRequest) -> list[Checks]:
    names = ("books", "null library")
    library = list(r.library) if r.library else None
    output = (r.out, "probe", r.overwrite, r.inputs())
    return [Checks("probe", list(r.books), library, names=names, output=output, reading=r.reading, no_model=True)]


def _extract(r: ExtractRequest) -> list[Checks]:
    names = ("books", "null library")
    library = list(r.library) if r.library else None
    output = (r.out, "extract", r.overwrite, r.inputs())
    return [Checks("extract", list(r.books), library, names=names, output=output, reading=r.reading, no_model=True)]


CHECKS: dict[type, Callable[[object], list[Checks]]] = {
    TrainRequest: _train,
    GridRequest: _grid,
    PredictRequest: _predict,
    ScoreRequest: _score,
    EvaluateRequest: _evaluate,
    SequenceRequest: _sequence,
    DatasetTestRequest: _dataset_test,
    ReportRequest: _report,
    MapRequest: _map,
    DataCheckRequest: _data_check,
    TrapsMakeRequest: _traps_make,
    ControlsRequest: _controls,
    ProbeRequest: _probe,
    ExtractRequest: _extract,
}


def _checks(request: Checked) -> list[Checks]:
    try:
        return CHECKS[type(request)](request)
    except KeyError:
        raise TypeError(f"{type(request).__name__} has no checks before its run") from None


def unreachable(request: Checked) -> str | None:
    """Why no verdict of a ``report`` or ``map`` can be "evidence", whatever the model says, or None: its
    calibration non-members are too few for any p-value below its level (against n of them the smallest p-value is
    1/(n+1)); datasets are counted only when read, and not here."""
    if isinstance(request, ReportRequest):
        calibration, level = request.calibrate_nonmembers, request.spec.alpha / len(request.method_names())
    elif isinstance(request, MapRequest):
        calibration, level = request.nonmembers, request.spec.alpha
    else:
        return None
    files = document_files(calibration)
    if files is None or smallest_p(len(files)) < level:
        return None
    n = len(files)
    return (
        f"with {n} calibration non-member book(s) the smallest p-value is 1/{n + 1} = {smallest_p(n):.3g}, not below "
        f"the level {level:g}, so every verdict would be inconclusive: give at least {nonmembers_needed(level)} "
        "(--calibrate-nonmembers), or a larger --alpha"
    )


def check(request: Checked) -> list[Estimate]:
    """Check ``request`` before anything is loaded (the cache folder writable with room, every document path, the
    output folders, ``probe``'s paraphrase file, the folds against the files given, a map's calibration books
    enough for a verdict), raising the error a run would; the documents are read as the run reads them (an empty or
    binary file refused now, not after the model loads). One :class:`Estimate` per run (one per method of a
    report), with the documents' sizes."""
    estimates = []
    if not isinstance(request, DataCheckRequest):
        from docaudit.folders import writable_folder
        from docaudit.query.cache import cache_root

        writable_folder(cache_root(), "cache folder")
    if isinstance(request, ProbeRequest) and request.config.probe == "decop" and request.paraphrases is not None:
        from docaudit.audit.probes import read_paraphrases

        read_paraphrases(request.paraphrases)  # within its bounds, or refused before the texts are read
    why = unreachable(request)
    if why is not None and isinstance(request, MapRequest):
        raise DocauditError(why)
    for checks in _checks(request):
        files = check_inputs(checks)
        if isinstance(request, TrapsMakeRequest):
            if files is None:
                raise DocauditError("traps make takes text files, not datasets")
            check_traps_outputs(request)
        estimate = Estimate(checks, files, warnings=[] if why is None else [why])
        if files is not None and not isinstance(request, (TrapsMakeRequest, ControlsRequest)):
            estimate.sizes = read_as_run(checks)
        estimates.append(estimate)
    return estimates


def estimate(request: Checked) -> list[Estimate]:
    """What ``request`` would take, nothing loaded or written (``--dry-run``): :func:`check`, then the documents
    read as the run reads them (every check it makes on them: unreadable files, documents in both sets, the folds
    after skips), with the plan of each run (:meth:`Estimate.plan`); for ``traps make`` what it would plant, for
    ``controls`` what it would generate and score, for ``extract`` its examples and time."""
    estimates = check(request)
    for e in estimates:
        if isinstance(request, TrapsMakeRequest):
            from docaudit.audit.traps import planting_estimate

            e.cost = planting_estimate({f.name: f.stat().st_size for f in e.files}, request.config)
        elif isinstance(request, ControlsRequest):
            from docaudit.audit.synthetic_controls import planned_cost

            e.cost = planned_cost(len(e.files or []), request.config, 2 if request.reference else 1)
            roles = {"target": request.model, "generator": request.generator, "reference": request.reference}
            loaded = [role for role, m in roles.items() if m is not None and not isinstance(m, ModelConfig)]
            models = {role: None if m is None else _model(m) for role, m in roles.items()}
            e.controls = costs.controls_plan(e.cost, models, loaded)
        elif isinstance(request, ProbeRequest):
            from docaudit.api.probes import planned
            from docaudit.corpus.documents import load_documents

            reading = recorded(request.reading)
            read = (reading.raw, False, reading.skips, reading.normalize_chars)
            texts = [
                d.text for given in (request.books, request.library) if given for d in load_documents(given, *read)
            ]
            e.cost = planned(request, texts)
        elif isinstance(request, ExtractRequest):
            from docaudit.api.extract import planned as extract_planned

            e.cost = extract_planned(request)
    return estimates
