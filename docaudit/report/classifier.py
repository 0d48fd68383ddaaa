"""The classifier folder ``train`` writes: classifier, card, ROC; and the card's text."""

from __future__ import annotations

from pathlib import Path

from docaudit.corpus.documents import (
    duplicates_note,
)
from docaudit.inference.verdicts import smallest_p
from docaudit.io import atomic_write_text, write_csv
from docaudit.methods.meta import classifier as meta_classifier
from docaudit.methods.meta.conformal_data import save_conformal
from docaudit.methods.meta.folds import save_folds
from docaudit.methods.meta.persistence import (
    CARD_NORMALIZE_CHARS_BEFORE_FIELD,
    save_classifier,
)
from docaudit.outputs import staged_dir
from docaudit.report.plots import plot_roc, roc_frame
from docaudit.report.tables import format_beyond_blind, format_query, format_summary


def out_of_fold_predictions(documents, evaluation: meta_classifier.Evaluation):
    """One row per training document: its id, file, label, the fold whose test chunk held it and the membership
    score the classifier trained without that chunk gave it."""
    import pandas as pd

    return pd.DataFrame(
        {
            "document": [d.id for d in documents],
            "file": [d.path for d in documents],
            "label": evaluation.labels.astype(int),
            "fold": evaluation.fold_of,
            "membership_score": evaluation.scores,
        }
    )


def save_model_dir(
    out: Path,
    estimator,
    card: dict,
    evaluation: meta_classifier.Evaluation,
    overwrite: bool = False,
    documents=None,
    fold_models: tuple | None = None,
    conformal_data: dict | None = None,
) -> None:
    """Write classifier, card, ROC CSV/PNG, given the ``documents`` the out-of-fold predictions
    (``predictions.csv``) and, given ``fold_models`` (each fold's meta-classifier and blind model), the models
    per-document p-values need and, given ``conformal_data``, the training features of the full-conformal
    p-value (``conformal.skops``), into a temporary directory, then swap it into place."""
    with staged_dir(out, "classifier", overwrite) as tmp:
        save_classifier(tmp, estimator, card)
        if fold_models is not None:
            save_folds(tmp, *fold_models)
        if conformal_data is not None:
            save_conformal(tmp, conformal_data)
        if documents is not None:
            write_csv(out_of_fold_predictions(documents, evaluation), tmp / "predictions.csv")
        curves = {
            f"fold {i + 1}": (evaluation.labels[evaluation.fold_of == i], evaluation.scores[evaluation.fold_of == i])
            for i in range(len(evaluation.folds))
        }
        curves["pooled out-of-fold"] = (evaluation.labels, evaluation.scores)
        frame = roc_frame(curves)
        write_csv(frame, tmp / "roc.csv")
        plot_roc(
            frame,
            tmp / "roc.png",
            title=f"docaudit meta-classifier ({card['configuration']})",
            highlight="pooled out-of-fold",
        )
        atomic_write_text(tmp / "card.md", model_card_markdown(card))


def text_cleaning(card: dict) -> str:
    """How a classifier's documents were cleaned, in words (from its card)."""
    if card.get("raw", False):
        return "as in the files (no cleaning)"
    if card.get("normalize_chars", CARD_NORMALIZE_CHARS_BEFORE_FIELD):
        return "boilerplate removed; typographic characters, emphasis markup and whitespace normalized"
    return "boilerplate removed; characters as in the files"


def chance_level(card: dict) -> bool:
    """Whether the pooled out-of-fold AUC's bootstrap interval includes 0.5."""
    auc = card["pooled_bootstrap_95"]["auc"]
    return includes_chance((auc["ci_low"], auc["ci_high"]))


def includes_chance(interval) -> bool:
    lo, hi = interval
    return lo <= 0.5 <= hi


def model_card_markdown(card: dict) -> str:
    q, m = card["query"], card["meta"]
    precision = card["model_config"]["quantize"] or card["model_config"]["dtype"]
    lines = [
        f"# docaudit meta-classifier — {card['configuration']}",
        "",
        f"- target model: `{card['model_identity']}` ({precision})",
        f"- query: {format_query(q)}",
        f"- documents: {card['n_members']} members, {card['n_nonmembers']} non-members ({card['n_skipped']} skipped"
        f"{duplicates_note(card.get('duplicates_dropped'), '; ')})",
        f"- text: {text_cleaning(card)}",
        f"- selection: norm={m['norm']}, features={m['features']}; "
        f"chosen per fold: {', '.join(card['fold_configurations'])}",
        f"- {m['folds']}-fold chunks (spread over folds): {format_summary(card['metrics'])}",
        "- quality: pooled out-of-fold AUC {point:.3f} (95% bootstrap interval over documents "
        "{ci_low:.3f}–{ci_high:.3f}), the figure predict and the shift warning use".format(
            **card["pooled_bootstrap_95"]["auc"]
        ),
    ]
    if card.get("conformal"):
        n = card["conformal"]["n_nonmembers"]
        if card["conformal"].get("variant") == "full-conformal":
            lines.append(
                f"- per-document p-values: full conformal against the {n} known non-members (the forest refit with "
                f"the judged document added as a non-member, out-of-bag scores; valid in finite samples, smallest "
                f"attainable 1/{n + 1} = {smallest_p(n):.3g}); blind p-values (a gate at a fixed level) from the "
                f"{card['conformal']['blind_kind']} baseline"
            )
        else:
            lines.append(
                "- per-document p-values: none; this classifier was saved without the training features the "
                "full-conformal p-value needs: train it again (docaudit train) to get them"
            )
    if chance_level(card):
        lines.append(
            "- the interval includes 0.5: on its own evaluation this classifier does not detect membership "
            "better than chance, so its predictions are not evidence either way"
        )
    if "blind" in card:
        lines.append(
            f"- model-free blind baseline on the same folds: AUC {card['blind']['blind_auc']:.3f} "
            f"({card['blind']['best_kind']})"
        )
    if card.get("beyond_blind"):
        lines.append(f"- {format_beyond_blind(card['beyond_blind'])}")
    if card.get("warning"):
        lines += ["", f"**{card['warning']}**"]
    return "\n".join(lines) + "\n"
