"""Tables and plots: ROC curves as CSV and PNG, metric tables as text."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .metrics import roc_table


def roc_frame(curves: dict[str, tuple[np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """One long table of ROC points for several named (labels, scores) pairs."""
    return pd.concat([roc_table(y, s).assign(curve=name) for name, (y, s) in curves.items()], ignore_index=True)


def plot_roc(frame: pd.DataFrame, path: Path, title: str = "ROC", highlight: str | None = None) -> None:
    """Plot every curve of a ``roc_frame``; ``highlight`` is drawn thick, the others thin."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5))
    for name, part in frame.groupby("curve", sort=False):
        thick = highlight is None or name == highlight
        ax.plot(part.fpr, part.tpr, lw=2 if thick else 0.8, alpha=1 if thick else 0.5, label=name)
    ax.plot([0, 1], [0, 1], "k--", lw=0.8)
    ax.set(xlabel="false positive rate", ylabel="true positive rate", title=title, xlim=(0, 1), ylim=(0, 1))
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def format_summary(summary: dict) -> str:
    """``AUC 0.812 ± 0.041 | TPR@10%FPR 45.0% ± 8.1% | TPR@1%FPR 12.0% ± 6.0%``."""
    return (f"AUC {summary['auc_mean']:.3f} ± {summary['auc_std']:.3f} | "
            f"TPR@10%FPR {summary['tpr_at_10fpr_mean']:.1%} ± {summary['tpr_at_10fpr_std']:.1%} | "
            f"TPR@1%FPR {summary['tpr_at_1fpr_mean']:.1%} ± {summary['tpr_at_1fpr_std']:.1%}")
