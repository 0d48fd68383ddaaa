"""ROC curves and histograms (matplotlib, headless)."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pandas as pd

from docaudit.metrics import roc_table
from docaudit.untrusted import read_untrusted


def roc_frame(curves: dict[str, tuple[np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """One long table of ROC points for several named (labels, scores) pairs."""
    return pd.concat([roc_table(y, s).assign(curve=name) for name, (y, s) in curves.items()], ignore_index=True)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curve_auc(part: pd.DataFrame) -> float:
    """Area under one curve of a ``roc_frame`` (trapezoids over its points)."""
    from sklearn.metrics import auc

    return float(auc(part.fpr, part.tpr))


def _low_fpr(frame: pd.DataFrame) -> float:
    """The left edge of a log-log ROC: a little below the smallest non-zero false-positive rate (at least 1e-4)."""
    positive = frame.fpr[frame.fpr > 0]
    return max(1e-4, float(positive.min()) / 2) if len(positive) else 1e-3


def _draw_roc(ax, frame: pd.DataFrame, title: str, highlight: str | None = None, log: bool = False) -> list:
    """One ROC panel in the shared style: each curve labelled with its AUC, a curve at AUC 1.0 drawn over the
    frame (limits a little outside [0, 1], no clipping); ``log``: both axes logarithmic, zero rates drawn at the
    left/bottom edge, so the low-FPR region that TPR@1%FPR reports is readable."""
    lo = _low_fpr(frame) if log else 0.0
    handles = []
    for i, (name, part) in enumerate(frame.groupby("curve", sort=False)):
        thick = highlight is None or name == highlight
        x, y = (part.fpr.clip(lower=lo), part.tpr.clip(lower=lo)) if log else (part.fpr, part.tpr)
        (line,) = ax.plot(
            x,
            y,
            lw=2 if thick else 1,
            alpha=1 if thick else 0.6,
            color=f"C{i % 10}",
            ls=("-", "--", "-.", ":")[i % 4],  # curves that coincide stay visible
            label=f"{name} (AUC {curve_auc(part):.3f})",
            clip_on=False,
            zorder=3 if thick else 2,
        )
        handles.append(line)
    if log:
        grid = np.geomspace(lo, 1, 50)
        ax.plot(grid, grid, color="0.5", ls="--", lw=0.8)
        ax.set(xscale="log", yscale="log", xlim=(lo, 1.05), ylim=(lo, 1.1))
        ax.axvline(0.01, color="0.7", lw=0.8, ls=":")
        from matplotlib.ticker import FuncFormatter, NullFormatter

        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(FuncFormatter(_minor_label) if lo > 0.05 else NullFormatter())
    else:
        ax.plot([0, 1], [0, 1], color="0.5", ls="--", lw=0.8)
        ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
    ax.set(xlabel="false positive rate" + (" (log)" if log else ""), ylabel="true positive rate", title=title)
    ax.grid(alpha=0.3)
    return handles


def _minor_label(value: float, _pos) -> str:
    """Labels 0.2 and 0.5 (of each decade) on a log axis spanning less than two decades."""
    lead = value / 10 ** np.floor(np.log10(value))
    return f"{value:g}" if round(lead) in (2, 5) else ""


def _legend_below(fig, ax, handles) -> None:
    """The legend under the panel, outside the curves."""
    ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False)


def plot_roc(frame: pd.DataFrame, path: Path, title: str = "ROC", highlight: str | None = None) -> None:
    """Every curve of a ``roc_frame`` on linear and on log-log axes, side by side; ``highlight`` is drawn thick,
    the others thin; the legend (with each curve's AUC) below the panels."""
    plot_roc_panels({title: frame}, path, title=None, highlight=highlight)


def plot_roc_panels(
    panels: dict[str, pd.DataFrame], path: Path, title: str | None = "ROC", highlight: str | None = None
) -> None:
    """One figure, one column per named ``roc_frame``: linear axes above, log-log axes below, the legend with
    each curve's AUC under the column."""
    plt = _pyplot()
    n_curves = max(frame.curve.nunique() for frame in panels.values())
    single = len(panels) == 1  # one ROC: its linear and log-log panels side by side
    rows, cols = (1, 2) if single else (2, len(panels))
    fig, axes = plt.subplots(
        rows, cols, figsize=(4.6 * cols, 4.6 * rows + 0.5 + 0.16 * n_curves), squeeze=False, layout="constrained"
    )
    for col, (name, frame) in enumerate(panels.items()):
        linear, log = (axes[0][0], axes[0][1]) if single else (axes[0][col], axes[1][col])
        _draw_roc(linear, frame, name, highlight)
        handles = _draw_roc(log, frame, f"{name}, log-log (low FPR)", highlight, log=True)
        if single:
            fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncol=2, frameon=False)
        else:
            _legend_below(fig, log, handles)
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def swarm_offsets(x, width: float, height: float = 0.12, limit: float = 0.42) -> np.ndarray:
    """Vertical offsets that keep dots of diameter ``width`` (in x units) and ``height`` (in y units) apart, as in a
    beeswarm plot: in order of ``x``, each dot takes the offset nearest the row's centre (0, +h, -h, +2h, ...) where
    it touches no dot placed before. Offsets beyond ``limit`` are scaled back into it (dots then overlap a little,
    but each stays at its own place)."""
    x = np.asarray(x, dtype=float)
    out = np.zeros(len(x))
    placed: list[tuple[float, float]] = []
    for i in np.argsort(x, kind="stable"):
        near = [(px, py) for px, py in placed if abs(x[i] - px) < width]
        for k in range(len(x) + 1):
            y = height * ((k + 1) // 2) * (1 if k % 2 else -1)
            if all(((x[i] - px) / width) ** 2 + ((y - py) / height) ** 2 >= 1 - 1e-9 for px, py in near):
                break
        out[i] = y
        placed.append((x[i], y))
    top = np.abs(out).max() if len(out) else 0.0
    return out * (limit / top) if top > limit else out


def plot_rate_strip(books: pd.DataFrame, calibration: pd.DataFrame, path: Path, method: str) -> None:
    """Each audited book a dot at its contamination rate with its book-level interval, under two reference rows:
    the calibration members' and non-members' books, whose ranges are shaded across the whole plot. Calibration
    books with the same or close rates are spread vertically (:func:`swarm_offsets`), so every one is seen."""
    plt = _pyplot()
    groups = [("calibration non-members", "non-member", "#4c72b0"), ("calibration members", "member", "#c44e52")]
    rows = len(books) + len(groups)
    fig, ax = plt.subplots(figsize=(8, 1.6 + 0.28 * rows), layout="constrained")
    for i, (label, role, color) in enumerate(groups):
        rates = calibration.contamination_rate[calibration.label == role].to_numpy() * 100
        if len(rates):
            ax.axvspan(rates.min() - 0.5, rates.max() + 0.5, color=color, alpha=0.12, lw=0, label=f"{label} (range)")
            offsets = swarm_offsets(rates, width=1.6)
            ax.scatter(rates, i + offsets, color=color, s=28, alpha=0.8, zorder=3, clip_on=False, edgecolors="white")
    y = np.arange(len(books)) + len(groups) + 0.5
    ax.hlines(y, books.book_ci_low * 100, books.book_ci_high * 100, color="0.35", lw=1.4, zorder=2)
    ax.scatter(books.contamination_rate * 100, y, color="black", s=30, zorder=3, clip_on=False, label="audited book")

    def name(book, title) -> str:  # the title, shortened, and the id
        if not isinstance(title, str) or not title:
            return book if len(book) <= 28 else book[:27] + "…"
        return (title if len(title) <= 22 else title[:21] + "…") + f" ({book})"

    names = [name(str(r.book), getattr(r, "title", None)) for r in books.itertuples(index=False)]
    ax.set_yticks([0, 1, *y], [g[0] for g in groups] + names, fontsize=8)
    ax.set_ylim(rows + 0.2, -0.7)
    ax.set_xlim(-2, 102)
    ax.set_xlabel(f"contamination rate (% of snippets over the threshold, {method}); line: book-level interval")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
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
    return "data:image/png;base64," + base64.b64encode(read_untrusted(Path(path), "plot")).decode("ascii")
