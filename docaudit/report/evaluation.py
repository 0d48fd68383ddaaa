"""The files ``evaluate`` writes: tables, JSON, ROC curves."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from docaudit.audit.evaluation import MethodsEvaluation, evaluation_json
from docaudit.methods.document_level import LEVELS


def roc_panels(result: MethodsEvaluation) -> dict[str, pd.DataFrame]:
    """ROC frames, one per scaling level: the detectors at that level; the document panels (``doc_avg``,
    ``doc_threshold``) also show the document-level rows (meta-classifier, blind baselines)."""
    from docaudit.report.plots import roc_frame

    def name(method, level):
        return f"{method}:{level}" if method == "blind" else method

    doc_wide = {name(m, lv): c for (m, lv), c in result.curves.items() if lv not in LEVELS}
    panels = {}
    for level in LEVELS:
        chosen = {name(m, lv): c for (m, lv), c in result.curves.items() if lv == level}
        if chosen:
            panels[level] = roc_frame(chosen | (doc_wide if level != "sequence" else {}))
    return panels or {"document": roc_frame(doc_wide)}


def write_evaluation(result: MethodsEvaluation, out: Path, overwrite: bool = False) -> None:
    """``evaluation.csv`` (the table), ``evaluation_folds.csv``, ``evaluation.json``, ``documents.csv`` and
    ``documents.json`` (each document's fold and out-of-fold scores), ``roc.csv`` and ``roc.png`` into ``out`` (a
    new or empty folder, or an earlier evaluation with ``overwrite``), written whole or not at all."""
    from docaudit.io import json_text, write_csv
    from docaudit.outputs import staged_dir
    from docaudit.provenance import envelope
    from docaudit.report.plots import plot_roc_panels

    with staged_dir(Path(out), "evaluation", overwrite) as tmp:
        write_csv(result.table.drop(columns=["configs"], errors="ignore"), tmp / "evaluation.csv")
        write_csv(result.per_fold, tmp / "evaluation_folds.csv")
        whole = envelope("evaluation", evaluation_json(result))
        (tmp / "evaluation.json").write_text(json_text(whole))
        if result.documents is not None:
            write_csv(result.documents, tmp / "documents.csv")
            rows = result.documents.to_dict(orient="records")
            provenance = {k: whole[k] for k in ("inputs", "model", "seed")}
            (tmp / "documents.json").write_text(json_text(envelope("evaluation-documents", rows, **provenance)))
        panels = roc_panels(result)
        write_csv(pd.concat([f.assign(level=lv) for lv, f in panels.items()], ignore_index=True), tmp / "roc.csv")
        plot_roc_panels(
            panels, tmp / "roc.png", title=f"pooled out-of-fold ROC — {result.info.get('model_identity', 'no model')}"
        )
