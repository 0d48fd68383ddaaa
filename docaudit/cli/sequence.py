"""``sequence``: sequence-level evaluation, every text scored whole, as benchmark papers report it."""

from __future__ import annotations

from pathlib import Path

import click

from docaudit.cli.command import command, friendly_errors, option, run_context
from docaudit.cli.echo import echo_csv, echo_result, say, skipped_note, warn_skipped
from docaudit.cli.inputs import labelled_sets, sequence_dataset_options
from docaudit.cli.options import (
    cleaning_options,
    config_from,
    detector_config,
    detector_options,
    drop_duplicates_option,
    field_option,
    field_options,
    format_option,
    freq_corpus_option,
    methods_option,
    model_config,
    model_options,
    out_option,
    overwrite_option,
    ray_config,
    ray_options,
    ref_config,
    seed_option,
    strict_option,
)
from docaudit.cli.preflight import dry_run_option, preflight
from docaudit.config import SequenceConfig, check_range
from docaudit.corpus.documents import duplicates_note
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec


@command()
@labelled_sets("texts")
@sequence_dataset_options
@model_options
@ray_options
@methods_option
@detector_options
@field_option(SequenceConfig, "max_context")
@freq_corpus_option
@option(
    "--recall-prefix",
    type=click.Path(),
    default=None,
    help="ReCaLL: a text file of non-member text put before each text "
    f"(default: {SequenceConfig.recall_shots} non-member texts, left out of the evaluation).",
    section="method",
)
@field_options(SequenceConfig, "recall_shots", "n_boot", "blind_folds")
@seed_option()
@cleaning_options
@out_option("Write the metrics and per-sample scores here.")
@overwrite_option()
@drop_duplicates_option
@strict_option
@format_option
@dry_run_option
@friendly_errors
def sequence(members, nonmembers, methods, recall_prefix, out, overwrite, strict, fmt, **kw):
    """Sequence-level evaluation, as benchmark papers report it: every text (e.g. a WikiMIA row) scored whole by
    every detector, AUC and TPR at 10% / 5% / 1% FPR with 95% bootstrap intervals, overall and per WikiMIA length
    bucket (32/64/128/256 words), and the Min-K% / Min-K%++ k sweep (0.1 to 1.0) from the same query pass.
    --format csv prints the metrics as CSV; --out also saves every text's scores (CSV and JSONL, with its id,
    label and group)."""
    check_range("--max-context", kw["max_context"], 2)
    from docaudit import api

    request = api.SequenceRequest(
        members,
        nonmembers,
        Path(out) if out is not None else None,
        overwrite,
        ModelSpec(model_config(kw), ref_config(kw), kw["neighbor_model"]),
        DetectorSpec(methods, detector_config(kw), list(kw["freq_corpus"]) or None),
        config_from(SequenceConfig, kw),
        recall_prefix_file=recall_prefix,
        reading=DocumentSpec(kw["raw"], kw["normalize_chars"], kw["drop_duplicates"], strict=strict),
        run=run_context(ray_config(kw), kw["seed"]),
    )
    if preflight(request):
        return
    outcome = api.sequence(request)
    result = outcome.evaluation
    info = result["info"]
    warn_skipped(info["skipped"])
    if info["warning"]:
        click.echo(info["warning"], err=True)
    if fmt == "json":
        echo_result(outcome)
        return
    metrics = result["metrics"]
    if fmt == "csv":
        echo_csv(metrics)
        return
    from docaudit.report.tables import format_sequence_metrics

    say(
        f"{info['n_members']} member and {info['n_nonmembers']} non-member texts{skipped_note(info['skipped'])}; "
        f"model {info['model_identity']}; each text in one window of up to {info['context']} tokens"
        + duplicates_note(info["duplicates_dropped"], "; ")
    )
    say(format_sequence_metrics(metrics))
    say(f"\nwall time {info['wall_seconds']} s" + (f"; wrote {out}" if out else ""))
