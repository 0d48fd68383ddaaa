"""``train`` (the meta-classifier on k-fold chunks, then saved) and ``predict`` (a verdict per document from it)."""

from __future__ import annotations

from pathlib import Path

import click

from docaudit.audit.card_model import RUN_HERE_FIELDS
from docaudit.cli.command import command, friendly_errors, option, run_context
from docaudit.cli.echo import echo_csv, echo_result, echo_rows, say, skipped_note, warn_skipped
from docaudit.cli.inputs import dataset_options, labelled_dataset_options, labelled_sets
from docaudit.cli.options import (
    alpha_option,
    cleaning_options,
    config_from,
    drop_duplicates_option,
    field_option,
    folds_option,
    format_option,
    given_settings,
    meta_options,
    model_config,
    model_options,
    out_option,
    overwrite_option,
    query_config,
    query_options,
    ray_config,
    ray_options,
    seed_option,
    strict_option,
    trees_option,
)
from docaudit.cli.preflight import dry_run_option, preflight
from docaudit.config import MetaConfig, TrainConfig
from docaudit.corpus.documents import duplicates_note
from docaudit.errors import DocauditError
from docaudit.run import DocumentSpec


@command()
@labelled_sets()
@labelled_dataset_options
@model_options
@ray_options
@query_options
@meta_options
@folds_option
@seed_option()
@trees_option
@field_option(TrainConfig, "min_tokens")
@cleaning_options
@option(
    "--grid", is_flag=True, help="Run the Table-1 grid (norms × features × contexts) and print it.", section="method"
)
@option("--grid-contexts", default="32,64,128", show_default=True, help="Contexts of the grid.", section="method")
@out_option("Save the classifier here, e.g. models/NAME (needed unless --grid).")
@overwrite_option()
@drop_duplicates_option
@strict_option
@format_option
@dry_run_option
@friendly_errors
def train(members, nonmembers, grid, grid_contexts, out, overwrite, strict, fmt, **kw):
    """Evaluate the meta-classifier with k-fold chunks, then fit it on all documents and save it."""
    if not grid and out is None:
        raise DocauditError("--out is required (where to save the classifier, e.g. models/NAME)")
    from docaudit import api

    config = config_from(
        TrainConfig, kw, model=model_config(kw), query=query_config(kw), meta=config_from(MetaConfig, kw)
    )
    reading, run = DocumentSpec(strict=strict), run_context(ray_config(kw), kw["seed"])
    if grid:
        contexts = tuple(int(c) for c in grid_contexts.split(","))
        request = api.GridRequest(members, nonmembers, contexts, config, reading=reading, run=run)
    else:
        request = api.TrainRequest(members, nonmembers, config, Path(out), overwrite, reading=reading, run=run)
    if preflight(request):
        return
    if grid:
        from docaudit.report.tables import format_grid

        table = api.grid(request)
        warn_skipped(table.skipped)
        if fmt == "json":
            echo_result(table)
        else:
            echo_rows(table.table, fmt, format_grid)
        return
    result = api.train(request)
    warn_skipped(result.trained.skipped)
    if fmt == "json":
        echo_result(result)
    elif fmt == "csv":
        echo_csv(result.to_frame())
    else:
        _echo_trained(result.trained, kw["folds"], out)


def _echo_trained(result, folds: int, out) -> None:
    """What ``train`` prints for people: the documents, the model, the k-fold and blind results, where it saved."""
    from docaudit.report.classifier import chance_level
    from docaudit.report.tables import format_beyond_blind, format_query, format_summary

    card = result.card
    say(
        f"documents: {card['n_members']} members, {card['n_nonmembers']} non-members"
        + skipped_note(result.skipped)
        + duplicates_note(card["duplicates_dropped"], "; ")
    )
    say(f"model: {card['model_identity']}; query: {format_query(card['query'])}")
    say(f"{folds}-fold chunks ({', '.join(result.evaluation.configs)}): {format_summary(result.summary)}")
    auc = card["pooled_bootstrap_95"]["auc"]
    say(f"pooled out-of-fold AUC {auc['point']:.3f} (95% bootstrap interval {auc['ci_low']:.3f}–{auc['ci_high']:.3f})")
    if chance_level(card):
        say("the interval includes 0.5: this classifier does not detect membership better than chance here")
    blind = card["blind"]
    say(f"blind baseline (no model, same folds): AUC {blind['blind_auc']:.3f} ({blind['best_kind']})")
    say(format_beyond_blind(card["beyond_blind"]))
    if card["warning"]:
        click.echo(card["warning"], err=True)
    say(f"saved {result.final_config} classifier to {out}")


API_SETTINGS = ("api_key_env", "api_timeout", "api_retries", "api_document_timeout")  # given here, they win


@command()
@click.argument("documents", nargs=-1, required=True, type=click.Path())
@dataset_options
@option(
    "--classifier",
    type=click.Path(),
    default=None,
    help="Saved classifier directory (default: the shipped one).",
    section="method",
)
@alpha_option("Level of the verdict: evidence of membership when the Benjamini-Hochberg q-value is below it.")
@model_options
@option(
    "--use-card-backend",
    is_flag=True,
    help="Query the server or hub model the classifier's card names, with its settings (the API key only from "
    "--api-key-env; --api-timeout, --api-retries given here win).",
    section="model",
)
@ray_options
@strict_option
@format_option
@dry_run_option
@friendly_errors
def predict(documents, classifier, alpha, strict, fmt, use_card_backend, **kw):
    """Verdict for each document: evidence of membership, no evidence, or inconclusive with the reason, from its
    p-value against the classifier's known non-members (a document that cannot be used is a row saying why)."""
    from docaudit import api
    from docaudit.audit.specs import CardAccess
    from docaudit.report.verdicts import format_predictions

    access = CardAccess(
        kw["trust_remote_code"], use_card_backend, given_settings(kw, (*API_SETTINGS, *RUN_HERE_FIELDS))
    )
    request = api.PredictRequest(
        documents,
        Path(classifier) if classifier else None,
        model_config(kw),
        access,
        alpha,
        DocumentSpec(strict=strict),
        run_context(ray_config(kw)),
    )
    if preflight(request):
        return
    result = api.predict(request)
    warn_skipped(result.skipped)
    echo_result(result, fmt, format_predictions)
