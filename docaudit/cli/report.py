"""``report``: a verdict and a contamination rate per book, calibrated on known member and non-member books."""

from __future__ import annotations

from pathlib import Path

import click

from docaudit.cli.command import command, friendly_errors, option, run_context
from docaudit.cli.echo import echo_result, say, skipped_note, warn_skipped
from docaudit.cli.inputs import dataset_options, documents_option
from docaudit.cli.options import (
    alpha_option,
    cleaning_options,
    config_from,
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
from docaudit.cli.preflight import dry_run_option, preflight
from docaudit.config import ContaminationConfig, TrainConfig
from docaudit.corpus.documents import duplicates_note
from docaudit.errors import DocauditError
from docaudit.methods.detectors import METHODS
from docaudit.run import DocumentSpec, ModelSpec


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
    "Level of the per-book verdicts: evidence of membership when the Benjamini-Yekutieli q-value is below it (with "
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
    from docaudit import api
    from docaudit.audit.specs import ReportSpec
    from docaudit.report.contamination import report_warnings

    spec = ReportSpec(config_from(ContaminationConfig, kw), alpha=kw["alpha"])  # every count checked at once
    request = api.ReportRequest(
        books,
        calibrate_members,
        calibrate_nonmembers,
        Path(out),
        overwrite,
        method_alias or method,
        ModelSpec(model_config(kw), ref_config(kw), kw["neighbor_model"]),
        detector_config(kw),
        spec,
        DocumentSpec(kw["raw"], kw["normalize_chars"], kw["drop_duplicates"], strict=strict),
        run_context(ray_config(kw), kw["seed"]),
    )
    folders = request.folders()
    if len(folders) > 1 and fmt != "table":
        raise DocauditError(
            f"--format {fmt} prints one report: give one method, or read OUT/<method>/report.json of each "
            "(several methods write one complete report per method there)"
        )
    if preflight(request):
        return
    result = api.report(request)
    for i, (name, one) in enumerate(result.reports.items()):
        if len(folders) > 1:
            say(f"{'' if i == 0 else chr(10)}== {name}: {one.out} ==")
        warn_skipped(one.report.info["skipped"])
        for warning in report_warnings(one.report.info):
            click.echo(warning, err=True)
        if fmt == "table":
            _echo_report(one.report, one.out)
        else:
            echo_result(one, fmt)


def _echo_report(result, out) -> None:
    """What ``report`` prints for people: the calibration, each book's rate and verdict, how to read a rate."""
    from docaudit.report.contamination import format_book_rates, reference_ranges
    from docaudit.report.tables import format_beyond_blind
    from docaudit.report.verdicts import format_report_verdicts

    info = result.info
    say(
        f"{info['n_books']} books, {info['n_calibration_members']} + {info['n_calibration_nonmembers']} "
        f"calibration books{skipped_note(info['skipped'])}; snippets scored with context {info['context']} "
        f"(stride {info['stride']})"
    )
    say(
        f"threshold {result.threshold:.4g} ({info['threshold_rule']}); calibration snippet AUC "
        f"{info['calibration_auc']:.3f}, accuracy {info['calibration_accuracy']:.1%}"
        + duplicates_note(info["duplicates_dropped"], "; calibration: ")
    )
    if info["blind_auc"] is not None:
        say(f"blind baseline (no model) on the calibration books: AUC {info['blind_auc']:.3f}")
    say(f"calibration books, {format_beyond_blind(info['beyond_blind'])}")
    say(format_report_verdicts(result.books, info))
    say(format_book_rates(result.books, info["confidence"]))
    say(
        f"read a rate against the calibration books: {reference_ranges(result.calibration)} A rate inside the "
        "non-members' range is what a book outside the training data gives."
    )
    say(f"wall time {info['wall_seconds']} s; wrote {out}/report.html")
