"""What a querying command checks before torch or a model is loaded, so that a mistake answers at once: every
document path, the output folder, the folds against the documents given; and what ``--dry-run`` prints instead of
running: the documents, tokens and model passes the run would take, and an estimate of its time."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from docaudit.cli.command import option, show_progress
from docaudit.cli.options import config_from
from docaudit.config import DEFAULT_CLASSIFIER, ContaminationConfig, QueryConfig
from docaudit.config.rules import (
    TOKENS_PER_WORD,
    check_folds,
    check_inner_folds,
)
from docaudit.corpus.base import DocumentError
from docaudit.corpus.datasets import HUB_PREFIX, is_dataset
from docaudit.corpus.documents import expand_paths

if TYPE_CHECKING:
    from docaudit.audit.costs import Plan

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
    ``--dry-run`` read the documents as the run would (every check it makes on them: unreadable files, documents
    in both sets, the folds after skips) and print what the run would take, returning True (the command stops
    there); with progress shown, a start line on stderr with the estimate of the whole command."""
    files = check_inputs(members, nonmembers, strict, folds, output, meta=meta)
    query = QueryConfig() if query is None else query
    no_model = methods is not None and methods.strip() == "blind"  # evaluate's model-free baseline alone
    ctx = click.get_current_context()
    if ctx.meta.get(DRY_RUN_KEY, False):
        sizes = None if files is None else read_as_run(members, nonmembers, strict, folds, meta, ctx.params)
        if no_model:
            click.echo("dry run: no model would be queried (--methods blind); nothing was loaded or written")
        else:
            echo_dry_run(sizes, query, backend, methods, meta)
        return True
    if files and not no_model and show_progress():
        click.echo(plan_line(command_plan(file_sizes(files), query, backend, methods, meta)), err=True)
    return False


def read_as_run(members, nonmembers, strict: bool, folds: int | None, meta, params: dict) -> list[int]:
    """Read the documents as the run reads them, with its checks (``params``: the command's options, for the
    cleaning and duplicate settings): a file that cannot be read (an error with ``--strict``, else a skip), the
    same text in both sets, too few documents left for the folds. Returns each document's size in bytes, as read
    (cleaned)."""
    from docaudit.corpus.base import Skips
    from docaudit.corpus.documents import labelled_documents, load_documents

    reading = {"raw": params.get("raw", False), "normalize_chars": params.get("normalize_chars", False)}
    skips = None if strict else Skips()
    if nonmembers is None:
        docs = load_documents(members, progress=False, skips=skips, **reading)
    else:
        drop = params.get("drop_duplicates", False)
        docs, labels, _ = labelled_documents(
            members, nonmembers, progress=False, skips=skips, drop_duplicates=drop, **reading
        )
        if folds is not None:
            first, second = int(labels.sum()), int((labels == 0).sum())
            check_folds(folds, first, second)
            if meta is not None:
                check_inner_folds(meta, folds, first, second)
    return [len(d.text.encode("utf-8")) for d in docs]


def file_sizes(files: list[Path]) -> list[int]:
    """Each file's size in bytes (cleaning removes a little), for the start line."""
    sizes = []
    for f in files:
        try:
            sizes.append(f.stat().st_size)
        except OSError:
            continue
    return sizes


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
        return QueryConfig.recorded(card["query"])[0]
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


def command_plan(sizes: list[int], query: QueryConfig, backend: str, methods: str | None, meta) -> Plan:
    """The estimated steps of the running command (its name and options from the click context) over documents
    of ``sizes`` bytes each (:func:`docaudit.audit.costs.command_plan`)."""
    from docaudit.audit import costs
    from docaudit.config import DetectorConfig, MetaConfig, ModelConfig, ScalingConfig
    from docaudit.methods.detectors.registry import default_methods

    ctx = click.get_current_context()
    command, params = ctx.command.name, ctx.params
    names = list(default_methods()) if methods is None else [m.strip() for m in methods.split(",") if m.strip()]
    folds = params.get("folds") or 0
    blind = beyond = False
    if command == "evaluate":
        blind = params.get("blind", True) or "blind" in names
        beyond = params.get("beyond") != "none"
    elif command == "train":
        meta = meta or replace(config_from(MetaConfig, params), folds=folds)
        blind = beyond = True
    shape = costs.Shape(
        command,
        tuple(m for m in names if m != "blind"),
        config_from(DetectorConfig, params),
        meta,
        folds,
        config_from(ScalingConfig, params).n_sequences,
        blind,
        beyond,
    )
    model = replace(config_from(ModelConfig, params), backend=backend)
    return costs.command_plan(shape, sizes, query, model)


def plan_line(plan: Plan) -> str:
    """``querying N documents, ~T tokens, ~M min (...)``: the start line of a run, and --dry-run's first line."""
    n = plan.documents
    line = f"querying {n} document{'s' * (n != 1)}, ~{plan.tokens:,} tokens"
    if plan.seconds is None:
        return line + " (no measured rate for this backend)"
    where = "measured on this machine" if "query" in plan.rates.measured else "documented"
    return line + f", ~{_duration(plan.seconds)} in all ({plan.rates.tokens_per_s:.0f} tok/s, {where})"


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    if minutes < 1:
        return f"{seconds:.0f} s"
    return f"{minutes:.1f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def echo_dry_run(sizes: list[int] | None, query: QueryConfig, backend: str, methods: str | None, meta=None) -> None:
    """Print on stdout what the run would take (``--dry-run``), step by step, without loading a model or writing
    anything."""
    if sizes is None:
        click.echo(
            "dry run: a dataset is among the inputs; its rows are counted only when read (run without "
            "--dry-run, or give text files)"
        )
        return
    plan = command_plan(sizes, query, backend, methods, meta)
    click.echo(f"dry run: {plan_line(plan)}")
    click.echo(
        f"  {plan.windows:,} model passes (windows of {plan.context} tokens) for the main query; tokens estimated "
        f"from the documents' lengths at {plan.rates.bytes_per_token:.2f} bytes per token"
    )
    for step in plan.steps:
        took = "?" if step.seconds is None else _duration(step.seconds)
        click.echo(f"  {step.name}: {step.amount}, ~{took}")
    measured = ", ".join(plan.rates.measured) or "none"
    click.echo(
        f"  rates measured on this machine by earlier runs (docaudit's cache): {measured}; the others are the "
        "documented ones (docs/benchmarks.md). Statistics already in the cache take no model pass, and the first "
        "use of a GGUF file converts it once (not counted)"
    )
    click.echo("  nothing was loaded or written")
