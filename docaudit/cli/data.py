"""``dataset-test`` (were the suspect documents, as a set, trained on?) and ``data check`` (two document sets
compared before any model is queried)."""

from __future__ import annotations

import click

from docaudit.cli.command import command, friendly_errors, group, run_context
from docaudit.cli.echo import echo_result, say, skipped_note, warn_skipped
from docaudit.cli.inputs import dataset_options, documents_option
from docaudit.cli.options import (
    alpha_option,
    cleaning_options,
    drop_duplicates_option,
    field_options,
    folds_option,
    format_option,
    former_option,
    model_config,
    model_options,
    query_config,
    query_options,
    ray_config,
    ray_options,
    seed_option,
    strict_option,
)
from docaudit.cli.preflight import dry_run_option, preflight
from docaudit.config import DatasetTestConfig
from docaudit.corpus.documents import duplicates_note
from docaudit.errors import DocauditError
from docaudit.run import DocumentSpec


@command("dataset-test")
@click.argument("suspect", nargs=-1, type=click.Path())
@former_option("--suspect", "former_suspect", "SUSPECT...", multiple=True, type=click.Path())
@documents_option("--nonmembers", "Known non-members.", required=True)
@dataset_options
@model_options
@ray_options
@query_options
@field_options(DatasetTestConfig, "methods", "splits", "blind_kind")
@alpha_option("Level of the verdict: evidence of membership when the p-value is below it and the blind one is not.")
@seed_option()
@cleaning_options
@drop_duplicates_option
@strict_option
@format_option
@dry_run_option
@friendly_errors
def dataset_test(suspect, former_suspect, nonmembers, methods, splits, blind_kind, alpha, strict, fmt, **kw):
    """Were the SUSPECT documents (files, folders or datasets), as a set, trained on? A dataset-level test in the
    style of Maini et al. 2024."""
    suspect += former_suspect
    if not suspect:
        raise DocauditError("give the suspect documents: docaudit dataset-test SUSPECT... --nonmembers DIR")
    from docaudit import api
    from docaudit.report.tables import format_dataset_checks, format_query

    query = query_config(kw)
    request = api.DatasetTestRequest(
        suspect,
        nonmembers,
        model_config(kw),
        query,
        DatasetTestConfig(tuple(methods.split(",")), splits, blind_kind),  # checked before anything is read
        alpha,
        DocumentSpec(kw["raw"], kw["normalize_chars"], kw["drop_duplicates"], strict=strict),
        run_context(ray_config(kw), kw["seed"]),
    )
    if preflight(request):
        return
    outcome = api.dataset_test(request)
    result, skipped = outcome.test, outcome.skipped
    warn_skipped(skipped)
    if fmt != "table":
        echo_result(outcome, fmt)
        return
    used = format_query(query.used(kw["seed"]))
    say(
        f"{result.n_suspect} suspect vs {result.n_nonmember} known non-member documents"
        f"{skipped_note(skipped)}, {result.n_features} scores combined; query: {used}"
        + duplicates_note(result.duplicates_dropped, "; ")
    )
    say(
        f"p-value {result.p_value:.3g} (AUC on the held-out halves {result.statistic:.2f}, "
        f"effect size d = {result.effect_size:.2f})"
    )
    say(result.meaning)
    say(format_dataset_checks(result))


@group()
def data():
    """Inspect document sets before querying a model."""


@data.command("check")
@click.argument("set_a", type=click.Path())
@click.argument("set_b", type=click.Path())
@dataset_options
@cleaning_options
@folds_option
@seed_option()
@drop_duplicates_option
@strict_option
@format_option
@friendly_errors
def data_check(set_a, set_b, raw, normalize_chars, folds, seed, drop_duplicates, strict, fmt):
    """Compare two document sets (counts, lengths, years, leftover boilerplate) and run the blind baseline."""
    from docaudit import api
    from docaudit.audit.datacheck import format_check

    request = api.DataCheckRequest(
        set_a, set_b, folds, DocumentSpec(raw, normalize_chars, drop_duplicates, strict=strict), run_context(seed=seed)
    )
    api.check(request)
    result = api.data_check(request)
    check = result.check
    warn_skipped(check["skipped"])
    if check["warning"]:
        click.echo(check["warning"], err=True)
    if fmt == "table":
        say(format_check(check))
    else:
        echo_result(result, fmt)
