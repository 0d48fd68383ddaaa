"""What a querying command checks before torch or a model is loaded, so that a mistake answers at once: every
document path, the output folder, the folds against the documents given; and what ``--dry-run`` prints instead of
running: the documents, tokens and model passes the run would take, and an estimate of its time."""

from __future__ import annotations

import math
import os
from pathlib import Path

import click

from docaudit.cli.command import option, show_progress
from docaudit.config import DEFAULT_CLASSIFIER, ContaminationConfig, QueryConfig
from docaudit.config.rules import (
    CHARS_PER_TOKEN,
    QUERY_TOKENS_PER_SECOND,
    TOKENS_PER_WORD,
    check_folds,
    check_inner_folds,
)
from docaudit.corpus.base import DocumentError
from docaudit.corpus.datasets import HUB_PREFIX, is_dataset
from docaudit.corpus.documents import expand_paths

DRY_RUN_KEY = "docaudit.dry_run"


def _set_dry_run(ctx, _param, value) -> None:
    ctx.meta[DRY_RUN_KEY] = value


dry_run_option = option(
    "--dry-run",
    is_flag=True,
    expose_value=False,
    callback=_set_dry_run,
    help="Print the documents, tokens and model passes the run would take and an estimate of its time, "
    "then stop: no model is loaded and nothing is written.",
    section="output",
)


def document_files(paths) -> list[Path] | None:
    """The files ``paths`` name (folders expanded as when read), or None when one of them is a dataset (its rows
    are counted only when read). A path that does not exist, a dataset file that does not, or a folder without
    ``.txt`` files is an error (a file that cannot be read is reported when read, in reading order, as a skip or,
    with ``strict``, the error)."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if any(is_dataset(p) for p in paths):
        for p in paths:
            location = os.fspath(p)
            if not location.startswith(HUB_PREFIX) and not os.path.exists(location):
                raise DocumentError(Path(location), "unreadable", "no such file")
        return None
    return expand_paths(paths) if paths else []


def preflight(
    members,
    nonmembers=None,
    strict: bool = False,
    folds: int | None = None,
    output: tuple | None = None,
    query: QueryConfig | None = None,
    backend: str = "transformers",
    methods: str | None = None,
    meta=None,
) -> bool:
    """:func:`check_inputs` (``meta``: the meta-classifier's MetaConfig, when one is trained), then with
    ``--dry-run`` print what the run would query and return True (the command stops there); with progress shown,
    a start line on stderr saying what the query will take."""
    files = check_inputs(members, nonmembers, strict, folds, output, meta=meta)
    query = QueryConfig() if query is None else query
    no_model = methods is not None and methods.strip() == "blind"  # evaluate's model-free baseline alone
    if click.get_current_context().meta.get(DRY_RUN_KEY, False):
        if no_model:
            click.echo("dry run: no model would be queried (--methods blind); nothing was loaded or written")
        else:
            echo_dry_run(files, query, backend, methods)
        return True
    if files and not no_model and show_progress():
        click.echo(plan_line(estimate(files, query, backend)), err=True)
    return False


def preflight_report(books, members, nonmembers, output: tuple, strict: bool, kw: dict) -> bool:
    """:func:`preflight` for ``report``: every book and calibration book, its output folder, and the snippets it
    queries (``--snippets`` of ``--snippet-words`` words per book, counted as at most that many tokens each);
    ``output``: ``(out, overwrite, method)``."""
    given = (*books, *members, *nonmembers, *model_inputs(kw))
    tokens = max(2, math.ceil(kw["snippets"] * kw["snippet_words"] * TOKENS_PER_WORD))
    limits = {"max_context": kw["max_context"]} if kw["max_context"] is not None else {}
    ContaminationConfig(  # every count checked before anything is read
        snippets=kw["snippets"], snippet_words=kw["snippet_words"], book_bootstrap=kw["resamples"], **limits
    )
    query = QueryConfig(context=kw["max_context"] or QueryConfig.context, max_tokens=tokens)
    out, overwrite, method = output
    books = (*books, *members, *nonmembers)
    return preflight(books, None, strict, None, (out, "report", overwrite, given), query, kw["backend"], method)


def model_inputs(kw: dict) -> tuple:
    """The local inputs a command names beside its documents (models, DC-PDD's documents): what an output folder
    must not be or contain, as the API checks them."""
    names = (kw.get("model"), kw.get("ref_model"), kw.get("neighbor_model"), *kw.get("freq_corpus", ()))
    return tuple(n for n in names if n is not None)


def card_query(classifier) -> QueryConfig:
    """The query a saved classifier's card records (``predict`` queries with it); the default one when the card
    cannot be read here (loading the classifier reports why)."""
    import json

    try:
        card = json.loads((Path(classifier or DEFAULT_CLASSIFIER) / "card.json").read_text(encoding="utf-8"))
        return QueryConfig(**card["query"])
    except Exception:  # any unreadable card: the estimate uses the defaults, and loading the classifier says why
        return QueryConfig()


def check_inputs(
    members,
    nonmembers=None,
    strict: bool = False,
    folds: int | None = None,
    output: tuple | None = None,
    names: tuple[str, str] = ("members", "non-members"),
    meta=None,
) -> list[Path] | None:
    """Check a command's documents (``members`` alone, or both sets), its ``folds`` against the files of each set
    (called ``names``; a dataset is counted when read, later), the inner folds of the meta-classifier ``meta``,
    and its output folder (``output``: ``(out, kind,
    overwrite, inputs)``, checked as when written, nothing touched). Returns every file named (None when a dataset
    is among them)."""
    first = document_files(members)
    second = None if nonmembers is None else document_files(nonmembers)
    if output is not None and output[0] is not None:
        from docaudit.outputs import prepare_output

        out, kind, overwrite, inputs = output
        prepare_output(out, kind, overwrite, [i for i in inputs if i is not None])
    if folds is not None and first is not None and second is not None:
        check_folds(folds, len(first), len(second), names)
        if meta is not None:
            check_inner_folds(meta, folds, len(first), len(second))
    if nonmembers is None:
        return first
    return None if first is None or second is None else first + second


def estimate(files: list[Path], query: QueryConfig, backend: str) -> dict:
    """What querying ``files`` would take: documents, tokens (estimated from the files' sizes at
    ``CHARS_PER_TOKEN`` characters per token; cleaning removes a little), windows of ``query.context`` tokens
    (``query.max_tokens`` per document at most), and the time at the measured rate of ``backend`` (None for a
    backend without one)."""
    context = query.context
    stride = query.stride or context - 1
    tokens = windows = 0
    for f in files:
        try:
            n = math.ceil(f.stat().st_size / CHARS_PER_TOKEN)
        except OSError:
            continue
        if query.max_tokens is not None:
            n = min(n, query.max_tokens)
        tokens += n
        windows += 1 if n <= context else math.ceil((n - context) / stride) + 1
    rate = QUERY_TOKENS_PER_SECOND.get(backend)
    return {
        "documents": len(files),
        "tokens": tokens,
        "windows": windows,
        "context": context,
        "rate": rate,
        "seconds": None if rate is None else tokens / rate,
    }


def plan_line(plan: dict) -> str:
    """``querying N documents, ~T tokens, ~M min at R tok/s`` (the start line of a long query, and --dry-run's)."""
    n = plan["documents"]
    line = f"querying {n} document{'s' * (n != 1)}, ~{plan['tokens']:,} tokens"
    if plan["seconds"] is None:
        return line + " (no measured rate for this backend)"
    minutes = plan["seconds"] / 60
    took = f"~{minutes:.1f} min" if minutes < 120 else f"~{minutes / 60:.1f} h"
    return line + f", {took} at {plan['rate']:.0f} tok/s"


def echo_dry_run(files: list[Path] | None, query: QueryConfig, backend: str, methods: str | None = None) -> None:
    """Print on stdout what the run would query (``--dry-run``), without loading a model or writing anything."""
    if files is None:
        click.echo(
            "dry run: a dataset is among the inputs; its rows are counted only when read (run without "
            "--dry-run, or give text files)"
        )
        return
    plan = estimate(files, query, backend)
    click.echo(f"dry run: {plan_line(plan)}")
    click.echo(
        f"  {plan['windows']:,} model passes (windows of {plan['context']} tokens) for the main query; tokens "
        f"estimated from file sizes at {CHARS_PER_TOKEN:g} characters per token"
    )
    extra = _extra_passes(methods)
    if extra:
        click.echo(f"  not counted: the extra passes of {', '.join(extra)} (each over texts derived from a document)")
    if plan["rate"] is not None:
        click.echo(
            f"  rate: the querier's measured {plan['rate']:.0f} scored tokens/s for the embedded model on a 2-core "
            f"CPU with --backend {backend} (docs/benchmarks.md); other models and machines differ"
        )
    click.echo("  nothing was loaded or written")


def _extra_passes(methods: str | None) -> list[str]:
    """The selected detectors that query derived texts besides the document itself."""
    from docaudit.methods.detectors.registry import METHODS, default_methods

    names = default_methods() if methods is None else [m.strip() for m in methods.split(",")]
    return [n for n in names if n in METHODS and METHODS[n].passes]
