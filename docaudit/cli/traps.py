"""``traps make`` (plant generated sequences in documents before publishing them) and ``traps detect`` (test a
model for them later)."""

from __future__ import annotations

from pathlib import Path

import click

from docaudit.cli.command import friendly_errors, group, option, run_context
from docaudit.cli.echo import echo_result, say
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
    seed_option,
)
from docaudit.cli.preflight import dry_run, dry_run_option
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
@field_options(
    TrapConfig, "tokens", "per_document", "copies", "min_perplexity", "max_perplexity", "jaccard", "any_text"
)
@seed_option("traps")
@overwrite_option("Replace an earlier trap output at --out and its registry.")
@format_option
@dry_run_option
@friendly_errors
def traps_make(documents, out, registry, generator, device, overwrite, fmt, **kw):
    """Generate traps and controls, plant the traps at random paragraph boundaries inside the body of copies of
    DOCUMENTS (never in a Project Gutenberg header or licence)."""
    from docaudit import api

    config = config_from(TrapConfig, kw)
    request = api.TrapsMakeRequest(
        list(documents),
        Path(out),
        registry,
        ModelConfig(model=generator, device=device),
        config,
        overwrite,
        run_context(seed=kw["seed"]),
    )
    if dry_run():
        [estimate] = api.estimate(request)
        _echo_dry_run(estimate, generator is None, config)
        return
    result = api.traps_make(request)
    if fmt != "table":
        echo_result(result, fmt)
    else:
        say(
            f"planted {config.per_document} traps x {config.copies} copies of {config.tokens} tokens in each of "
            f"{len(result.rows)} documents, written to {out} (originals untouched); {result.plan.candidates} "
            f"candidates generated, rejected: {result.plan.rejected or 'none'}"
        )
        say(f"registry: {registry} -- PRIVATE, do not publish it (it names the traps and the controls)")


def _echo_dry_run(estimate, embedded: bool, config: TrapConfig) -> None:
    """What ``traps make --dry-run`` prints: what it would plant and write, after the checks; no model loaded."""
    plan = estimate.cost
    say(
        f"dry run: {plan['traps']} traps ({config.per_document} per document, and as many controls kept private) of "
        f"{config.tokens} tokens, {config.copies} copies each, in {len(estimate.files)} documents"
    )
    for row in plan["documents"]:
        say(f"  {row['document']}: +{row['added_bytes']:,} bytes ({row['growth']:+.1%})")
    minutes = plan["least_seconds"] / 60
    took = (
        f"at least ~{minutes:.0f} min of sampling were every candidate kept, at the embedded Gemma's measured rate on "
        "a 2-core CPU (the prose check rejects most of its samples: docs/traps.md)"
        if embedded
        else "not estimated (a rate is measured for the embedded generator only)"
    )
    say(f"  {plan['sequences']} sequences to generate; time {took}; sizes at 4 characters per token")
    say("  nothing was loaded or written")


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
    from docaudit.report.traps import format_detection

    request = api.TrapsDetectRequest(Path(registry), model_config(kw), ref_config(kw), alpha=alpha, run=run_context())
    result = api.traps_detect(request)
    if result.detection.warning:
        click.echo(result.detection.warning, err=True)
    if fmt != "table":
        echo_result(result, fmt)
    else:
        say(format_detection(result.detection))
