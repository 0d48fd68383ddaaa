"""``dataset-test`` (were the suspect documents, as a set, trained on?) and ``data check`` (two document sets
compared before any model is queried)."""

from __future__ import annotations

import click

from docaudit.cli.command import command, friendly_errors, group, show_progress
from docaudit.cli.echo import echo_csv, echo_json, skipped_note, warn_skipped
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
from docaudit.cli.preflight import check_inputs, dry_run_option, preflight
from docaudit.config import DatasetTestConfig
from docaudit.corpus.documents import duplicates_note
from docaudit.errors import DocauditError


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
    DatasetTestConfig(splits=splits)  # checked before anything is read
    if preflight(suspect, nonmembers, strict, query=query_config(kw), backend=kw["backend"], methods=methods):
        return
    from dataclasses import asdict

    from docaudit import api
    from docaudit.corpus.documents import Skips
    from docaudit.report.tables import format_dataset_checks, format_query

    query, skips = query_config(kw), Skips(strict)
    result, scores = api.dataset_test(
        suspect,
        nonmembers,
        model_config(kw),
        methods.split(","),
        query,
        kw["seed"],
        splits,
        kw["raw"],
        skips=skips,
        drop_duplicates=kw["drop_duplicates"],
        normalize_chars=kw["normalize_chars"],
        blind_kind=blind_kind,
        ray=ray_config(kw),
        progress=show_progress(),
        alpha=alpha,
    )
    warn_skipped(skips.as_json())
    if fmt == "json":
        echo_json({**asdict(result), "query": query.used(kw["seed"]), "skipped": skips.as_json(), "scores": scores})
        return
    if fmt == "csv":
        echo_csv(scores)
        return
    used = format_query(query.used(kw["seed"]))
    click.echo(
        f"{result.n_suspect} suspect vs {result.n_nonmember} known non-member documents"
        f"{skipped_note(skips.as_json())}, {result.n_features} scores combined; query: {used}"
        + duplicates_note(result.duplicates_dropped, "; ")
    )
    click.echo(
        f"p-value {result.p_value:.3g} (AUC on the held-out halves {result.statistic:.2f}, "
        f"effect size d = {result.effect_size:.2f})"
    )
    click.echo(result.meaning)
    click.echo(format_dataset_checks(result))


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
    check_inputs(set_a, set_b, strict, folds, names=("in set A", "in set B"))
    from docaudit import api
    from docaudit.audit.datacheck import format_check
    from docaudit.corpus.documents import Skips

    result = api.data_check(
        set_a, set_b, raw, normalize_chars, folds, seed, drop_duplicates, Skips(strict), progress=show_progress()
    )
    warn_skipped(result["skipped"])
    if result["warning"]:
        click.echo(result["warning"], err=True)
    if fmt == "json":
        echo_json(result)
    elif fmt == "csv":
        echo_csv(
            [
                {"set": name} | {k: v for k, v in result[key].items() if not isinstance(v, (dict, list))}
                for key, name in (("a", set_a), ("b", set_b))
            ]
        )
    else:
        click.echo(format_check(result))
