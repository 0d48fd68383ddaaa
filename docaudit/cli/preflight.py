"""What a querying command prints of the checks made before torch or a model is loaded (``api.check``) and of the
estimate ``--dry-run`` prints instead of running (``api.estimate``): the documents, tokens and model passes the run
would take, and an estimate of its time."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from docaudit.cli.command import option, show_progress
from docaudit.cli.echo import say

if TYPE_CHECKING:
    from docaudit.api import Estimate
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


def dry_run() -> bool:
    """Whether the running command was given ``--dry-run``."""
    return click.get_current_context().meta.get(DRY_RUN_KEY, False)


def preflight(request, printed: Callable[[Estimate], None] | None = None) -> bool:
    """The checks of ``request`` (``api.check``); with ``--dry-run``, what the run would take printed instead
    (``api.estimate``, by ``printed``, default :func:`echo_dry_run`), returning True (the command stops there); with
    progress shown, a start line on stderr with the estimate of the whole command."""
    from docaudit import api

    if dry_run():
        for estimate in api.estimate(request):
            echo_warnings(estimate)
            (printed or echo_dry_run)(estimate)
        return True
    estimates = api.check(request)
    for estimate in estimates[:1]:  # one per report method: the same words
        echo_warnings(estimate)
    if show_progress():
        for estimate in estimates:
            if estimate.files and not estimate.checks.no_model:
                click.echo(plan_line(estimate.plan()), err=True)
    return False


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


def echo_warnings(estimate: Estimate) -> None:
    """Print on stderr, before anything is loaded, what limits the run's answers (``Estimate.warnings``)."""
    for warning in estimate.warnings:
        click.echo(f"warning: {warning}", err=True)


def echo_dry_run(estimate: Estimate) -> None:
    """Print on stdout what the run would take (``--dry-run``), step by step, without loading a model or writing
    anything."""
    if estimate.checks.no_model:
        say("dry run: no model would be queried (--methods blind); nothing was loaded or written")
        return
    if estimate.files is None:
        say(
            "dry run: a dataset is among the inputs; its rows are counted only when read (run without "
            "--dry-run, or give text files)"
        )
        return
    plan = estimate.plan()
    say(f"dry run: {plan_line(plan)}")
    say(
        f"  {plan.windows:,} model passes (windows of {plan.context} tokens) for the main query; tokens estimated "
        f"from the documents' lengths at {plan.rates.bytes_per_token:.2f} bytes per token"
    )
    _echo_steps(plan)
    measured = ", ".join(plan.rates.measured) or "none"
    say(
        f"  rates measured on this machine by earlier runs (docaudit's cache): {measured}; the others are the "
        "documented ones (docs/benchmarks.md). Statistics already in the cache take no model pass; the first use "
        "of a .gguf file you name converts it once (not counted; the embedded model's is, while it is pending)"
    )
    say("  nothing was loaded or written")


def _echo_steps(plan: Plan) -> None:
    """A plan's steps, a line each, with their estimated times ("?" where no rate is known)."""
    for step in plan.steps:
        took = "?" if step.seconds is None else _duration(step.seconds)
        say(f"  {step.name}: {step.amount}, ~{took}")


def controls_line(plan: Plan) -> str:
    """``controls``' start line and its --dry-run's first line: texts, tokens and the estimated time."""
    n = plan.documents
    line = f"testing {n} text{'s' * (n != 1)}, ~{plan.tokens:,} tokens generated and scored"
    if plan.seconds is None:
        return line + " (no measured rate for this backend)"
    measured = ", ".join(plan.rates.measured) or "none"
    return line + f", ~{_duration(plan.seconds)} in all (measured on this machine: {measured})"


def echo_controls_dry_run(estimate: Estimate) -> None:
    """``controls --dry-run``: its passages, tokens and steps with their estimated times, and what it assumes."""
    cost, plan = estimate.cost, estimate.controls
    say(f"dry run: {controls_line(plan)}")
    say(
        f"  at most {cost['passages']:,} passages in {cost['texts']} texts; {cost['tokens_generated']:,} tokens "
        f"generated and {cost['tokens_scored']:,} tokens scored"
    )
    _echo_steps(plan)
    say(
        "  assumes: every text long enough for all its passages, none in the cache (a cached text generates "
        "nothing), the rates measured by earlier runs on this machine at their load (docaudit's cache; the others "
        "documented, docs/benchmarks.md)"
    )
    say("  nothing was loaded or written")
