"""``lab``: a randomized controlled experiment, a target trained on a random half of a pool of documents, then
every method evaluated on the true labels (with ``--trap-copies``, copyright traps tested the same way)."""

from __future__ import annotations

from pathlib import Path

import click

from docaudit.cli.command import command, friendly_errors, option, run_context
from docaudit.cli.echo import echo_result, say
from docaudit.cli.options import (
    config_from,
    field_option,
    field_options,
    folds_option,
    format_option,
    normalize_chars_option,
    overwrite_option,
    ray_config,
    ray_options,
    seed_option,
)
from docaudit.config import ModelConfig, TargetConfig, TrapConfig


@command()
@option("--corpus", required=True, type=click.Path(), help="Pool of documents (directory of .txt).", section="inputs")
@option("--out", required=True, type=click.Path(), help="Lab directory (resumable).", section="output")
@overwrite_option("Discard an earlier lab at --out and start again (default: resume it).")
@field_options(TargetConfig, "arch", "layers", "width", "heads", "positions", "vocab_size", "epochs", "learning_rate")
@field_option(TargetConfig, "batch_size", "--train-batch-size", "batch_size")
@field_option(TargetConfig, "doc_tokens")
@option("--docs", default=None, type=int, help="Use a seeded random subset of this many documents.", section="inputs")
@option(
    "--base-model",
    default=None,
    help="Continue pretraining this local model instead of training from scratch.",
    section="target",
)
@option(
    "--methods",
    default=None,
    help="Detectors to evaluate (comma list; default: all single-pass ones).",
    section="method",
)
@folds_option
@seed_option()
@option(
    "--extra-quantize",
    "quantize_list",
    default="",
    help="Also evaluate at these quantizations, e.g. int8,int4.",
    section="query",
)
@option(
    "--extra-dtypes",
    "dtype_list",
    default="",
    help="Also evaluate at these dtypes, e.g. bfloat16,float16.",
    section="query",
)
@field_option(
    TrapConfig,
    "copies",
    "--trap-copies",
    default=None,
    type=int,
    show_default=False,
    help="Train on members with copyright traps planted this many times each, and test every document for them.",
)
@field_option(TrapConfig, "tokens", "--trap-tokens", "trap_tokens", help="With --trap-copies: trap length.")
@field_option(TrapConfig, "per_document", help="With --trap-copies: traps (and controls) per document.")
@field_option(TrapConfig, "any_text")
@option(
    "--generator",
    default=None,
    help="With --trap-copies: the trap generator (default embedded Gemma).",
    section="traps",
)
@normalize_chars_option
@ray_options
@format_option
@friendly_errors
def lab(
    corpus, out, overwrite, docs, base_model, methods, folds, quantize_list, dtype_list, normalize_chars, fmt, **kw
):
    """Randomized controlled experiment: train a target on a random half of a pool, then evaluate on true labels."""
    from docaudit import api
    from docaudit.lab.experiment import LabSpec
    from docaudit.lab.traps import TrapPlan
    from docaudit.report.tables import format_methods_table, format_precisions

    traps = None
    if kw["trap_copies"] is not None:
        config = TrapConfig(
            tokens=kw["trap_tokens"],
            per_document=kw["traps_per_doc"],
            copies=kw["trap_copies"],
            any_text=kw["any_text"],
        )
        traps = TrapPlan(config, ModelConfig(model=kw["generator"]))
    spec = LabSpec(
        config_from(TargetConfig, kw, batch_size=kw["batch_size"]),
        base_model,
        methods.split(",") if methods else None,
        folds,
        [p for p in f"{dtype_list},{quantize_list}".split(",") if p],
        docs,
        normalize_chars,
    )
    outcome = api.lab(
        api.LabRequest(corpus, Path(out), spec, traps, overwrite, run_context(ray_config(kw), kw["seed"]))
    )
    result = outcome.lab
    if traps is not None:
        _echo_trap_lab(outcome, fmt)
        return
    if fmt != "table":
        echo_result(outcome, fmt)
        return
    summary = result.summary()
    loss = result.loss
    say(
        f"{result.n_members} members, {result.n_nonmembers} non-members, {result.n_tokens:,} tokens; "
        f"target {result.model_dir}"
    )
    say(
        f"loss: members {loss['member_loss']:.3f}, non-members {loss['nonmember_loss']:.3f} "
        f"(gap {loss['gap']:.3f} nats/token)"
    )
    say(f"blind baseline AUC {summary['blind_auc']:.3f} (expected near 0.5: membership was assigned at random)")
    say(format_methods_table(result.evaluation.table))
    if result.precisions:
        say("\nAUC per query precision:\n" + format_precisions(result.precisions))


def _echo_trap_lab(outcome, fmt) -> None:
    """What ``lab --trap-copies`` prints: the detection table with a ``trained`` column, and the rates."""
    from docaudit.report.traps import format_detection

    if fmt != "table":
        echo_result(outcome, fmt)
        return
    result = outcome.lab
    say(format_detection(result.detection))
    rates = result.rates()
    say(
        f"p < {result.config.alpha}: {rates['members']['p_below_alpha']:.0%} of the {rates['members']['documents']}"
        f" trained documents, {rates['nonmembers']['p_below_alpha']:.0%} of the "
        f"{rates['nonmembers']['documents']} never-trained ones (their share is the test's level)"
    )
