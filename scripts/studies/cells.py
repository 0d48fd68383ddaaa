"""One cell of the study (a model, the members seen ``exposures`` times against all non-members, the documents'
leading ``tokens`` tokens): docaudit's evaluation on the true labels, the beyond-blind comparison and the share
of documents that a ``predict``-style verdict calls "evidence of membership"; and the members' loss change."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pandas as pd

from docaudit import api
from docaudit.audit.evaluation import META
from docaudit.audit.specs import EvaluationSpec
from docaudit.config import BeyondBlindConfig, MetaConfig, QueryConfig
from docaudit.corpus.documents import Document
from docaudit.inference.conformal import conformal_p
from docaudit.inference.verdicts import DEFAULT_ALPHA, EVIDENCE, INCONCLUSIVE, Reason, run_verdicts

DETECTORS = ("minkpp", "mink", "loss", "zlib")
DETECTOR_LEVEL = "doc_avg"  # a detector's document score: the mean of its sequence scores


def verdicts(scores: np.ndarray, labels: np.ndarray, auc_low: float, alpha: float = DEFAULT_ALPHA) -> list[str]:
    """A verdict per document from its out-of-fold meta-classifier score, through docaudit's inference package:
    the rank p-value (``conformal.conformal_p``) of the score among the other known non-members' out-of-fold
    scores, then ``verdicts.run_verdicts`` ("inconclusive" when the classifier's AUC interval, lower end
    ``auc_low``, does not exclude 0.5, or too few non-members make evidence unreachable; Benjamini–Hochberg over
    the rest). The scores come from different fold models, so this is a cross-conformal p-value, not ``predict``'s
    full-conformal one (which needs the training features the study does not keep): a summary of how separable
    the cell's documents are, read beside the AUC, not a verdict with a guarantee."""
    nonmembers = np.flatnonzero(labels == 0)
    p_values = [conformal_p(scores[i], scores[nonmembers[nonmembers != i]]) for i in range(len(scores))]
    chance = Reason("classifier_at_chance", "the classifier's AUC interval includes 0.5")
    why = [chance] if not auc_low > 0.5 else []
    found = run_verdicts(p_values, [why for _ in p_values], len(nonmembers) - 1, alpha)
    return [v.verdict for v in found]


def _method_rows(table: pd.DataFrame) -> list[dict]:
    rows = []
    for r in table.to_dict("records"):
        if r["method"] == META:
            name = META
        elif r["method"] in DETECTORS and r["level"] == DETECTOR_LEVEL:
            name = r["method"]
        elif r["method"] == "blind":
            name = f"blind_{r['level']}"
        else:
            continue
        rows.append(
            {
                "method": name,
                "level": r["level"],
                "auc": r["pooled_auc"],
                "ci_low": r["pooled_auc_ci_low"],
                "ci_high": r["pooled_auc_ci_high"],
                "auc_fold_mean": r["auc_mean"],
                "auc_fold_std": r["auc_std"],
            }
        )
    return rows


def evaluate_cell(
    members: list[Document],
    nonmembers: list[Document],
    lm,
    query: QueryConfig,
    folds: int,
    seed: int,
    meta: MetaConfig = MetaConfig(),
    beyond: BeyondBlindConfig = BeyondBlindConfig(),
):
    """``(rows, scores, summary)``: one row per method (AUC pooled over the out-of-fold scores with its 95%
    bootstrap interval), each document's out-of-fold scores with its verdict, and the cell's beyond-blind and
    verdict summary. ``meta``/``beyond``: docaudit's defaults unless a smaller run asks for fewer trees/resamples."""
    request = api.EvaluateRequest(
        members,
        nonmembers,
        models=api.ModelSpec(lm),
        query=query,
        detectors=api.DetectorSpec(list(DETECTORS)),
        spec=EvaluationSpec(meta=meta, folds=folds, beyond_config=beyond),
        reading=api.DocumentSpec(raw=True),
        run=api.RunContext(seed=seed),
    )
    ev = api.evaluate(request).evaluation
    scores = ev.documents.copy()
    meta_column = f"{META}:document"
    labels = scores.label.to_numpy()
    rows = _method_rows(ev.table)
    auc_low = next(r["ci_low"] for r in rows if r["method"] == META)
    scores["verdict"] = verdicts(scores[meta_column].to_numpy(dtype=float), labels, auc_low)
    bb = ev.beyond_blind or {}
    summary = {
        "n_members": int((labels == 1).sum()),
        "n_nonmembers": int((labels == 0).sum()),
        "beyond_delta": bb.get("delta"),
        "beyond_delta_low": bb.get("delta_ci_low"),
        "beyond_delta_high": bb.get("delta_ci_high"),
        "beyond_p": bb.get("p_value"),
        "beyond_verdict": bb.get("verdict", bb.get("unavailable")),
        "blind_kind": bb.get("blind_kind"),
    }
    for role, label in (("members", 1), ("nonmembers", 0)):
        part = scores.verdict[scores.label == label]
        summary[f"evidence_share_{role}"] = float((part == EVIDENCE).mean()) if len(part) else math.nan
        summary[f"inconclusive_share_{role}"] = float((part == INCONCLUSIVE).mean()) if len(part) else math.nan
    return rows, scores, summary


def doc_losses(querier, texts: dict[str, str]) -> dict[str, float]:
    """Mean loss (nats per token) of each text as docaudit's querier scores it (the same windows as the cells)."""
    return {i: -float(querier.stats(t).logp.mean(dtype=np.float64)) for i, t in sorted(texts.items())}


def loss_change(perplexity: pd.DataFrame) -> pd.DataFrame:
    """Per exposure group (0: the non-members): documents, mean loss before and after, and the geometric-mean
    perplexity ratio trained / base (``exp`` of the mean loss difference)."""
    rows = []
    for e, g in perplexity.groupby("exposures"):
        diff = (g.trained_loss - g.base_loss).to_numpy()
        rows.append(
            {
                "exposures": int(e),
                "documents": len(g),
                "base_loss": g.base_loss.mean(),
                "trained_loss": g.trained_loss.mean(),
                "ppl_ratio": float(np.exp(diff.mean())),
                "ppl_ratio_min": float(np.exp(diff.min())),
                "ppl_ratio_max": float(np.exp(diff.max())),
            }
        )
    return pd.DataFrame(rows)


def documents_for(directory: pathlib.Path, texts: dict[str, str]) -> list[Document]:
    """The texts as Documents read from their files in ``directory`` (written by the plan stage)."""
    from docaudit.io import sha256_text

    return [Document(i, str(directory / f"{i}.txt"), t, sha256_text(t)) for i, t in sorted(texts.items())]
