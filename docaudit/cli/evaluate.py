"""``evaluate`` (every method on the same k-fold chunks) and ``score`` (raw scores per document)."""

from __future__ import annotations

from pathlib import Path

import click

from docaudit.cli.command import command, friendly_errors, option, run_context
from docaudit.cli.echo import echo_result, say, skipped_note, warn_skipped
from docaudit.cli.inputs import dataset_options, labelled_dataset_options, labelled_sets
from docaudit.cli.options import (
    cleaning_options,
    config_from,
    detector_config,
    detector_options,
    drop_duplicates_option,
    field_option,
    folds_option,
    format_option,
    freq_corpus_option,
    meta_options,
    methods_option,
    model_config,
    model_options,
    out_option,
    overwrite_option,
    query_config,
    query_options,
    ray_config,
    ray_options,
    ref_config,
    seed_option,
    strict_option,
    trees_option,
)
from docaudit.cli.preflight import dry_run_option, preflight
from docaudit.config import MetaConfig, ScalingConfig
from docaudit.corpus.documents import duplicates_note
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec


@command()
@labelled_sets()
@labelled_dataset_options
@model_options
@ray_options
@query_options
@methods_option
@detector_options
@freq_corpus_option
@field_option(ScalingConfig, "n_sequences")
@folds_option
@seed_option()
@meta_options
@trees_option
@option("--meta/--no-meta", default=True, show_default=True, help="Include the meta-classifier.", section="method")
@option(
    "--blind/--no-blind",
    default=True,
    show_default=True,
    help="Include the model-free baselines (tfidf, nb, dates) on the same folds.",
    section="method",
)
@option(
    "--beyond",
    default="auto",
    show_default=True,
    help="The membership score tested for evidence beyond the blind baseline: meta_classifier, a detector "
    "(document average) or DETECTOR:doc_threshold; auto = the meta-classifier, else the first detector; none = skip.",
    section="method",
)
@cleaning_options
@out_option("Write evaluation.csv/.json, roc.csv and roc.png here.")
@overwrite_option()
@drop_duplicates_option
@strict_option
@format_option
@dry_run_option
@friendly_errors
def evaluate(members, nonmembers, methods, meta, blind, beyond, out, overwrite, strict, fmt, **kw):
    """The meta-classifier and sequence-level detectors side by side on the same k-fold chunks.

    Detectors are scaled to documents three ways (paper sec. 6.2): `sequence` (AUC over sampled windows of
    --context tokens), `doc_avg` (mean sequence score) and `doc_threshold` (share of sequences above a threshold
    chosen on the training chunks). Prints mean ± std over folds of AUC and TPR at 10% / 1% FPR."""
    from docaudit import api
    from docaudit.audit.specs import BLIND_KINDS, EvaluationSpec

    spec = EvaluationSpec(
        # the folds reach the meta-classifier as evaluate's own, and the seed as the run's
        meta=config_from(MetaConfig, kw, skip=("folds",)) if meta else None,
        scaling=config_from(ScalingConfig, kw),  # checked before anything is read
        folds=kw["folds"],
        blind_kinds=BLIND_KINDS if blind else None,
        beyond=None if beyond == "none" else beyond,
    )
    request = api.EvaluateRequest(
        members,
        nonmembers,
        Path(out) if out is not None else None,
        overwrite,
        ModelSpec(model_config(kw), ref_config(kw), kw["neighbor_model"]),
        query_config(kw),
        DetectorSpec(methods, detector_config(kw), list(kw["freq_corpus"]) or None),
        spec,
        DocumentSpec(kw["raw"], kw["normalize_chars"], kw["drop_duplicates"], strict=strict),
        run_context(ray_config(kw), kw["seed"]),
    )
    if preflight(request):
        return
    result = api.evaluate(request)
    info = result.evaluation.info
    warn_skipped(info["skipped"])
    for key in ("warning", "small_folds_warning"):
        if info.get(key):
            click.echo(info[key], err=True)
    if fmt == "table":
        _echo_evaluation(result.evaluation, kw["sequences"], kw["folds"], out)
    else:
        echo_result(result, fmt)


def sequence_count(per_document: list[int], context: int, most: int) -> str:
    """``40 sequences (windows of 128 tokens) from 4 documents, 10 per document (at most 40 sampled from each)``:
    the sequences scored, in what unit, from how many documents."""
    low, high = (min(per_document), max(per_document)) if per_document else (0, 0)
    each = f"{low}" if low == high else f"{low}-{high}"
    return (
        f"{sum(per_document)} sequences (windows of {context} tokens) from {len(per_document)} documents, {each} per "
        f"document (at most {most} sampled from each)"
    )


def _echo_evaluation(result, sequences: int, folds: int, out) -> None:
    """What ``evaluate`` prints for people: the sets and model, each method's row, AUC by level, beyond blind."""
    from docaudit.report.tables import format_auc_pivot, format_beyond_blind, format_methods_table, format_query

    info = result.info
    model = (
        f"model {info['model_identity']}; query: {format_query(info['query'])}; "
        + sequence_count(info["sequences_per_document"], info["query"]["context"], sequences)
        if "model_identity" in info
        else "no model (blind baseline only)"
    )
    say(
        f"{info['n_members']} members, {info['n_nonmembers']} non-members{skipped_note(info['skipped'])}; "
        f"{folds}-fold chunks; {model}" + duplicates_note(info["duplicates_dropped"], "; ")
    )
    say(format_methods_table(result.table))
    say("\nAUC by level:")
    say(format_auc_pivot(result.table))
    if result.beyond_blind:
        say("\n" + format_beyond_blind(result.beyond_blind))
    say(f"\nwall time {info['wall_seconds']} s" + (f"; wrote {out}" if out else ""))


@command()
@click.argument("documents", nargs=-1, required=True, type=click.Path())
@model_options
@dataset_options
@ray_options
@query_options
@methods_option
@detector_options
@freq_corpus_option
@seed_option("detector")
@cleaning_options
@strict_option
@format_option
@dry_run_option
@friendly_errors
def score(documents, methods, freq_corpus, raw, normalize_chars, strict, fmt, **kw):
    """Raw membership scores per document, higher = more member-like.

    A document with fewer tokens than --context is one window, scored in one forward pass: its numbers are the
    sequence-level definitions exactly. A longer document is scored over all its windows' tokens (each window an
    independent pass; text methods' extra passes likewise over the whole lowercased / augmented text). With
    --max-tokens every method scores the same excerpt of each document. Each row gives the context and stride
    used; a document that cannot be used is a row saying why."""
    from docaudit import api

    request = api.ScoreRequest(
        documents,
        ModelSpec(model_config(kw), ref_config(kw), kw["neighbor_model"]),
        query_config(kw),
        DetectorSpec(methods, detector_config(kw), list(freq_corpus) or None),
        DocumentSpec(raw, normalize_chars, strict=strict),
        run_context(ray_config(kw), kw["seed"]),
    )
    if preflight(request):
        return
    result = api.score(request)
    warn_skipped(result.skipped)
    echo_result(result, fmt, _score_table)


def _score_table(rows) -> str:
    from docaudit.report.tables import rows_table

    return rows_table(rows)
