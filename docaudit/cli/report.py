"""``report``: a verdict and a contamination rate per book, calibrated on known member and non-member books."""

from __future__ import annotations

import json
from pathlib import Path

import click

from docaudit.cli.command import command, friendly_errors, option, show_progress
from docaudit.cli.echo import echo_csv, echo_json, skipped_note, warn_skipped
from docaudit.cli.inputs import dataset_options, documents_option
from docaudit.cli.options import (
    alpha_option,
    cleaning_options,
    detector_config,
    detector_options,
    field_option,
    field_options,
    format_option,
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
from docaudit.cli.preflight import dry_run_option, model_inputs, preflight_report
from docaudit.config import ContaminationConfig, TrainConfig
from docaudit.corpus.documents import duplicates_note
from docaudit.errors import DocauditError
from docaudit.methods.detectors import METHODS
from docaudit.outputs import prepare_parent


@command()
@click.argument("books", nargs=-1, required=True, type=click.Path())
@documents_option("--calibrate-members", "Books known to be members (dir or .txt; repeatable).", required=True)
@documents_option("--calibrate-nonmembers", "Books known to be non-members (repeatable).", required=True)
@dataset_options
@model_options
@ray_options
@field_option(
    ContaminationConfig,
    "method",
    "--methods",
    "method",
    help=f"The detectors that score the snippets (comma-separated: {', '.join(METHODS)}); with several, one "
    "complete report per method is written to OUT/<method>/.",
)
@option("--method", "method_alias", default=None, hidden=True, help="Former name of --methods.", section="method")
@detector_options
@field_options(
    ContaminationConfig, "snippets", "snippet_words", "target_fpr", "max_context", "confidence", "min_snippets"
)
@field_option(ContaminationConfig, "book_bootstrap")
@alpha_option(
    "Level of the per-book verdicts: evidence of membership when the Benjamini-Hochberg q-value is below it (with "
    "several --methods, below it divided by their number)."
)
@seed_option()
@cleaning_options
@out_option("Write report.csv, report.html and the plots here.", required=True)
@overwrite_option()
@field_option(
    TrainConfig,
    "drop_duplicates",
    help="Leave out books found in both calibration sets (by default they are an error).",
)
@strict_option
@format_option
@dry_run_option
@friendly_errors
def report(books, calibrate_members, calibrate_nonmembers, method, method_alias, out, overwrite, strict, fmt, **kw):
    """Verdict and contamination rate per book: the share of its random snippets scoring over a threshold
    calibrated on known member and non-member books (Min-K% Prob paper, sec. 5), beside the calibration books' own
    rates, with a Wilson interval, a book-level bootstrap interval and the debiased fraction. Several --methods
    write one complete report per method, to OUT/<method>/, each deciding at --alpha divided by their number."""
    methods = list(dict.fromkeys(m.strip() for m in (method_alias or method).split(",") if m.strip()))
    if unknown := [m for m in methods if m not in METHODS]:
        raise DocauditError(f"--methods: unknown method(s) {', '.join(unknown)} (methods: {', '.join(METHODS)})")
    if not methods:
        raise DocauditError("--methods: give at least one method")
    if len(methods) > 1 and fmt != "table":
        raise DocauditError(
            f"--format {fmt} prints one report: give one method, or read OUT/<method>/report.json of each "
            "(several methods write one complete report per method there)"
        )
    folders = {name: Path(out) if len(methods) == 1 else Path(out) / name for name in methods}
    if len(methods) > 1:  # the folder of the reports, checked as an output folder is
        given = (*books, *calibrate_members, *calibrate_nonmembers, *model_inputs(kw))
        prepare_parent(out, methods, given)
    checked = [  # every input and output folder before a model loads; with --dry-run, what each would cost
        preflight_report(books, calibrate_members, calibrate_nonmembers, (where, overwrite, name), strict, kw)
        for name, where in folders.items()
    ]
    if any(checked):
        return
    for i, (name, where) in enumerate(folders.items()):
        if len(methods) > 1:
            click.echo(f"{'' if i == 0 else chr(10)}== {name}: {where} ==")
        result = _run_report(
            books,
            calibrate_members,
            calibrate_nonmembers,
            name,
            where,
            overwrite,
            strict,
            kw | {"n_methods": len(methods)},
        )
        if fmt == "json":
            echo_json(json.loads((where / "report.json").read_text(encoding="utf-8")))
        elif fmt == "csv":
            from docaudit.report.contamination import verdict_first

            echo_csv(verdict_first(result.books))
        else:
            _echo_report(result, where)


def _run_report(books, calibrate_members, calibrate_nonmembers, method, out: Path, overwrite, strict, kw):
    """One report scored by ``method``, written to ``out``; its skipped books and warnings on stderr."""
    from docaudit import api
    from docaudit.corpus.documents import Skips
    from docaudit.report.contamination import report_warnings

    result = api.report(
        books,
        calibrate_members,
        calibrate_nonmembers,
        out,
        overwrite,
        model=model_config(kw),
        method=method,
        snippets=kw["snippets"],
        snippet_words=kw["snippet_words"],
        target_fpr=kw["target_fpr"],
        detector=detector_config(kw),
        seed=kw["seed"],
        max_context=kw["max_context"],
        confidence=kw["confidence"],
        min_snippets=kw["min_snippets"],
        n_methods=kw["n_methods"],
        raw=kw["raw"],
        normalize_chars=kw["normalize_chars"],
        ref_model=ref_config(kw),
        neighbor_model=kw["neighbor_model"],
        drop_duplicates=kw["drop_duplicates"],
        skips=Skips(strict),
        ray=ray_config(kw),
        book_bootstrap_samples=kw["resamples"],
        alpha=kw["alpha"],
        command=click.get_current_context().obj,
        progress=show_progress(),
    )
    info = result.info
    warn_skipped(info["skipped"])
    for warning in report_warnings(info):
        click.echo(warning, err=True)
    return result


def _echo_report(result, out) -> None:
    """What ``report`` prints for people: the calibration, each book's rate and verdict, how to read a rate."""
    from docaudit.report.contamination import format_book_rates, reference_ranges
    from docaudit.report.tables import format_beyond_blind
    from docaudit.report.verdicts import format_report_verdicts

    info = result.info
    click.echo(
        f"{info['n_books']} books, {info['n_calibration_members']} + {info['n_calibration_nonmembers']} "
        f"calibration books{skipped_note(info['skipped'])}; snippets scored with context {info['context']} "
        f"(stride {info['stride']})"
    )
    click.echo(
        f"threshold {result.threshold:.4g} ({info['threshold_rule']}); calibration snippet AUC "
        f"{info['calibration_auc']:.3f}, accuracy {info['calibration_accuracy']:.1%}"
        + duplicates_note(info["duplicates_dropped"], "; calibration: ")
    )
    if info["blind_auc"] is not None:
        click.echo(f"blind baseline (no model) on the calibration books: AUC {info['blind_auc']:.3f}")
    click.echo(f"calibration books, {format_beyond_blind(info['beyond_blind'])}")
    click.echo(format_report_verdicts(result.books, info))
    click.echo(format_book_rates(result.books, info["confidence"]))
    click.echo(
        f"read a rate against the calibration books: {reference_ranges(result.calibration)} A rate inside the "
        "non-members' range is what a book outside the training data gives."
    )
    click.echo(f"wall time {info['wall_seconds']} s; wrote {out}/report.html")
