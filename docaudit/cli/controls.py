"""``controls``: the membership test whose controls are synthetic suffixes written from the judged book itself."""

from __future__ import annotations

import click

from docaudit.cli.command import command, friendly_errors, option, show_progress
from docaudit.cli.echo import echo_csv, echo_json, warn_skipped
from docaudit.cli.options import (
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
from docaudit.cli.preflight import DRY_RUN_KEY, check_inputs, dry_run_option
from docaudit.config import CONTROLS_PRESETS, ControlsConfig, ModelConfig

SETTINGS = (
    "passages",
    "context_tokens",
    "prefix_tokens",
    "suffix_tokens",
    "samples",
    "temperature",
    "block",
    "min_library",
    "placebo_alpha",
    "alpha",
    "seed",
)


@command()
@click.argument("books", nargs=-1, required=True, type=click.Path())
@option(
    "--null-library",
    "library",
    multiple=True,
    type=click.Path(),
    help="Texts the target never saw (files or folders), treated like the books: the null (needed for a verdict).",
    section="inputs",
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
    default="default",
    show_default=True,
    help="Named settings (fast: 16 passages of 32+32+32 tokens, 3 suffixes); options given explicitly win.",
    section="method",
)
@field_options(ControlsConfig, *SETTINGS)
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
    from docaudit.audit.synthetic_controls import planned_cost
    from docaudit.corpus.documents import Skips
    from docaudit.report.controls import controls_json, controls_rows, format_controls, write_controls
    from docaudit.run import DocumentSpec

    given = click.get_current_context().get_parameter_source
    config = config_from(
        ControlsConfig, kw, **{k: v for k, v in CONTROLS_PRESETS[preset].items() if given(k).name == "DEFAULT"}
    )
    output = (out, "controls", overwrite, (*books, *library))
    files = check_inputs(list(books), list(library) or None, strict, output=output, names=("books", "null library"))
    if click.get_current_context().meta.get(DRY_RUN_KEY, False):
        cost = planned_cost(len(files or []), config, 2 if reference else 1)
        click.echo(
            f"dry run: at most {cost['passages']:,} passages in {cost['texts']} texts; {cost['tokens_generated']:,} "
            f"tokens generated and {cost['tokens_scored']:,} tokens scored (a cached book generates nothing)"
        )
        click.echo("  nothing was loaded or written")
        return
    target = model_config(kw)
    device = {"device": target.device, "dtype": target.dtype}
    result = api.synthetic_controls(
        list(books),
        target,
        ModelConfig(model=generator, **device),
        None if reference is None else ModelConfig(model=reference, **device),
        list(library) or None,
        config,
        DocumentSpec(raw=raw, normalize_chars=normalize_chars, skips=Skips(strict)),
        show_progress(),
    )
    if out:
        write_controls(result, out, overwrite)
    warn_skipped(result["skipped"])
    if fmt == "json":
        echo_json(controls_json(result))
    elif fmt == "csv":
        echo_csv(controls_rows(result))
    else:
        click.echo(format_controls(result) + (f"\n\nwrote {out}" if out else ""))
