"""``map``: which chapters of a book score like trained text, each against the same place in known non-members."""

from __future__ import annotations

import click

from docaudit.cli.command import command, friendly_errors, show_progress
from docaudit.cli.echo import echo_csv, echo_json, warn_skipped
from docaudit.cli.inputs import documents_option
from docaudit.cli.options import (
    alpha_option,
    cleaning_options,
    config_from,
    field_options,
    format_option,
    model_config,
    model_options,
    out_option,
    overwrite_option,
    strict_option,
)
from docaudit.cli.preflight import dry_run_option, model_inputs, preflight
from docaudit.config import DetectorConfig, LocalizeConfig, QueryConfig


@command("map")
@click.argument("books", nargs=-1, required=True, type=click.Path())
@documents_option(
    "--calibrate-nonmembers",
    "Books known not to be in the training data, like the judged books in era and genre (dir or .txt; repeatable).",
    required=True,
)
@model_options
@field_options(QueryConfig, "context", "stride", "batch_size")
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
    same place in the calibration books, Benjamini-Hochberg over the book's segments, and a verdict per segment."""
    query = config_from(QueryConfig, kw, skip=("max_tokens", "excerpt"))
    output = (out, "map", overwrite, (*books, *calibrate_nonmembers, *model_inputs(kw)))
    if preflight((*books, *calibrate_nonmembers), None, strict, output=output, query=query, backend=kw["backend"]):
        return
    from docaudit import api
    from docaudit.audit.localize import MapSpec
    from docaudit.corpus.documents import Skips
    from docaudit.report.localize import map_frame, map_json, map_text
    from docaudit.run import DocumentSpec, RunContext

    spec = MapSpec(config_from(LocalizeConfig, kw), config_from(DetectorConfig, kw, skip=("pac_copies",)), query, alpha)
    result = api.map_books(
        books,
        calibrate_nonmembers,
        out,
        overwrite,
        model=model_config(kw),
        spec=spec,
        reading=DocumentSpec(kw["raw"], kw["normalize_chars"], skips=Skips(strict)),
        run=RunContext(progress=show_progress(), command=click.get_current_context().obj),
    )
    warn_skipped(result.info["skipped"])
    if fmt == "json":
        echo_json(map_json(result))
    elif fmt == "csv":
        echo_csv(map_frame(result).to_dict(orient="records"))
    else:
        click.echo(map_text(result))
        if out:
            click.echo(f"\nwrote {out}")
