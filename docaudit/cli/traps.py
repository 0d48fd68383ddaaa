"""``traps make`` (plant generated sequences in documents before publishing them) and ``traps detect`` (test a
model for them later)."""

from __future__ import annotations

from pathlib import Path

import click

from docaudit.cli.command import friendly_errors, group, option, show_progress
from docaudit.cli.echo import echo_csv, echo_json
from docaudit.cli.options import (
    config_from,
    field_option,
    field_options,
    format_option,
    former_option,
    model_config,
    model_options,
    overwrite_option,
    ref_config,
)
from docaudit.config import ModelConfig, TrapConfig


@group()
def traps():
    """Copyright traps: plant detectable sequences in documents before publishing them, test a model later."""


@traps.command("make")
@click.argument("documents", nargs=-1, required=True, type=click.Path())
@option(
    "--out", required=True, type=click.Path(), help="New folder for the trapped copies (to publish).", section="output"
)
@option(
    "--registry",
    required=True,
    type=click.Path(),
    help="File for the PRIVATE registry (never inside --out).",
    section="output",
)
@option(
    "--generator",
    default=None,
    help="Model generating the traps (forms of --model; default embedded Gemma).",
    section="model",
)
@field_option(ModelConfig, "device")
@field_options(TrapConfig, "tokens", "per_document", "copies", "min_perplexity", "max_perplexity", "jaccard", "seed")
@overwrite_option("Replace an earlier trap output at --out and its registry.")
@format_option
@friendly_errors
def traps_make(documents, out, registry, generator, device, overwrite, fmt, **kw):
    """Generate traps and controls, plant the traps at random paragraph boundaries of copies of DOCUMENTS."""
    config = config_from(TrapConfig, kw)
    from docaudit import api
    from docaudit.report.traps import planted_rows

    plan = api.traps_make(
        list(documents),
        Path(out),
        Path(registry),
        ModelConfig(model=generator, device=device),
        config,
        overwrite,
        show_progress(),
    )
    rows = planted_rows(plan, Path(out))
    if fmt == "json":
        echo_json(
            {"registry": str(registry), "documents": rows, "candidates": plan.candidates, "rejected": plan.rejected}
        )
    elif fmt == "csv":
        echo_csv(rows)
    else:
        click.echo(
            f"planted {config.per_document} traps x {config.copies} copies of {config.tokens} tokens in each of "
            f"{len(rows)} documents, written to {out} (originals untouched); {plan.candidates} candidates generated, "
            f"rejected: {plan.rejected or 'none'}"
        )
        click.echo(f"registry: {registry} -- PRIVATE, do not publish it (it names the traps and the controls)")


@traps.command("detect")
@option("--registry", required=True, type=click.Path(), help="The private registry of traps make.", section="inputs")
@model_options
@option("--ref-model", default=None, help="Reference model for the ratio score (forms of --model).", section="model")
@former_option("--reference-model", "ref_model", "--ref-model", default=None)
@field_option(TrapConfig, "alpha")
@format_option
@friendly_errors
def traps_detect(registry, alpha, fmt, **kw):
    """Test a model for the traps of a registry: AUC traps vs controls and an exact one-sided p-value per document."""
    from docaudit import api
    from docaudit.report.traps import detection_table, format_detection

    result = api.traps_detect(
        Path(registry),
        model_config(kw),
        ref_config(kw),
        alpha=alpha,
        progress=show_progress(),
    )
    if fmt == "json":
        echo_json(result.as_json())
    elif fmt == "csv":
        echo_csv(detection_table(result))
    else:
        click.echo(format_detection(result))
