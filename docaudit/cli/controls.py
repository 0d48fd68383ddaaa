"""``controls``: the membership test whose controls are synthetic suffixes written from the judged book itself."""

from __future__ import annotations

import click

from docaudit.api.books import run_like
from docaudit.cli.command import command, friendly_errors, option, run_context, show_progress
from docaudit.cli.echo import echo_result, say, warn_skipped
from docaudit.cli.options import (
    cleaning_options,
    config_from,
    field_options,
    format_option,
    model_config,
    model_options,
    null_library_option,
    out_option,
    overwrite_option,
    seed_option,
    strict_option,
)
from docaudit.cli.preflight import controls_line, dry_run, dry_run_option, echo_controls_dry_run
from docaudit.config import CONTROLS_PRESETS, ControlsConfig
from docaudit.run import DocumentSpec

SETTINGS = (
    "passages",
    "stretch_tokens",
    "context_tokens",
    "prefix_tokens",
    "suffix_tokens",
    "samples",
    "temperature",
    "block",
    "min_library",
    "placebo_alpha",
    "alpha",
)


@command()
@click.argument("books", nargs=-1, required=True, type=click.Path())
@null_library_option(
    "Texts the target never saw (files or folders), treated like the books: the null (default: the library "
    "stored for the embedded model, at --preset fast)."
)
@model_options
@option(
    "--generator",
    default=None,
    help="Model writing the synthetic suffixes (forms of --model; default the embedded Gemma).",
    section="model",
)
@option(
    "--reference",
    default=None,
    help="Model that cannot have seen the books: its contrast is subtracted (forms of --model).",
    section="model",
)
@option(
    "--preset",
    type=click.Choice(sorted(CONTROLS_PRESETS)),
    default=None,
    help="Named settings (fast: 16 passages of 32+32+32 tokens, one per 704 tokens, 3 suffixes; default: fast "
    "with the stored library, else default); options given explicitly win.",
    section="method",
)
@field_options(ControlsConfig, *SETTINGS)
@seed_option("controls")
@cleaning_options
@out_option("Write controls.json, controls.csv and controls.html here.")
@overwrite_option()
@strict_option
@dry_run_option
@format_option
@friendly_errors
def controls(books, library, generator, reference, preset, raw, normalize_chars, out, overwrite, strict, fmt, **kw):
    """Test BOOKS for membership against synthetic suffixes a generator writes for each book's own prefixes."""
    from docaudit import api
    from docaudit.report.controls import format_controls

    given = click.get_current_context().get_parameter_source
    preset = preset or ("fast" if not library and reference is None else "default")
    config = config_from(
        ControlsConfig, kw, **{k: v for k, v in CONTROLS_PRESETS[preset].items() if given(k).name == "DEFAULT"}
    )
    target = model_config(kw)
    request = api.ControlsRequest(
        list(books),
        target,
        run_like(target, generator),
        None if reference is None else run_like(target, reference),
        list(library) or None,
        config,
        DocumentSpec(raw=raw, normalize_chars=normalize_chars, strict=strict),
        run_context(seed=kw["seed"]),
        out,
        overwrite,
    )
    [estimate] = api.estimate(request)
    if dry_run():
        echo_controls_dry_run(estimate)
        return
    if show_progress():
        click.echo(controls_line(estimate.controls), err=True)
    result = api.synthetic_controls(request)
    warn_skipped(result.controls["skipped"])
    if fmt == "table":
        say(format_controls(result.controls) + (f"\n\nwrote {out}" if out else ""))
    else:
        echo_result(result, fmt)
