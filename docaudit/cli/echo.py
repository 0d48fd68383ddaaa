"""Printing results: strict JSON carrying ``docaudit_version``, CSV, one warning line per kind of skipped document,
and the Ray pool's summary lines."""

from __future__ import annotations

import logging
import re
import sys

import click

# What a terminal acts on rather than shows: control characters (an escape sequence, a bell, a carriage return that
# overwrites the line; tab and newline kept), bidirectional overrides and isolates, line and paragraph separators
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal would act on (``_HIDDEN``) shown as its escape (``\\u202e``,
    ``\\x07``): a chapter title or a document id never reorders or rewrites what is printed."""
    return _HIDDEN.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def say(text="", **kwargs) -> None:
    """``click.echo`` of text for people (tables, verdict lines), made :func:`terminal_safe`."""
    click.echo(terminal_safe(str(text)), **kwargs)


def escape_unencodable() -> None:
    """Print what the terminal's encoding cannot hold as backslash escapes: a file name that is not valid UTF-8
    (``caf\\xe9.txt``, read as ``caf\\udce9.txt``) is shown, never a crash."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def echo_json(value) -> None:
    """Print strict JSON (NaN and infinities as null) in the envelope of every output (docs/outputs.md), with the
    command line being run."""
    from docaudit.io import json_text
    from docaudit.provenance import command_schema, envelope

    ctx = click.get_current_context()
    click.echo(json_text(envelope(command_schema(ctx.command_path), value, command=ctx.obj)))


def echo_result(result, fmt: str = "json", table=None) -> None:
    """Print an API result: its JSON output (``to_json``, the envelope included), its rows as CSV (``to_frame``) or,
    for people, as ``table(result.rows)`` returns them."""
    if fmt == "json":
        from docaudit.io import json_text

        click.echo(json_text(result.to_json()))
    elif fmt == "csv":
        echo_csv(result.to_frame())
    else:
        say(table(result.rows))


def echo_csv(rows) -> None:
    """Print rows (a DataFrame or a list of dicts) as CSV."""
    import pandas as pd

    from docaudit.io import csv_text

    click.echo(csv_text(rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)), nl=False)


def echo_rows(rows, fmt: str, table) -> None:
    """Print ``rows`` as JSON, CSV or, for people, as ``table(rows)`` returns them."""
    if fmt == "json":
        echo_json(rows)
    elif fmt == "csv":
        echo_csv(rows)
    else:
        say(table(rows))


def warn_skipped(skipped: list[dict]) -> None:
    """One warning line on stderr per kind of skipped document."""
    from docaudit.corpus.documents import skip_warnings

    for line in skip_warnings(skipped):
        click.echo(f"warning: {line}", err=True)


def skipped_note(skipped: list[dict]) -> str:
    return f" ({len(skipped)} skipped)" if skipped else ""


class _SummaryFormatter(logging.Formatter):
    """A summary line as it is; a warning after ``warning:``, as the CLI prints its own."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        return message if record.levelno <= logging.INFO else f"{record.levelname.lower()}: {message}"


def print_ray_summaries() -> None:
    """Print on stderr the line the Ray pool logs after each batch of queries (documents, cache hits, tokens/s,
    lost tasks), as it is logged: a summary of the run, shown unless ``--quiet``."""
    summaries = logging.getLogger("docaudit.query.distributed")
    if not summaries.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_SummaryFormatter())
        summaries.addHandler(handler)
    summaries.setLevel(logging.INFO)
    summaries.propagate = False
