"""``probe``: membership tests of a model that only writes text (n-gram coverage, DE-COP)."""

from __future__ import annotations

import click

from docaudit.cli.command import command, friendly_errors, option, run_context
from docaudit.cli.echo import echo_result, warn_skipped
from docaudit.cli.options import (
    cleaning_options,
    config_from,
    field_options,
    format_option,
    model_config,
    null_library_option,
    out_option,
    overwrite_option,
    seed_option,
    strict_option,
)
from docaudit.cli.preflight import dry_run_option, preflight
from docaudit.config import ModelConfig, ProbeConfig
from docaudit.run import DocumentSpec

SETTINGS = (
    "probe",
    "endpoint",
    "statistic",
    "aggregate",
    "passages",
    "stretch_words",
    "prompt_words",
    "continuation_words",
    "samples",
    "new_tokens",
    "temperature",
    "decop_words",
    "max_unreadable",
    "floor_margin",
    "min_library",
    "alpha",
    "price_prompt",
    "price_completion",
)
MODEL = (
    "model",
    "device",
    "dtype",
    "api_base",
    "api_model",
    "api_key_env",
    "api_timeout",
    "api_retries",
    "api_document_timeout",
    "max_requests",
)


def _print_plan(cost: dict) -> None:
    where = (
        f"to {cost['server']}" if cost["server"] else "to the model run in this process (nothing leaves the machine)"
    )
    texts = f"{cost['texts']} text" + ("" if cost["texts"] == 1 else "s")
    click.echo(
        f"dry run: {cost['passages']:,} passages in {texts}; at most {cost['requests']:,} requests {where}, about "
        f"{cost['tokens_sent']:,} tokens sent and at most {cost['tokens_received']:,} received"
    )
    click.echo(
        f"  about {cost['seconds']:,.0f} s ({cost['seconds_per_request']:.3g} s per request, {cost['rate']}; "
        "answers already cached are not asked again)"
    )
    if cost["price"] is not None:
        click.echo(f"  about {cost['price']:.4g} at the prices given")
    click.echo("  nothing was sent, loaded or written")


@command()
@click.argument("books", nargs=-1, required=True, type=click.Path())
@null_library_option(
    "Texts the model never saw (for a deployed model: written after its cutoff), probed like the books: the null."
)
@option(
    "--paraphrases",
    type=click.Path(),
    default=None,
    help='decop: JSON lines {"passage": ..., "paraphrases": [three]}; the passages found in each text are asked.',
    section="inputs",
)
@field_options(ModelConfig, *MODEL)
@option(
    "--paraphraser",
    default=None,
    help="decop: model run here that paraphrases the passages when no --paraphrases (default the embedded Gemma).",
    section="model",
)
@field_options(ProbeConfig, *SETTINGS)
@seed_option("probe")
@cleaning_options
@out_option("Write probe.json and probe.csv here.")
@overwrite_option()
@strict_option
@dry_run_option
@format_option
@friendly_errors
def probe(books, library, paraphrases, paraphraser, raw, normalize_chars, out, overwrite, strict, fmt, **kw):
    """Test BOOKS for membership in a model that only writes text, by what it writes about their passages against
    what it writes about never-seen texts (--probe ngram: n-gram coverage of its continuations; decop: which of a
    passage and three paraphrases it calls verbatim). Nothing is sent anywhere but to the --api-base named."""
    from docaudit import api
    from docaudit.report.probes import format_probe

    target = model_config(kw)
    request = api.ProbeRequest(
        list(books),
        target,
        list(library) or None,
        config_from(ProbeConfig, kw),
        paraphrases,
        None if paraphraser is None else ModelConfig(model=paraphraser, device=target.device, dtype=target.dtype),
        DocumentSpec(raw=raw, normalize_chars=normalize_chars, strict=strict),
        run_context(seed=kw["seed"]),
        out,
        overwrite,
    )
    if preflight(request, lambda estimate: _print_plan(estimate.cost)):
        return
    result = api.probe(request)
    warn_skipped(result.probe["skipped"])
    if fmt == "table":
        click.echo(format_probe(result.probe) + (f"\n\nwrote {out}" if out else ""))
    else:
        echo_result(result, fmt)
