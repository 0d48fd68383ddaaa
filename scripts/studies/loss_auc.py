"""AUC of the trained model's loss and of the loss change (trained − base, a reference-model attack), per exposure
group against the non-members, from a run's ``perplexity.csv`` (the leading max(--tokens) tokens of each book), with
95% stratified bootstrap intervals (2,000 resamples, seed 0). Used where a run's cells did not finish.

    python scripts/studies/loss_auc.py study-run/perplexity.csv
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score


def main(paths: list[str]) -> None:
    rng = np.random.default_rng(0)
    print("| run | exposures | score | members | non-members | AUC [95%] |\n|---|---|---|---|---|---|")
    for path in paths:
        frame = pd.read_csv(path)
        non = frame[frame.exposures == 0]
        for e in sorted(set(frame.exposures) - {0}):
            mem = frame[frame.exposures == e]
            for name, score in (
                ("loss", lambda g: -g.trained_loss),
                ("loss change", lambda g: g.base_loss - g.trained_loss),
            ):
                a, b = score(mem).to_numpy(), score(non).to_numpy()
                y = np.r_[np.ones(len(a)), np.zeros(len(b))]
                auc = roc_auc_score(y, np.r_[a, b])
                boots = [roc_auc_score(y, np.r_[rng.choice(a, len(a)), rng.choice(b, len(b))]) for _ in range(2000)]
                lo, hi = np.percentile(boots, [2.5, 97.5])
                print(f"| {path} | {e} | {name} | {len(a)} | {len(b)} | {auc:.2f} [{lo:.2f}, {hi:.2f}] |")


if __name__ == "__main__":
    main(sys.argv[1:])
