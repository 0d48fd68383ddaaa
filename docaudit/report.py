"""Tables and plots: ROC curves as CSV and PNG, metric tables as text."""
from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .metrics import roc_table


def roc_frame(curves: dict[str, tuple[np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """One long table of ROC points for several named (labels, scores) pairs."""
    return pd.concat([roc_table(y, s).assign(curve=name) for name, (y, s) in curves.items()], ignore_index=True)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _draw_roc(ax, frame: pd.DataFrame, title: str, highlight: str | None = None) -> None:
    for name, part in frame.groupby("curve", sort=False):
        thick = highlight is None or name == highlight
        ax.plot(part.fpr, part.tpr, lw=2 if thick else 0.8, alpha=1 if thick else 0.5, label=name)
    ax.plot([0, 1], [0, 1], "k--", lw=0.8)
    ax.set(xlabel="false positive rate", ylabel="true positive rate", title=title, xlim=(0, 1), ylim=(0, 1))
    ax.legend(fontsize=7, loc="lower right")


def plot_roc(frame: pd.DataFrame, path: Path, title: str = "ROC", highlight: str | None = None) -> None:
    """Plot every curve of a ``roc_frame``; ``highlight`` is drawn thick, the others thin."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 5))
    _draw_roc(ax, frame, title, highlight)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_roc_panels(panels: dict[str, pd.DataFrame], path: Path, title: str = "ROC") -> None:
    """One figure, one ROC panel per named ``roc_frame`` (side by side)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4.8), squeeze=False)
    for ax, (name, frame) in zip(axes[0], panels.items()):
        _draw_roc(ax, frame, name)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_histogram(values, path: Path, title: str, xlabel: str, bins=10, range_=(0, 1), marks: dict | None = None) -> None:
    """A histogram PNG of one array, or of several side by side (``values = {label: array}``), with optional
    labelled vertical lines ``marks = {label: x}``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    if isinstance(values, dict):
        ax.hist(list(values.values()), bins=bins, range=range_, label=list(values), edgecolor="white")
    else:
        ax.hist(values, bins=bins, range=range_, color="#4c72b0", edgecolor="white")
    for i, (label, x) in enumerate((marks or {}).items()):
        ax.axvline(x, color=f"C{i + 2}", ls="--", lw=1.2, label=label)
    if marks or isinstance(values, dict):
        ax.legend(fontsize=7)
    ax.set(title=title, xlabel=xlabel, ylabel="count")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def mean_std(mean: float, std: float, percent: bool = False) -> str:
    """``0.812 ± 0.041`` or, with ``percent``, ``45.0% ± 8.1%``; empty for a missing value."""
    if pd.isna(mean):
        return ""
    return f"{mean:.1%} ± {std:.1%}" if percent else f"{mean:.3f} ± {std:.3f}"


def format_methods_table(table: pd.DataFrame) -> str:
    """Rows per method × level, the paper's Table 4 layout: mean ± std of AUC and TPR at 10% and 1% FPR over folds
    (and, where present, the pooled out-of-fold AUC with its bootstrap interval)."""
    shown = pd.DataFrame({
        "method": table["method"],
        "level": table["level"],
        "AUC": [mean_std(m, s) for m, s in zip(table.auc_mean, table.auc_std)],
        "TPR@10%FPR": [mean_std(m, s, True) for m, s in zip(table.tpr_at_10fpr_mean, table.tpr_at_10fpr_std)],
        "TPR@1%FPR": [mean_std(m, s, True) for m, s in zip(table.tpr_at_1fpr_mean, table.tpr_at_1fpr_std)],
    })
    if "pooled_auc" in table:
        shown["pooled AUC [95% CI]"] = ["" if pd.isna(p) else f"{p:.3f} [{lo:.3f}, {hi:.3f}]"
                                        for p, lo, hi in zip(table.pooled_auc, table.pooled_auc_lo, table.pooled_auc_hi)]
    return shown.to_string(index=False)


def format_auc_pivot(table: pd.DataFrame) -> str:
    """AUC mean ± std with one row per method and one column per level (blank where a method has no such level)."""
    cells = table.assign(cell=[mean_std(m, s) for m, s in zip(table.auc_mean, table.auc_std)])
    pivot = cells.pivot(index="method", columns="level", values="cell").fillna("")
    pivot = pivot.reindex(index=list(dict.fromkeys(table.method)), columns=list(dict.fromkeys(table.level)))
    return pivot.fillna("").to_string()


def png_data_uri(path: Path) -> str:
    """A PNG file as a ``data:`` URI, for self-contained HTML."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def html_table(frame: pd.DataFrame, floats: str = "{:.3f}") -> str:
    """A plain HTML table of a DataFrame (values escaped, floats formatted)."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for _, row in frame.iterrows():
        cells = [floats.format(v) if isinstance(v, float) else str(v) for v in row]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def format_query(query: dict) -> str:
    """``context 128, stride 127, max tokens 512 (random excerpt, seed 0)`` from ``QueryConfig.used()``."""
    stride = query["stride"] if query["stride"] is not None else query["context"] - 1
    return (f"context {query['context']}, stride {stride}, max tokens {query['max_tokens'] or 'all'}"
            + (f" ({query['excerpt']} excerpt, seed {query['seed']})" if query["max_tokens"] else ""))


def format_summary(summary: dict) -> str:
    """``AUC 0.812 ± 0.041 | TPR@10%FPR 45.0% ± 8.1% | TPR@1%FPR 12.0% ± 6.0%``."""
    return (f"AUC {summary['auc_mean']:.3f} ± {summary['auc_std']:.3f} | "
            f"TPR@10%FPR {summary['tpr_at_10fpr_mean']:.1%} ± {summary['tpr_at_10fpr_std']:.1%} | "
            f"TPR@1%FPR {summary['tpr_at_1fpr_mean']:.1%} ± {summary['tpr_at_1fpr_std']:.1%}")


def jsonable(value):
    """``value`` with NumPy scalars as Python numbers and every NaN or infinity as None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(value, indent: int = 2) -> str:
    """Strict JSON of ``value`` (see :func:`jsonable`): what every docaudit JSON output is written with."""
    return json.dumps(jsonable(value), indent=indent, allow_nan=False)
