"""Null simulations of the beyond-blind verdict: how often does it say "the model adds evidence"?

Each repetition draws ``n`` member and ``n`` non-member texts whose word distributions differ (a shift a real,
fold-refit blind classifier picks up, as an era or topic shift would) and runs
:func:`docaudit.methods.beyond_blind.beyond_blind` with the blind classifier refit on every outer and inner fold.
The model's score carries no membership signal:

- ``--era 0`` (noise): every document's model score is drawn from one normal distribution whatever its label.
  The truth is "the model adds nothing", so every "adds evidence" is a false positive; the rate must stay at or
  below the nominal level (``BeyondBlindConfig.p_level``, 5%) up to binomial noise.
- ``--era E`` (a text property the blind classifier misses): each document also has an "era", drawn from a normal
  distribution centred on ``+E`` (members) or ``-E`` (non-members) and absent from its words, and the model's
  score is that era plus noise of the same size (a model whose loss follows the era of a text, not its
  membership). The verdict then tests what it can: whether the model separates the sets beyond what this blind
  classifier separates. It does, so "adds evidence" fires, and the rate shows how often a reader who took it for
  membership would be wrong.

Prints one JSON line per size.

    python scripts/nulls/null_beyond_blind.py --sizes 12,30,100 --repetitions 400 [--era 0.5]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from docaudit.config import BeyondBlindConfig
from docaudit.inference.comparison import ADDS
from docaudit.methods import beyond_blind as bb
from docaudit.methods.blind import BlindFeatures
from docaudit.metrics import chunk_folds

VOCABULARY = 200
WORDS = 100
SHIFT = 0.12


def shifted_texts(n: int, shift: float, rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    """``n`` members and ``n`` non-members (shuffled): each text's words drawn from a Zipf-like base distribution
    tilted by ``+shift`` (members) or ``-shift`` (non-members) along a random direction, plus a per-text tilt of
    the same size so that the classes overlap."""
    labels = rng.permutation(np.r_[np.ones(n, int), np.zeros(n, int)])
    base = -np.log(np.arange(1, VOCABULARY + 1))
    direction = rng.normal(size=VOCABULARY)
    logits = (
        base + np.where(labels[:, None] == 1, shift, -shift) * direction + shift * rng.normal(size=(2 * n, VOCABULARY))
    )
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    cumulative = probs.cumsum(axis=1)
    draws = (rng.random((2 * n, WORDS, 1)) > cumulative[:, None, :]).sum(axis=2).clip(max=VOCABULARY - 1)
    return [" ".join(f"w{w}" for w in row) for row in draws], labels


def run(
    n: int,
    repetitions: int,
    seed: int = 0,
    kind: str = "tfidf",
    n_boot: int = 200,
    era: float = 0.0,
    report_every: int | None = None,
) -> dict:
    """The rate of "adds evidence" (and of p < level alone) over ``repetitions`` data sets of ``n`` + ``n`` whose
    model score is noise (``era`` 0) or follows an era the texts do not show (module docstring); with
    ``report_every``, the running result is printed every that many repetitions."""
    config = BeyondBlindConfig(n_boot=n_boot)
    adds, small_p, blind_aucs, model_aucs = 0, 0, [], []
    started = time.time()
    for r in range(repetitions):
        if report_every and r and r % report_every == 0:
            aucs = (blind_aucs, model_aucs)
            print(json.dumps(summary(n, r, adds, small_p, aucs, config, kind, started, era)), flush=True)
        rng = np.random.default_rng([seed, n, r])
        texts, labels = shifted_texts(n, SHIFT, rng)
        noise = rng.normal(size=2 * n) + (rng.normal(np.where(labels == 1, era, -era)) if era else 0.0)
        folds = chunk_folds(labels, config.folds, r)
        features = BlindFeatures(texts)
        result = bb.beyond_blind(
            labels, folds, bb.blind_scorer(features, kind, labels, r), bb.fixed_scorer(noise), config=config, seed=r
        )
        out = result.as_json()
        adds += result.verdict == ADDS
        small_p += out["p_value"] is not None and out["p_value"] < config.p_level
        blind_aucs.append(out["auc_blind_raw"])
        model_aucs.append(out["auc_model"])
    return summary(n, repetitions, adds, small_p, (blind_aucs, model_aucs), config, kind, started, era)


def summary(n, repetitions, adds, small_p, aucs, config, kind, started, era) -> dict:
    from scipy.stats import binomtest

    interval = binomtest(adds, repetitions).proportion_ci(0.95) if repetitions else None
    return {
        "n_per_class": n,
        "repetitions": repetitions,
        "era": era,
        "adds_evidence_rate": adds / repetitions,
        "adds_evidence_95ci": [interval.low, interval.high] if interval else None,
        "p_below_level_rate": small_p / repetitions,
        "nominal": config.p_level,
        "mean_blind_auc": float(np.mean(aucs[0])),
        "mean_model_auc": float(np.mean(aucs[1])),
        "blind_kind": kind,
        "seconds": round(time.time() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="12,30,100", help="documents per class, comma-separated")
    parser.add_argument("--repetitions", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kind", default="tfidf")
    parser.add_argument("--era", type=float, default=0.0, help="the era shift the model's score follows (0: noise)")
    args = parser.parse_args()
    for n in (int(v) for v in args.sizes.split(",")):
        out = run(n, args.repetitions, args.seed, kind=args.kind, era=args.era, report_every=10)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
