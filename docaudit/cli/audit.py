"""``audit``: one book, one command, one case file (every test the user can run, planned, run and combined)."""

from __future__ import annotations

import click

from docaudit.cli.command import command, friendly_errors, option, run_context, show_progress
from docaudit.cli.echo import echo_result, say, warn_skipped
from docaudit.cli.inputs import documents_option
from docaudit.cli.options import (
    cleaning_options,
    config_from,
    field_options,
    format_option,
    model_config,
    model_options,
    null_library_option,
    out_option,
    overwrite_option,
    seed_option,
    strict_option,
)
from docaudit.cli.preflight import dry_run, dry_run_option
from docaudit.config import AuditConfig
from docaudit.run import DocumentSpec


@command("audit")
@click.argument("books", nargs=-1, required=True, type=click.Path())
@option(
    "--classifier",
    type=click.Path(),
    default=None,
    help="A classifier trained on this model (docaudit train); default: the shipped one for the embedded model.",
    section="inputs",
)
@documents_option("--nonmembers", "Books known not to be in the training data, like the books (for map).")
@null_library_option(
    "Texts the model never saw, like the books (for controls and probe; default for controls: the library shipped "
    "for the embedded model)."
)
@option("--traps", type=click.Path(), default=None, help="The trap registry of docaudit traps make.", section="inputs")
@model_options
@option(
    "--chat-only",
    is_flag=True,
    help="The server only writes text (no prompt log-probabilities): only probe can run.",
    section="model",
)
@field_options(AuditConfig, "alpha", "budget", "extract_tokens")
@seed_option("run")
@cleaning_options
@out_option("Write the case file (audit.html) and audit.json here.")
@overwrite_option()
@strict_option
@dry_run_option
@format_option
@friendly_errors
def audit(books, classifier, nonmembers, library, traps, chat_only, raw, normalize_chars, out, overwrite, strict, fmt,
          **kw):  # fmt: skip
    """Run every test that can give a valid answer for BOOKS in this model, within --budget, and make one statement
    per book (Holm-Bonferroni over the tests run), beside each test's verdict and what it was measured to find."""
    from docaudit import api
    from docaudit.report.audit import duration, format_audit, plan_lines

    request = api.AuditRequest(
        list(books),
        model_config(kw),
        chat_only,
        classifier,
        list(nonmembers) or None,
        list(library) or None,
        traps,
        config_from(AuditConfig, kw),
        DocumentSpec(raw=raw, normalize_chars=normalize_chars, strict=strict),
        run_context(seed=kw["seed"]),
        out,
        overwrite,
    )
    plan = api.plan_audit(request)
    lines = plan_lines(plan.as_json(), plan.kind, plan.seconds)
    to_stderr = fmt != "table"
    for line in lines:
        click.echo(line, err=to_stderr)
    if dry_run():
        click.echo("dry run: nothing was loaded or written", err=to_stderr)
        return
    running = plan.running()

    def starting(planned) -> None:
        if show_progress():
            n = running.index(planned) + 1
            click.echo(f"running {planned.name} ({n} of {len(running)}, {duration(planned.seconds)})", err=True)

    result = api.audit(request, plan, starting)
    warn_skipped(result.body["skipped"])
    if fmt == "table":
        say("")
        say(format_audit(result.body) + (f"\n\nwrote {out}" if out else ""))
    else:
        echo_result(result, fmt)
