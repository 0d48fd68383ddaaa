"""``cache info`` and ``cache clear``: what docaudit keeps in its cache folder ($DOCAUDIT_CACHE or
~/.cache/docaudit): token statistics, converted models, tokenizers, weight-hash memos, benchmark models, measured
rates."""

from __future__ import annotations

import click

from docaudit.cli.command import friendly_errors, group, run_context
from docaudit.cli.echo import echo_result, say
from docaudit.cli.options import format_option
from docaudit.query.cache_entries import KINDS


@group()
def cache():
    """See and clear docaudit's cache folder ($DOCAUDIT_CACHE or ~/.cache/docaudit)."""


@cache.command("info")
@format_option
@friendly_errors
def cache_info(fmt):
    """Size of the cache per kind of entry, and of the token statistics per model."""
    from docaudit import api

    result = api.cache_info(api.CacheInfoRequest(run_context()))
    if fmt != "table":
        echo_result(result, fmt)
        return
    import pandas as pd

    summary, rows = result.summary, result.rows

    say(f"{summary['root']}: {summary['entries']} entries, {summary['bytes'] / 1e6:.1f} MB")
    say(pd.DataFrame(rows).to_string(index=False))
    models = [
        {"model": m, "entries": r["entries"], "MB": round(r["bytes"] / 1e6, 2)} for m, r in summary["models"].items()
    ]
    if models:
        say("\ntoken statistics per model:\n" + pd.DataFrame(models).to_string(index=False))
    other = summary["other"]
    if other["files"]:
        say(
            f"\n{other['files']}{' or more' if other.get('more') else ''} other files ({other['bytes'] / 1e6:.1f} MB) "
            "that docaudit did not write or left "
            f"unfinished; cache clear leaves them: {', '.join(other['paths'])}"
            + (" …" if other["files"] > len(other["paths"]) else "")
        )


@cache.command("clear")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice([*KINDS, "all"]),
    default=("stats",),
    show_default=True,
    help="What to delete (repeatable): " + "; ".join(f"{k}: {what}" for k, (what, _) in KINDS.items()) + "; all.",
)
@click.option("--model", default=None, help="Only the token statistics of this model identity (as `cache info` lists).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def cache_clear(kinds, model, yes):
    """Delete the entries docaudit wrote (token statistics by default, all of them or one model's; other kinds
    with --kind); nothing else is touched."""
    from docaudit import api

    summary = api.cache_info(api.CacheInfoRequest()).summary
    chosen = list(KINDS) if "all" in kinds else list(dict.fromkeys(kinds))
    if model:
        n = summary["models"].get(model, {"entries": 0})["entries"]
    else:
        n = sum(summary["kinds"][k]["entries"] for k in chosen)
    if n and not yes:
        click.confirm(f"delete {n} cache entries ({', '.join(chosen)}) under {summary['root']}?", abort=True, err=True)
    removed = api.cache_clear(api.CacheClearRequest(kinds, model))
    say(f"removed {removed.entries} entries ({removed.bytes / 1e6:.1f} MB) from {summary['root']}")
