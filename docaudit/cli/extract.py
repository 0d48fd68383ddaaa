"""``extract``: how much of each book a model writes back verbatim (p_z, Cooper et al. 2025)."""

from __future__ import annotations

import click

from docaudit.cli.command import command, friendly_errors, run_context
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
from docaudit.config import ContinuationConfig, ExtractConfig, ModelConfig
from docaudit.run import DocumentSpec

SETTINGS = (
    "prefix_tokens",
    "suffix_tokens",
    "stride",
    "top_k",
    "temperature",
    "n",
    "p",
    "max_tokens",
    "first_tokens",
    "batch_size",
    "passages",
    "mode",
)
CONTINUATION = tuple(ContinuationConfig.__dataclass_fields__)
MODEL = ("model", "device", "dtype", "backend", "kv_cache", "api_base", "api_model", "api_key_env", "api_tokenizer")
MODEL += ("api_logprobs", "api_timeout", "api_retries", "api_document_timeout", "max_requests")


def _print_plan(cost: dict) -> None:
    if "requests" in cost:  # by continuation: the prompts probe would send
        from docaudit.cli.probe import _print_plan as print_requests

        print_requests(cost)
        return
    texts = f"{cost['texts']} text" + ("" if cost["texts"] == 1 else "s")
    click.echo(
        f"dry run: {texts}, about {cost['tokens']:,} tokens, {cost['examples']:,} examples "
        f"({cost['tokens_run']:,} tokens through the model)"
    )
    for name, amount, seconds in cost["steps"]:
        click.echo(f"  {name}: {amount}, " + ("time unknown" if seconds is None else f"about {seconds:,.0f} s"))
    if cost.get("server_requests") is not None:
        click.echo(f"  one request per example to the server: about {cost['server_requests']:,} requests")
    total = "unknown" if cost["seconds"] is None else f"about {cost['seconds']:,.0f} s"
    click.echo(f"  in all {total} (at {cost['tokens_per_s'] or 0:,.0f} tokens per second, {cost['rate']})")
    click.echo("  nothing was loaded or written")


@command()
@click.argument("books", nargs=-1, required=True, type=click.Path())
@null_library_option(
    "Texts the model never saw, put through the same way: what a text reaches by chance (the baseline)."
)
@field_options(ModelConfig, *MODEL)
@field_options(ExtractConfig, *SETTINGS)
@field_options(ContinuationConfig, *CONTINUATION)
@seed_option("extract")
@cleaning_options
@out_option("Write extract.json, extract.csv, extract.png and extract.html here.")
@overwrite_option()
@strict_option
@dry_run_option
@format_option
@friendly_errors
def extract(books, library, raw, normalize_chars, out, overwrite, strict, fmt, **kw):
    """How much of each of BOOKS the model writes back verbatim: p_z, the probability that it writes an example's
    suffix given its prefix (greedy and top-k sampling), for every example along the book; the share of the book
    inside a discoverable suffix, the longest run and the passages, beside what --null-library's never-seen texts
    reach the same way. --mode continuation (a server that only chats, or any model): what the model writes after
    passages of each book, compared with their real continuations (longest common run, word recall), beside the
    never-seen texts."""
    from docaudit import api
    from docaudit.report.extraction import format_extract
    from docaudit.report.extraction_continuation import format_continuation

    request = api.ExtractRequest(
        list(books),
        model_config(kw),
        list(library) or None,
        config_from(ExtractConfig, kw),
        DocumentSpec(raw=raw, normalize_chars=normalize_chars, strict=strict),
        run_context(seed=kw["seed"]),
        out,
        overwrite,
        continuation=config_from(ContinuationConfig, kw),
    )
    if preflight(request, lambda estimate: _print_plan(estimate.cost)):
        return
    result = api.extract_books(request)
    warn_skipped(result.body["skipped"])
    if fmt == "table":
        shown = format_continuation if "continuation" in result.body else format_extract
        click.echo(shown(result.body) + (f"\n\nwrote {out}" if out else ""))
    else:
        echo_result(result, fmt)
