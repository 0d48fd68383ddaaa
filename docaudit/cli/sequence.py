"""``sequence``: sequence-level evaluation, every text scored whole, as benchmark papers report it."""

from __future__ import annotations

from pathlib import Path

import click

from docaudit.cli.command import command, friendly_errors, option, show_progress
from docaudit.cli.echo import echo_json, skipped_note, warn_skipped
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
from docaudit.cli.preflight import dry_run_option, model_inputs, preflight
from docaudit.config import QueryConfig, SequenceConfig, check_range
from docaudit.corpus.documents import duplicates_note


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
    output = (out, "sequence", overwrite, (*members, *nonmembers, recall_prefix, *model_inputs(kw)))
    check_range("--max-context", kw["max_context"], 2)
    whole = QueryConfig(context=kw["max_context"], max_tokens=kw["max_context"])  # each text in one window
    config = config_from(SequenceConfig, kw)
    if preflight(members, nonmembers, strict, output=output, query=whole, backend=kw["backend"], methods=methods):
        return
    from docaudit import api
    from docaudit.audit.sequence_level import sequence_json
    from docaudit.corpus.documents import Skips

    result = api.sequence(
        members,
        nonmembers,
        Path(out) if out is not None else None,
        overwrite,
        recall_prefix_file=recall_prefix,
        model=model_config(kw),
        methods=methods,
        detector=detector_config(kw),
        config=config,
        seed=kw["seed"],
        raw=kw["raw"],
        normalize_chars=kw["normalize_chars"],
        ref_model=ref_config(kw),
        neighbor_model=kw["neighbor_model"],
        freq_corpus=list(kw["freq_corpus"]) or None,
        drop_duplicates=kw["drop_duplicates"],
        skips=Skips(strict),
        ray=ray_config(kw),
        command=click.get_current_context().obj,
        progress=show_progress(),
    )
    info = result["info"]
    warn_skipped(info["skipped"])
    if info["warning"]:
        click.echo(info["warning"], err=True)
    if fmt == "json":
        echo_json(sequence_json(result))
        return
    metrics = result["metrics"]
    if fmt == "csv":
        click.echo(metrics.to_csv(index=False), nl=False)
        return
    from docaudit.report.tables import format_sequence_metrics

    click.echo(
        f"{info['n_members']} member and {info['n_nonmembers']} non-member texts{skipped_note(info['skipped'])}; "
        f"model {info['model_identity']}; each text in one window of up to {info['context']} tokens"
        + duplicates_note(info["duplicates_dropped"], "; ")
    )
    click.echo(format_sequence_metrics(metrics))
    click.echo(f"\nwall time {info['wall_seconds']} s" + (f"; wrote {out}" if out else ""))
