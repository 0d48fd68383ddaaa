"""The Python API: one function per command.

Each function checks its output folder before anything is queried (``outputs.prepare_output``), runs the audit
from ``docaudit.audit`` (or the experiment from ``docaudit.lab``) and writes the files through ``docaudit.report``.
The command line parses its options, calls one of these and prints the result. Every function that queries a
model takes a keyword ``ray`` (a ``RayConfig``) to run its queries on Ray workers."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from docaudit.audit import meta
from docaudit.audit.contamination import ContaminationReport, contamination_report
from docaudit.audit.datacheck import check_sets
from docaudit.audit.dataset_level import dataset_test_documents
from docaudit.audit.evaluation import MethodsEvaluation, evaluate_methods
from docaudit.audit.scoring import score_documents
from docaudit.config import ModelConfig, RayConfig, TrainConfig
from docaudit.corpus.documents import Skips, load_documents
from docaudit.lab.experiment import run_lab
from docaudit.outputs import prepare_output
from docaudit.provenance import document_records
from docaudit.query.distributed import scale_out
from docaudit.query.models import LoadedModel
from docaudit.report.classifier import save_model_dir
from docaudit.report.contamination import write_contamination_report
from docaudit.report.evaluation import write_evaluation


def on_ray(func):
    """``func`` with a keyword ``ray``: given a :class:`RayConfig`, its queries run on Ray workers
    (docs/scaling.md); Ray is started or joined at the first query, and stopped at the end when started here."""

    @functools.wraps(func)
    def wrapper(*args, ray: RayConfig | None = None, **kwargs):
        with scale_out(ray):
            return func(*args, **kwargs)

    return wrapper


grid = on_ray(meta.grid)
predict = on_ray(meta.predict)
score = on_ray(score_documents)
dataset_test = on_ray(dataset_test_documents)


INPUT_OPTIONS = ("model", "ref_model", "neighbor_model", "freq_corpus")  # the options of a command naming inputs


def _inputs(*groups, options: dict | None = None) -> list:
    """Every local path among ``groups`` (path lists, single paths, model configs; None skipped) and among the
    ``INPUT_OPTIONS`` of a command's ``options``: what an output folder must not be or contain."""
    paths = []
    for group in groups + tuple((options or {}).get(name) for name in INPUT_OPTIONS):
        if isinstance(group, ModelConfig):
            group = group.model
        if group is None or isinstance(group, LoadedModel):
            continue
        paths += [group] if isinstance(group, (str, os.PathLike)) else list(group)
    return paths


@on_ray
def train(
    members,
    nonmembers,
    config: TrainConfig = TrainConfig(),
    out: Path | None = None,
    model: LoadedModel | None = None,
    progress: bool = False,
    overwrite: bool = False,
    skips: Skips | None = None,
) -> meta.TrainResult:
    """Evaluate the meta-classifier on k-fold chunks beside the blind baseline, fit it on all documents and, with
    ``out``, save it there with its card and ROC curves (``out``: a new or empty folder, or an earlier classifier
    with ``overwrite``)."""
    if out is not None:
        prepare_output(out, "classifier", overwrite, _inputs(members, nonmembers, config.model))
    result = meta.train(members, nonmembers, config, model, progress, skips)
    if out is not None:
        save_model_dir(
            Path(out),
            result.estimator,
            result.card,
            result.evaluation,
            overwrite,
            result.documents,
            result.extras.get("fold_models"),
        )
        result.out = Path(out)
    return result


@on_ray
def evaluate(members, nonmembers, out: Path | None = None, overwrite: bool = False, **options) -> MethodsEvaluation:
    """Every method on the same k-fold chunks (``audit.evaluation.evaluate_methods`` takes ``options``); with
    ``out``, the tables, JSON and ROC curves written there."""
    if out is not None:
        prepare_output(
            out,
            "evaluation",
            overwrite,
            _inputs(members, nonmembers, options=options),
        )
    result = evaluate_methods(members, nonmembers, **options)
    if out is not None:
        write_evaluation(result, Path(out), overwrite)
    return result


@on_ray
def sequence(
    members,
    nonmembers,
    out: Path | None = None,
    overwrite: bool = False,
    recall_prefix_file=None,
    **options,
) -> dict:
    """Sequence-level evaluation (``audit.sequence_level.evaluate_sequences`` takes ``options``): every text
    scored whole by every detector; with ``out``, the metrics and per-sample scores written there.
    ``recall_prefix_file``: a UTF-8 text file holding ReCaLL's non-member prefix."""
    from docaudit.audit.sequence_level import evaluate_sequences
    from docaudit.corpus.documents import read_text
    from docaudit.report.sequence_level import write_sequence_evaluation

    if out is not None:
        prepare_output(
            out,
            "sequence",
            overwrite,
            _inputs(members, nonmembers, recall_prefix_file, options=options),
        )
    if recall_prefix_file is not None:
        options["recall_prefix"] = read_text(recall_prefix_file)
    result = evaluate_sequences(members, nonmembers, **options)
    if out is not None:
        write_sequence_evaluation(result, Path(out), overwrite)
    return result


@on_ray
def report(
    books, calibrate_members, calibrate_nonmembers, out: Path, overwrite: bool = False, **options
) -> ContaminationReport:
    """Per-book contamination rates (``audit.contamination.contamination_report`` takes ``options``), written to
    ``out`` as CSV, JSON, plots and an HTML page."""
    prepare_output(
        out,
        "report",
        overwrite,
        _inputs(books, calibrate_members, calibrate_nonmembers, options=options),
    )
    result = contamination_report(books, calibrate_members, calibrate_nonmembers, **options)
    write_contamination_report(result, Path(out), overwrite)
    return result


def data_check(
    set_a,
    set_b,
    raw: bool = False,
    normalize_chars: bool = False,
    folds: int = 5,
    seed: int = 0,
    drop_duplicates: bool = False,
    skips: Skips | None = None,
    progress: bool = False,
) -> dict:
    """Statistics of two document sets and the blind baseline between them, with no model; documents that cannot
    be used are listed under ``skipped``."""
    skips = Skips() if skips is None else skips
    docs_a, docs_b = (
        load_documents([s], raw=raw, progress=progress, skips=skips, normalize_chars=normalize_chars)
        for s in (set_a, set_b)
    )
    result = check_sets(docs_a, docs_b, folds=folds, seed=seed, progress=progress, drop_duplicates=drop_duplicates)
    inputs = document_records(docs_a, "a") + document_records(docs_b, "b")
    return result | {"skipped": skips.as_json(), "inputs": inputs}


@on_ray
def lab(corpus, out: Path, overwrite: bool = False, base_model: str | None = None, **options):
    """The randomized controlled experiment (``lab.experiment.run_lab`` takes ``options``), resumable in ``out``."""
    return run_lab(corpus, Path(out), base_model=base_model, overwrite=overwrite, **options)


def traps_make(
    docs,
    out: Path,
    registry: Path,
    generator: ModelConfig = ModelConfig(),
    config=None,
    overwrite: bool = False,
    progress: bool = False,
):
    """Plant copyright traps (``audit.traps.make_traps``) in each document of ``docs`` (read verbatim) and write the
    trapped copies to ``out`` and the private registry to ``registry``; the originals are only read."""
    from docaudit.audit.traps import make_traps
    from docaudit.config import TrapConfig
    from docaudit.report.traps import check_registry_path, write_trapped

    inputs = _inputs(docs, generator)
    prepare_output(out, "traps", overwrite, inputs)
    check_registry_path(registry, out, overwrite)
    documents = load_documents(docs, raw=True, progress=progress)
    plan = make_traps(documents, generator, config or TrapConfig(), progress)
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
