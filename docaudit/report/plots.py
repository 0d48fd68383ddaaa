"""ROC curves and histograms (matplotlib, headless)."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pandas as pd

from docaudit.metrics import roc_table


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


def plot_histogram(
    values, path: Path, title: str, xlabel: str, bins=10, range_=(0, 1), marks: dict | None = None
) -> None:
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


def png_data_uri(path: Path) -> str:
    """A PNG file as a ``data:`` URI, for self-contained HTML."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")
