"""``map``: which chapters of a book score like trained text, each against the same place in known non-members."""

from __future__ import annotations

import click

from docaudit.cli.command import command, friendly_errors, run_context
from docaudit.cli.echo import echo_result, say, warn_skipped
from docaudit.cli.inputs import documents_option
from docaudit.cli.options import (
    alpha_option,
    cleaning_options,
    config_from,
    field_option,
    field_options,
    format_option,
    model_config,
    model_options,
    out_option,
    overwrite_option,
    strict_option,
)
from docaudit.cli.preflight import dry_run_option, preflight
from docaudit.config import DetectorConfig, LocalizeConfig, QueryConfig
from docaudit.run import DocumentSpec


@command("map")
@click.argument("books", nargs=-1, required=True, type=click.Path())
@documents_option(
    "--calibrate-nonmembers",
    "Books known not to be in the training data, like the judged books in era and genre (dir or .txt; repeatable).",
    required=True,
)
@model_options
@field_options(QueryConfig, "context", "stride", "batch_size")
@field_option(
    QueryConfig,
    "max_tokens",
    help="Map only the first this many tokens of each book and calibration book (bounds the work per book; "
    "--dry-run gives the time).",
)
@field_options(LocalizeConfig, "method", "segment_words", "min_segment_words", "min_segment_tokens")
@field_options(DetectorConfig, "k")
@alpha_option("Level of the segments' verdicts: evidence when the Benjamini-Hochberg q-value over a book is below it.")
@cleaning_options
@out_option("Write map.csv, map.json, map.png and map.html here.")
@overwrite_option()
@strict_option
@format_option
@dry_run_option
@friendly_errors
def localize(books, calibrate_nonmembers, alpha, out, overwrite, strict, fmt, **kw):
    """Which chapters of each book score like trained text: the book cut into its chapters (or runs of
    --segment-words words), queried once, each segment's score compared with windows of the same length at the
    same place in the calibration books (inside one of their chapters), Benjamini-Hochberg over the book's segments,
    and a verdict per segment."""
    from docaudit import api
    from docaudit.audit.specs import MapSpec
    from docaudit.report.localize import map_text

    query = config_from(QueryConfig, kw, skip=("excerpt",))
    spec = MapSpec(config_from(LocalizeConfig, kw), config_from(DetectorConfig, kw, skip=("pac_copies",)), query, alpha)
    request = api.MapRequest(
        books,
        calibrate_nonmembers,
        out,
        overwrite,
        model_config(kw),
        spec,
        DocumentSpec(kw["raw"], kw["normalize_chars"], strict=strict),
        run_context(),
    )
    if preflight(request):
        return
    result = api.map_books(request)
    warn_skipped(result.map.info["skipped"])
    if fmt != "table":
        echo_result(result, fmt)
    else:
        say(map_text(result.map))
        if out:
            say(f"\nwrote {out}")
