"""The study's outputs from its finished cells: ``study.csv`` (one row per model × exposures × tokens × method),
``cells.csv`` (beyond-blind and verdict shares per cell), ``study.md`` (markdown tables) and ``study.png``."""

from __future__ import annotations

import pathlib

import pandas as pd

from studies.common import write_csv

SHOWN = ("meta_classifier", "minkpp", "mink", "loss", "zlib")


def _fmt(auc, lo, hi) -> str:
    return f"{auc:.2f} [{lo:.2f}, {hi:.2f}]"


def markdown(study: pd.DataFrame, cells: pd.DataFrame, loss: pd.DataFrame | None) -> str:
    """AUC [95% bootstrap interval] per cell and method (best blind kind), then beyond-blind and verdict shares,
    then the loss change per exposure group."""
    lines = []
    blind = study[study.method.str.contains("blind")]
    best_blind = blind.loc[blind.groupby(["model", "exposures", "tokens"]).auc.idxmax()]
    head = ["model", "exposures", "tokens", *SHOWN, "blind (best kind)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (model, e, t), g in study.groupby(["model", "exposures", "tokens"], sort=True):
        by = {r.method: _fmt(r.auc, r.ci_low, r.ci_high) for r in g.itertuples()}
        b = best_blind[(best_blind.model == model) & (best_blind.exposures == e) & (best_blind.tokens == t)].iloc[0]
        lines.append(
            "| "
            + " | ".join([model, str(e), str(t), *[by.get(m, "") for m in SHOWN], f"{b.method[6:]} {b.auc:.2f}"])
            + " |"
        )
    lines += [
        "",
        "| model | exposures | tokens | members | non-members | beyond-blind delta [95%] | p | "
        "evidence: members | evidence: non-members | inconclusive |",
        "|" + "---|" * 10,
    ]
    for r in cells.sort_values(["model", "exposures", "tokens"]).itertuples():
        n_inconclusive = r.inconclusive_share_members * r.n_members + r.inconclusive_share_nonmembers * r.n_nonmembers
        inconclusive = n_inconclusive / (r.n_members + r.n_nonmembers)
        delta = "n/a" if pd.isna(r.beyond_delta) else _fmt(r.beyond_delta, r.beyond_delta_low, r.beyond_delta_high)
        p = "n/a" if pd.isna(r.beyond_p) else f"{r.beyond_p:.3g}"
        lines.append(
            f"| {r.model} | {r.exposures} | {r.tokens} | {r.n_members} | {r.n_nonmembers} | {delta} | {p} | "
            f"{r.evidence_share_members:.0%} | {r.evidence_share_nonmembers:.0%} | "
            f"{inconclusive:.0%} |"
        )
    if loss is not None:
        lines += [
            "",
            "| exposures | documents | base loss | trained loss | perplexity ratio (range) |",
            "|---|---|---|---|---|",
        ]
        for r in loss.itertuples():
            lines.append(
                f"| {r.exposures} | {r.documents} | {r.base_loss:.3f} | {r.trained_loss:.3f} | "
                f"{r.ppl_ratio:.3f} ({r.ppl_ratio_min:.3f}-{r.ppl_ratio_max:.3f}) |"
            )
    return "\n".join(lines) + "\n"


def plot(study: pd.DataFrame, path: pathlib.Path, method: str = "meta_classifier") -> None:
    """AUC of ``method`` on the trained model against exposures, one line per tokens queried, with the intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    part = study[(study.model == "trained") & (study.method == method)].sort_values("exposures")
    fig, ax = plt.subplots(figsize=(6, 4))
    for t, g in part.groupby("tokens"):
        ax.errorbar(
            g.exposures, g.auc, yerr=[g.auc - g.ci_low, g.ci_high - g.auc], marker="o", capsize=3, label=f"{t} tokens"
        )
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xticks(sorted(part.exposures.unique()), [str(e) for e in sorted(part.exposures.unique())])
    ax.set_xlabel("times each member was seen in continued pretraining")
    ax.set_ylabel(f"document AUC, {method} (95% interval)")
    ax.set_ylim(0, 1.02)
    ax.legend()
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)


def assemble(out: pathlib.Path) -> pd.DataFrame | None:
    """Collect the finished cells into the outputs (rewritten whole each time; cells not yet run are absent)."""
    done = sorted(out.glob("cells/*/cell.json"))
    if not done:
        return None
    study = pd.concat([pd.read_csv(p.parent / "rows.csv") for p in done], ignore_index=True)
    cells = pd.DataFrame([pd.read_json(p, typ="series") for p in done])
    write_csv(out / "study.csv", study)
    write_csv(out / "cells.csv", cells)
    loss = pd.read_csv(out / "loss_change.csv") if (out / "loss_change.csv").is_file() else None
    from docaudit.io import atomic_write_text

    atomic_write_text(out / "study.md", markdown(study, cells, loss))
    if (study.model == "trained").any():
        plot(study, out / "study.png")
    return study
