"""The Python API: one function per command.

Each function checks its output folder before anything is queried (``outputs.prepare_output``), runs the audit
from ``docaudit.audit`` (or the experiment from ``docaudit.lab``) and writes the files through ``docaudit.report``.
The command line parses its options, calls one of these and prints the result. Every function that queries a
model takes a keyword ``ray`` (a ``RayConfig``) to run its queries on Ray workers.

The functions take the keywords of the command's settings one by one, and also the typed objects of
:mod:`docaudit.run` that group them: ``models`` (a :class:`ModelSpec`), ``detectors`` (a :class:`DetectorSpec`),
``reading`` (a :class:`DocumentSpec`) and ``run`` (a :class:`RunContext`: seed, progress, the command line written
into provenance, Ray); a keyword given beside an object replaces that field of the object."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from docaudit.audit import meta
from docaudit.audit.contamination import ContaminationReport, ReportSpec, contamination_report
from docaudit.audit.datacheck import check_sets
from docaudit.audit.dataset_level import dataset_test_documents
from docaudit.audit.evaluation import EvaluationSpec, MethodsEvaluation, evaluate_methods
from docaudit.audit.localize import MapResult, MapSpec
from docaudit.audit.scoring import score_documents
from docaudit.config import ContaminationConfig, DatasetTestConfig, ModelConfig, QueryConfig, RayConfig, TrainConfig
from docaudit.corpus.documents import Skips, load_documents
from docaudit.inference.verdicts import DEFAULT_ALPHA
from docaudit.lab.experiment import LabSpec, run_lab
from docaudit.lab.traps import TrapPlan
from docaudit.outputs import prepare_output
from docaudit.provenance import document_records
from docaudit.query.distributed import scale_out
from docaudit.query.models import LoadedModel
from docaudit.query.progress import showing
from docaudit.report.classifier import save_model_dir
from docaudit.report.contamination import write_contamination_report
from docaudit.report.evaluation import write_evaluation
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec, RunContext, take


def on_ray(func):
    """``func`` with a keyword ``ray``: given a :class:`RayConfig`, its queries run on Ray workers
    (docs/scaling.md); Ray is started or joined at the first query, and stopped at the end when started here."""

    @functools.wraps(func)
    def wrapper(*args, ray: RayConfig | None = None, **kwargs):
        with scale_out(ray) as pool:
            return func(*args, pool=pool, **kwargs)

    return wrapper


@contextmanager
def scaled(run: RunContext) -> Iterator[RunContext]:
    """``run`` with its Ray pool for the block: ``run.pool`` when given, else one opened from ``run.ray`` (started
    or joined at the first query, stopped at the end), else none; the queries made within the block go to it, and
    show progress (model loading included) only with ``run.progress``."""
    if run.pool is not None:
        with run.pool.joblib_backend(), showing(run.progress):
            yield run
        return
    with scale_out(run.ray) as pool, showing(run.progress):
        yield run.with_pool(pool)


def _positional(command: str, args: tuple, names: tuple[str, ...], options: dict) -> dict:
    """The keywords of a call whose arguments after the leading ones were given by position, in the order ``names``."""
    if len(args) > len(names):
        raise TypeError(f"{command}() takes at most {len(names)} arguments after the documents ({len(args)} given)")
    twice = sorted(set(names[: len(args)]) & set(options))
    if twice:
        raise TypeError(f"{command}() got multiple values for {', '.join(twice)}")
    return dict(zip(names, args)) | options


def _objects(options: dict, *kinds: str) -> list:
    """The run objects named in ``kinds`` (``models``, ``detectors``, ``reading``, ``run``), each the object given
    under that keyword (or a default one) with the fields given as keywords replaced; those keywords are removed."""
    classes = {"models": ModelSpec, "detectors": DetectorSpec, "reading": DocumentSpec, "run": RunContext}
    return [take(classes[kind], options, options.pop(kind, None)) for kind in kinds]


def _no_more(command: str, options: dict) -> None:
    if options:
        raise TypeError(f"{command}() got unexpected keyword arguments: {', '.join(sorted(options))}")


grid = on_ray(meta.grid)


def predict(paths, classifier_dir: Path | None = None, model=None, *args, **options) -> list[dict]:
    """The verdict on each document under a saved meta-classifier (``audit.meta.predict``; keywords ``progress``,
    ``skips``, ``trust_remote_code``, ``use_card_backend``, ``user_settings``, ``alpha``, ``ray``)."""
    names = ("progress", "skips", "trust_remote_code", "use_card_backend", "user_settings", "alpha")
    options = _positional("predict", args, names, options)
    [run] = _objects(options, "run")
    access = take(meta.CardAccess, options, options.pop("access", None))
    skips = options.pop("skips", None)
    alpha = options.pop("alpha", DEFAULT_ALPHA)
    _no_more("predict", options)
    with scaled(run) as run:
        return meta.predict(paths, classifier_dir, model, access, alpha, skips, run)


def score(paths, *args, **options) -> list[dict]:
    """Raw per-document detector scores (``audit.scoring.score_documents``): keywords, or by position in this order,
    ``model``, ``methods``, ``config`` (a DetectorConfig), ``query``, ``ref_model``, ``neighbor_model``, ``raw``,
    ``progress``, ``skips``, ``normalize_chars``, ``freq_corpus``; and ``ray``."""
    names = ("model", "methods", "config", "query", "ref_model", "neighbor_model", "raw", "progress", "skips")
    options = _positional("score", args, (*names, "normalize_chars", "freq_corpus"), options)
    if "config" in options:
        options["detector"] = options.pop("config")
    models, detectors, reading, run = _objects(options, "models", "detectors", "reading", "run")
    query = options.pop("query", QueryConfig())
    _no_more("score", options)
    with scaled(run) as run:
        return score_documents(paths, models, query, detectors, reading, run)


def dataset_test(suspect_paths, nonmember_paths, *args, **options):
    """The dataset-level test (``audit.dataset_level.dataset_test_documents``): keywords, or by position in this
    order, ``model``, ``methods``, ``query``, ``seed``, ``n_splits``, ``raw``, ``progress``, ``skips``,
    ``drop_duplicates``, ``normalize_chars``, ``blind_kind``; and ``ray``, ``alpha`` (the level of the verdict)."""
    names = ("model", "methods", "query", "seed", "n_splits", "raw", "progress", "skips", "drop_duplicates")
    options = _positional("dataset_test", args, (*names, "normalize_chars", "blind_kind"), options)
    if "n_splits" in options:
        options["splits"] = options.pop("n_splits")
    reading, run = _objects(options, "reading", "run")
    model, query = options.pop("model", None), options.pop("query", None)
    alpha = options.pop("alpha", DEFAULT_ALPHA)
    config = take(DatasetTestConfig, options, options.pop("config", None))
    _no_more("dataset_test", options)
    with scaled(run) as run:
        return dataset_test_documents(suspect_paths, nonmember_paths, model, query, config, reading, run, alpha)


def _inputs(*groups) -> list:
    """Every local path among ``groups`` (path lists, single paths, model configs; None skipped): what an output
    folder must not be or contain."""
    paths = []
    for group in groups:
        if isinstance(group, ModelConfig):
            group = group.model
        if group is None or isinstance(group, LoadedModel):
            continue
        paths += [group] if isinstance(group, (str, os.PathLike)) else list(group)
    return paths


def _model_inputs(models: ModelSpec, detectors: DetectorSpec | None = None) -> tuple:
    """The inputs a command names beside its documents: its models and the documents calibrating DC-PDD."""
    return models.model, models.ref_model, models.neighbor_model, None if detectors is None else detectors.freq_corpus


def train(
    members,
    nonmembers,
    config: TrainConfig = TrainConfig(),
    out: Path | None = None,
    model: LoadedModel | None = None,
    *args,
    **options,
) -> meta.TrainResult:
    """Evaluate the meta-classifier on k-fold chunks beside the blind baseline, fit it on all documents and, with
    ``out``, save it there with its card and ROC curves (``out``: a new or empty folder, or an earlier classifier
    with ``overwrite``). Keywords (or positions, in this order): ``progress``, ``overwrite``, ``skips``; and
    ``ray`` or ``run``."""
    options = _positional("train", args, ("progress", "overwrite", "skips"), options)
    overwrite, skips = options.pop("overwrite", False), options.pop("skips", None)
    [run] = _objects(options, "run")
    _no_more("train", options)
    with scaled(run) as run:
        return _train(members, nonmembers, config, out, model, overwrite, skips, run)


def _train(members, nonmembers, config, out, model, overwrite, skips, run: RunContext) -> meta.TrainResult:
    if out is not None:
        prepare_output(out, "classifier", overwrite, _inputs(members, nonmembers, config.model))
    result = meta.train(members, nonmembers, config, model, run, skips)
    if out is not None:
        save_model_dir(
            Path(out),
            result.estimator,
            result.card,
            result.evaluation,
            overwrite,
            result.documents,
            result.extras.get("fold_models"),
            result.extras.get("conformal_data"),
        )
        result.out = Path(out)
    return result


def evaluate(members, nonmembers, out: Path | None = None, overwrite: bool = False, **options) -> MethodsEvaluation:
    """Every method on the same k-fold chunks (``audit.evaluation.evaluate_methods``; keywords: the fields of
    ``ModelSpec``, ``DetectorSpec``, ``EvaluationSpec``, ``DocumentSpec`` and ``RunContext``, and ``query``); with
    ``out``, the tables, JSON and ROC curves written there."""
    models, detectors, reading, run = _objects(options, "models", "detectors", "reading", "run")
    spec = take(EvaluationSpec, options, options.pop("spec", None))
    query = options.pop("query", QueryConfig())
    _no_more("evaluate", options)
    with scaled(run) as run:
        if out is not None:
            prepare_output(
                out, "evaluation", overwrite, _inputs(members, nonmembers, *_model_inputs(models, detectors))
            )
        result = evaluate_methods(members, nonmembers, models, query, detectors, spec, reading, run)
        if out is not None:
            write_evaluation(result, Path(out), overwrite)
        return result


def sequence(
    members,
    nonmembers,
    out: Path | None = None,
    overwrite: bool = False,
    recall_prefix_file=None,
    **options,
) -> dict:
    """Sequence-level evaluation (``audit.sequence_level.evaluate_sequences``; keywords: the fields of
    ``ModelSpec``, ``DetectorSpec``, ``DocumentSpec`` and ``RunContext``, ``config`` a SequenceConfig and
    ``recall_prefix``): every text scored whole by every detector; with ``out``, the metrics and per-sample scores
    written there. ``recall_prefix_file``: a UTF-8 text file holding ReCaLL's non-member prefix."""
    from docaudit.audit.sequence_level import evaluate_sequences
    from docaudit.config import SequenceConfig
    from docaudit.corpus.documents import read_text
    from docaudit.report.sequence_level import write_sequence_evaluation

    models, detectors, reading, run = _objects(options, "models", "detectors", "reading", "run")
    config, recall_prefix = options.pop("config", SequenceConfig()), options.pop("recall_prefix", None)
    _no_more("sequence", options)
    with scaled(run) as run:
        if out is not None:
            inputs = _inputs(members, nonmembers, recall_prefix_file, *_model_inputs(models, detectors))
            prepare_output(out, "sequence", overwrite, inputs)
        if recall_prefix_file is not None:
            recall_prefix = read_text(recall_prefix_file)
        result = evaluate_sequences(members, nonmembers, models, detectors, config, recall_prefix, reading, run)
        if out is not None:
            write_sequence_evaluation(result, Path(out), overwrite)
        return result


def report(
    books, calibrate_members, calibrate_nonmembers, out: Path, overwrite: bool = False, **options
) -> ContaminationReport:
    """Per-book contamination rates (``audit.contamination.contamination_report``; keywords: the fields of
    ``ModelSpec``, ``ContaminationConfig`` (``book_bootstrap`` also as ``book_bootstrap_samples``), ``ReportSpec``,
    ``DocumentSpec`` and ``RunContext``, and ``detector``), written to ``out`` as CSV, JSON, plots and an HTML
    page; the command line of ``run`` goes into their provenance."""
    if "book_bootstrap_samples" in options:
        options["book_bootstrap"] = options.pop("book_bootstrap_samples")
    models, reading, run = _objects(options, "models", "reading", "run")
    spec = take(ReportSpec, options, options.pop("spec", None))
    spec = replace(spec, contamination=take(ContaminationConfig, options, spec.contamination))
    detector = options.pop("detector", DetectorSpec().detector)
    _no_more("report", options)
    with scaled(run) as run:
        inputs = _inputs(books, calibrate_members, calibrate_nonmembers, *_model_inputs(models))
        prepare_output(out, "report", overwrite, inputs)
        result = contamination_report(
            books, calibrate_members, calibrate_nonmembers, models, detector, spec, reading, run
        )
        write_contamination_report(result, Path(out), overwrite)
        return result


def data_check(set_a, set_b, *args, **options) -> dict:
    """Statistics of two document sets and the blind baseline between them, with no model (keywords, or by
    position in this order: ``raw``, ``normalize_chars``, ``folds``, ``seed``, ``drop_duplicates``, ``skips``,
    ``progress``); documents that cannot be used are listed under ``skipped``."""
    names = ("raw", "normalize_chars", "folds", "seed", "drop_duplicates", "skips", "progress")
    options = _positional("data_check", args, names, options)
    reading, run = _objects(options, "reading", "run")
    folds = options.pop("folds", 5)
    _no_more("data_check", options)
    skips = Skips() if reading.skips is None else reading.skips
    docs_a, docs_b = (
        load_documents(
            [s], raw=reading.raw, progress=run.progress, skips=skips, normalize_chars=reading.normalize_chars
        )
        for s in (set_a, set_b)
    )
    result = check_sets(
        docs_a, docs_b, folds=folds, seed=run.seed, progress=run.progress, drop_duplicates=reading.drop_duplicates
    )
    inputs = document_records(docs_a, "a") + document_records(docs_b, "b")
    return result | {"skipped": skips.as_json(), "inputs": inputs}


def lab(corpus, out: Path, overwrite: bool = False, base_model: str | None = None, **options):
    """The randomized controlled experiment (``lab.experiment.run_lab``; keywords: the fields of ``LabSpec``,
    ``traps`` (a TrapConfig) with ``generator`` and ``trap_sequences``, and of ``RunContext``), resumable in
    ``out``."""
    [run] = _objects(options, "run")
    traps = options.pop("traps", None)
    generator, sequences = options.pop("generator", None), options.pop("trap_sequences", None)
    plan = None if traps is None else TrapPlan(traps, generator or ModelConfig(), sequences)
    if base_model is not None:
        options["base_model"] = base_model
    spec = take(LabSpec, options, options.pop("spec", None))
    _no_more("lab", options)
    with scaled(run) as run:
        return run_lab(corpus, Path(out), spec, plan, run, overwrite)


def traps_make(
    docs,
    out: Path,
    registry: Path,
    generator: ModelConfig = ModelConfig(),
    config=None,
    overwrite: bool = False,
    run: RunContext = RunContext(),
):
    """Plant copyright traps (``audit.traps.make_traps``) in each document of ``docs`` (read verbatim) and write the
    trapped copies to ``out`` and the private registry to ``registry``; the originals are only read."""
    from docaudit.audit.traps import make_traps
    from docaudit.config import TrapConfig
    from docaudit.report.traps import check_registry_path, write_trapped

    inputs = _inputs(docs, generator)
    prepare_output(out, "traps", overwrite, inputs)
    check_registry_path(registry, out, overwrite)
    documents = load_documents(docs, raw=True, progress=run.progress)
    plan = make_traps(documents, generator, config or TrapConfig(), run.seed, run.progress)
    write_trapped(plan, Path(out), Path(registry), overwrite, inputs)
    return plan


def traps_detect(
    registry: Path, model: ModelConfig = ModelConfig(), ref_model=None, alpha: float | None = None, **options
):
    """Test ``model`` for the traps of a registry (``audit.traps.detect_traps`` takes ``options``)."""
    from docaudit.audit.traps import detect_traps
    from docaudit.config import TrapConfig
    from docaudit.corpus.traps import read_registry

    alpha = TrapConfig.alpha if alpha is None else alpha
    return detect_traps(read_registry(registry), model, ref_model, alpha=alpha, **options)


def cache_info() -> dict:
    """The cache folder and every kind of entry docaudit wrote there (``query.cache_entries.KINDS``): entries and
    bytes per kind and in all, the token statistics per model identity, and the files docaudit did not write
    (``other``, never removed)."""
    from docaudit.query.cache_entries import summary

    return summary()


def cache_clear(model: str | None = None, kinds=("stats",)) -> dict:
    """Delete the entries of ``kinds`` docaudit wrote (``query.cache_entries.KINDS``, or ``all``; the token
    statistics only those of the model identity ``model`` when given, which must have entries); nothing else under
    the cache folder is touched. Returns the entries and bytes removed, in all and per kind."""
    from docaudit.errors import DocauditError
    from docaudit.query.cache import StatsCache
    from docaudit.query.cache_entries import KINDS, clear

    kinds = list(KINDS) if "all" in kinds else list(dict.fromkeys(kinds))
    if unknown := [k for k in kinds if k not in KINDS]:
        raise DocauditError(f"unknown cache kind(s) {', '.join(unknown)} (kinds: {', '.join(KINDS)}, all)")
    if model is not None and kinds != ["stats"]:
        raise DocauditError("--model selects token statistics only: give it with --kind stats (the default)")
    models = StatsCache().summary()["models"]
    if model is not None and model not in models:
        raise DocauditError(f"no cache entries of model '{model}' (models: {', '.join(models) or 'none'})")
    removed = clear(kinds, model)
    return {
        "entries": sum(r["entries"] for r in removed.values()),
        "bytes": sum(r["bytes"] for r in removed.values()),
        "kinds": removed,
    }


def map_books(
    books,
    nonmembers,
    out: Path | None = None,
    overwrite: bool = False,
    *,
    model: ModelConfig | LoadedModel = ModelConfig(),
    spec: MapSpec = MapSpec(),
    reading: DocumentSpec = DocumentSpec(),
    run: RunContext = RunContext(),
) -> MapResult:
    """Which parts of each book score like trained text (``audit.localize``): every book cut into its chapters,
    each segment's p-value against windows of the calibration books ``nonmembers`` (known non-members) at the same
    place and of the same length, Benjamini–Hochberg over the book's segments, a verdict per segment; with ``out``,
    ``map.csv``/``.json``/``.png``/``.html`` written there (a new or empty folder, or an earlier map with
    ``overwrite``)."""
    from docaudit.audit.localize import map_documents
    from docaudit.query.models import load_model
    from docaudit.report.localize import write_map

    if out is not None:
        prepare_output(out, "map", overwrite, _inputs(books, nonmembers, model))
    skips = Skips() if reading.skips is None else reading.skips
    read = {"raw": reading.raw, "normalize_chars": reading.normalize_chars, "skips": skips, "progress": run.progress}
    judged = load_documents(books, **read)
    calibration = load_documents(nonmembers, **read)
    with scaled(run) as run:
        lm = model if isinstance(model, LoadedModel) else load_model(model)
        result = map_documents(judged, calibration, lm, spec, run.progress)
    result.info["skipped"] = skips.as_json()
    if run.command is not None:
        result.info["command"] = list(run.command)
    if out is not None:
        write_map(result, Path(out), overwrite)
    return result


def synthetic_controls(
    books,
    model: ModelConfig | LoadedModel = ModelConfig(),
    generator: ModelConfig | LoadedModel = ModelConfig(),
    reference: ModelConfig | LoadedModel | None = None,
    library=None,
    config=None,
    documents: DocumentSpec = DocumentSpec(),
    run: RunContext = RunContext(),
) -> dict:
    """Test each of ``books`` for membership in ``model`` against synthetic suffixes ``generator`` writes for the
    books' own prefixes (``audit.synthetic_controls``): the null from the never-seen texts ``library``, a
    ``reference`` model that cannot have seen the books, or both. Returns the books' tests and verdicts, the
    library's, the null in words, the settings, the models' records and the skipped documents."""

    from docaudit.audit.synthetic_controls import controls_audit
    from docaudit.config import ControlsConfig
    from docaudit.errors import DocauditError
    from docaudit.provenance import model_record
    from docaudit.query.generate import require_in_process
    from docaudit.query.models import load_model

    config = config or ControlsConfig()
    if library is None and reference is None:
        raise DocauditError("synthetic controls need a null: give --null-library DIR, --reference MODEL, or both")
    skips = documents.skips if documents.skips is not None else Skips()
    progress = run.progress
    docs = load_documents(books, documents.raw, progress, skips, documents.normalize_chars)
    library_docs = None
    if library is not None:
        library_docs = load_documents(library, documents.raw, progress, skips, documents.normalize_chars)
    given = {"target": model, "generator": generator, "reference": reference}
    given = {role: m for role, m in given.items() if m is not None}
    for role, m in given.items():
        require_in_process(m, f"the {role}")
    loaded = {role: m if isinstance(m, LoadedModel) else load_model(m) for role, m in given.items()}
    for role, m in loaded.items():
        require_in_process(m, f"the {role}")
    for role in ("generator", "reference"):
        if role in loaded and loaded[role].identity == loaded["target"].identity:
            raise DocauditError(f"the {role} is the target model itself: give --{role} another model")
    with showing(progress):
        result = controls_audit(docs, library_docs, loaded, config, run)
    null = (
        "t prediction interval against the null library" if library is not None else "t-test of the contrast against 0"
    )
    if reference is not None:
        null += ", contrasts net of the reference model's"
    result.update(
        null=null,
        settings=config.used(run.seed),
        generator=model_record(loaded["generator"]),
        reference=model_record(loaded["reference"]) if "reference" in loaded else None,
        skipped=skips.as_json(),
        inputs=document_records(docs, "judged") + document_records(library_docs or [], "library"),
        model=model_record(loaded["target"]),
    )
    return result
