"""Null simulation of the beyond-blind verdict: how often does it say "the model adds evidence" when the model's
score is pure noise?

Each repetition draws ``n`` member and ``n`` non-member texts whose word distributions differ (a shift a real,
fold-refit blind classifier picks up, as an era or topic shift would), gives every document a model score drawn
from the same normal distribution whatever its label (the model knows nothing), and runs
:func:`docaudit.methods.beyond_blind.beyond_blind` with the blind classifier refit on every outer and inner fold.
The truth is "the model adds nothing", so every "adds evidence" is a false positive; the rate must stay at or below
the nominal level (``BeyondBlindConfig.p_level``, 5%) up to binomial noise. Prints one JSON line per size.

    python scripts/null_beyond_blind.py --sizes 12,30,100 --repetitions 400
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from docaudit.config import BeyondBlindConfig
from docaudit.methods import beyond_blind as bb
from docaudit.methods.blind import BlindFeatures
from docaudit.metrics import chunk_folds

VOCABULARY = 200
WORDS = 100


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
    shift: float = 0.12,
    kind: str = "tfidf",
    n_boot: int = 200,
    report_every: int | None = None,
) -> dict:
    """The rate of "adds evidence" (and of p < level alone) over ``repetitions`` null data sets of ``n`` + ``n``;
    with ``report_every``, the running result is printed every that many repetitions."""
    config = BeyondBlindConfig(n_boot=n_boot)
    adds, small_p, blind_aucs = 0, 0, []
    started = time.time()
    for r in range(repetitions):
        if report_every and r and r % report_every == 0:
            print(json.dumps(summary(n, r, adds, small_p, blind_aucs, config, kind, started)), flush=True)
        rng = np.random.default_rng([seed, n, r])
        texts, labels = shifted_texts(n, shift, rng)
        noise = rng.normal(size=2 * n)
        folds = chunk_folds(labels, config.folds, r)
        features = BlindFeatures(texts)
        out = bb.beyond_blind(
            labels, folds, bb.blind_scorer(features, kind, labels, r), bb.fixed_scorer(noise), config=config, seed=r
        ).as_json()
        adds += out["verdict"] == bb.ADDS
        small_p += out["p_value"] is not None and out["p_value"] < config.p_level
        blind_aucs.append(out["auc_blind_raw"])
    return summary(n, repetitions, adds, small_p, blind_aucs, config, kind, started)


def summary(n, repetitions, adds, small_p, blind_aucs, config, kind, started) -> dict:
    return {
        "n_per_class": n,
        "repetitions": repetitions,
        "adds_evidence_rate": adds / repetitions,
        "p_below_level_rate": small_p / repetitions,
        "nominal": config.p_level,
        "mean_blind_auc": float(np.mean(blind_aucs)),
        "blind_kind": kind,
        "seconds": round(time.time() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="12,30,100", help="documents per class, comma-separated")
    parser.add_argument("--repetitions", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kind", default="tfidf")
    args = parser.parse_args()
    for n in (int(v) for v in args.sizes.split(",")):
        print(json.dumps(run(n, args.repetitions, args.seed, kind=args.kind, report_every=10)), flush=True)


if __name__ == "__main__":
    main()
