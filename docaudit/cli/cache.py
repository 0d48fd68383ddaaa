"""``cache info`` and ``cache clear``: the token-statistics cache ($DOCAUDIT_CACHE or ~/.cache/docaudit)."""

from __future__ import annotations

import click

from docaudit.cli.command import friendly_errors, group
from docaudit.cli.echo import echo_csv, echo_json
from docaudit.cli.options import format_option


@group()
def cache():
    """See and clear the token-statistics cache ($DOCAUDIT_CACHE or ~/.cache/docaudit)."""


@cache.command("info")
@format_option
@friendly_errors
def cache_info(fmt):
    """Size of the token-statistics cache and its entries per model."""
    from docaudit import api

    summary = api.cache_info()
    if fmt == "json":
        echo_json(summary)
        return
    rows = [
        {"model": m, "entries": r["entries"], "MB": round(r["bytes"] / 1e6, 2)} for m, r in summary["models"].items()
    ]
    if fmt == "csv":
        echo_csv(rows)
        return
    click.echo(f"{summary['root']}: {summary['entries']} entries, {summary['bytes'] / 1e6:.1f} MB")
    if rows:
        import pandas as pd

        click.echo(pd.DataFrame(rows).to_string(index=False))


@cache.command("clear")
@click.option("--model", default=None, help="Only the entries of this model identity (as `cache info` lists it).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def cache_clear(model, yes):
    """Delete the token-statistics entries docaudit wrote (all, or one model's); nothing else is touched."""
    from docaudit import api

    summary = api.cache_info()
    n = summary["models"].get(model, {"entries": 0})["entries"] if model else summary["entries"]
    if n and not yes:
        click.confirm(f"delete {n} cache entries under {summary['root']}?", abort=True, err=True)
    removed = api.cache_clear(model)
    click.echo(f"removed {removed['entries']} entries ({removed['bytes'] / 1e6:.1f} MB) from {summary['root']}")
