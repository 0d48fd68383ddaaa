"""Null simulations of the one-book tests' geometry: how often ``controls`` and ``probe`` say "evidence of
membership" for never-seen books whose passage values correlate along the text, at matched geometry (the rule
docaudit runs: every text's passages one per stretch of a fixed width, ``corpus.segments.stretch_starts``; each
library text long enough compared through as many consecutive passages as the book has,
``inference.matched.matched_rank``, through each command's own ``judge``) and under the former rules (passages
spread one per equal stretch of each text's whole length; ``controls`` ranked a random k-subset of each library
text among the texts at least as dense as the book, with the ``shorter_than_library`` gate; ``probe`` ranked a
random k-subset of every text), written out below as they were.

Each cell simulates ``--trials`` never-seen books, each against its own ``--library`` never-seen texts
(``lab.passage_nulls``: a text's level, a latent value along it, passage noise), and prints the rate of
"evidence" at ``--alpha`` with its 95% Wilson interval, next to the exact rate of a rank among ``--library`` texts
(``floor(alpha (n + 1)) / (n + 1)``); with ``--shift`` also the rate for books raised by it (power). 2,000 trials
see a doubled rate (0.095 against 0.048) with power above 0.99.

    python scripts/nulls/null_geometry.py --trials 2000
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from docaudit.audit import probes, synthetic_controls
from docaudit.audit.probes import ProbedText
from docaudit.audit.synthetic_controls import BookControls
from docaudit.config import ControlsConfig, ProbeConfig
from docaudit.inference.conformal import conformal_p
from docaudit.inference.controls import block_mean
from docaudit.inference.snippet_rates import compared_count, subsample
from docaudit.inference.verdicts import EVIDENCE
from docaudit.lab.passage_nulls import TextProcess, text_values

PASSAGE = 100  # units (words or tokens) per passage


def fixed(n):
    return lambda rng: n


def between(lo, hi):
    return lambda rng: int(rng.integers(lo, hi))


def mostly(short, long, share):
    """A library text as long as ``short`` with probability ``share``, else as long as ``long``."""
    return lambda rng: short if rng.random() < share else long


# name: (command, process, book length, library lengths, stretch width at matched geometry, most passages)
CELLS = {
    "probe: a tiled 400-word book, 20,000-word library, drift over 200 words": (
        "probe", TextProcess("monotone", 200.0), fixed(400), fixed(20000), 100, 16,
    ),
    "probe: a tiled 800-word book, 20,000-word library, drift over 200 words": (
        "probe", TextProcess("monotone", 200.0), fixed(800), fixed(20000), 100, 16,
    ),
    "probe: 1,600-word books, library of 1,600 to 40,000 words, drift over 200 words": (
        "probe", TextProcess("monotone", 200.0), fixed(1600), between(1600, 40000), 100, 16,
    ),
    "controls: 8 passages tiling 800 tokens, 60% of the library as long, 40% 30 tiling 3,000, drift over 400": (
        "controls", TextProcess("monotone", 400.0), fixed(800), mostly(800, 3000, 0.6), 100, 32,
    ),
    "controls: a rhythm of 120 tokens in step with the book's stretches, books of 1,920, library texts of 1,600": (
        "controls", TextProcess("periodic", 120.0), fixed(1920), fixed(1600), 100, 16,
    ),
    "controls: neighbours pulling apart (cells of 100), books of 32,000, library texts of 1,600": (
        "controls", TextProcess("negative", 100.0, level_sd=0.25, latent_sd=2.0), fixed(32000), fixed(1600), 100, 16,
    ),
    "controls: raised chapter openings every 3,000 tokens, books of 12,000 to 40,000, library 1,600 to 40,000": (
        "controls", TextProcess("openings", 3000.0), between(12000, 40000), between(1600, 40000), 100, 16,
    ),
}  # fmt: skip


def _former_layout(n_units: int, count: int) -> tuple[int, int]:
    """The former layout: up to ``count`` passages, one per equal stretch of the whole text."""
    k = min(count, n_units // PASSAGE)
    return max(PASSAGE, n_units // max(k, 1)), k


def former_controls(book, book_units, library, library_units, rng, alpha, block) -> bool:
    """The former ``controls`` rule, written out: the texts at least as dense as the book (mean gap between
    neighbouring passages no larger), a random k-subset of each ranked (``k`` the fewest passages), "inconclusive"
    where the book has fewer passages than the library's median or too few texts are dense enough."""
    gap = [(n - len(v) * PASSAGE) / max(len(v), 1) for v, n in zip([book, *library], [book_units, *library_units])]
    dense = [v for v, g in zip(library, gap[1:]) if g <= gap[0]]
    if len(book) < np.median([len(v) for v in library]):
        return False
    k, compared, _ = compared_count(len(book), [len(v) for v in dense], 2 * block)
    if k is None or 1 / (len(compared) + 1) >= alpha:
        return False
    null = [subsample(dense[i], k, rng).mean() for i in compared]
    return conformal_p(subsample(book, k, rng).mean(), null) < alpha


def former_probe(book, library, rng, alpha) -> bool:
    """The former ``probe`` rule, written out: a random k-subset of every text, ``k`` the fewest passages."""
    k, compared, _ = compared_count(len(book), [len(v) for v in library], 1)
    null = [subsample(library[i], k, rng).mean() for i in compared]
    return conformal_p(subsample(book, k, rng).mean(), null) < alpha


def matched(command, book, library, width, count, seed, alpha) -> bool:
    """The rule docaudit runs, through the command's own ``judge``."""
    if command == "controls":
        config = ControlsConfig(
            passages=count, context_tokens=32, prefix_tokens=32, suffix_tokens=PASSAGE - 64,
            stretch_tokens=width, block=2, alpha=alpha,
        )  # fmt: skip
        texts = [
            BookControls(
                f"t{i}", "", f"{i:064x}", len(v), contrast=block_mean(v, 2), placebo=block_mean(np.zeros(len(v)), 2),
                deltas=list(v),
            )  # a placebo of 0: its gate never fires here
            for i, v in enumerate([book, *library])
        ]  # fmt: skip
        [verdict] = synthetic_controls.judge(texts[:1], texts[1:], config, seed=seed)
    else:
        config = ProbeConfig(
            passages=count, prompt_words=50, continuation_words=PASSAGE - 50, stretch_words=width, min_library=3,
            alpha=alpha,
        )  # fmt: skip
        texts = [
            ProbedText(f"t{i}", "", f"{i:064x}", "", list(v), float(np.mean(v)) if len(v) else None)
            for i, v in enumerate([book, *library])
        ]
        [verdict] = probes.judge(texts[:1], texts[1:], config, seed=seed)
    return verdict.verdict == EVIDENCE


def cell_rates(cell, trials: int, n_library: int, alpha: float, shift: float, seed: int) -> dict:
    """Rates of "evidence" in one cell: at matched geometry and under the former rule, for never-seen books and
    (``shift``) for raised ones; and the share of books left without a p-value at matched geometry."""
    command, process, book_units, library_units, width, count = CELLS[cell]
    rng = np.random.default_rng(seed)
    hits = {"matched": 0, "former": 0, "matched_power": 0, "former_power": 0}
    for trial in range(trials):
        units = [book_units(rng)] + [library_units(rng) for _ in range(n_library)]
        for layout_name in ("matched", "former"):
            layouts = [(width, count) if layout_name == "matched" else _former_layout(n, count) for n in units]
            library = [text_values(process, n, lay, rng) for n, lay in zip(units[1:], layouts[1:])]
            for raised in (0.0, shift) if shift else (0.0,):
                book = text_values(process, units[0], layouts[0], rng, raised)
                if layout_name == "matched":
                    found = matched(command, book, library, width, count, trial, alpha)
                elif command == "controls":
                    found = former_controls(book, units[0], library, units[1:], rng, alpha, 2)
                else:
                    found = former_probe(book, library, rng, alpha)
                hits[layout_name + ("_power" if raised else "")] += found
    return {k: v / trials for k, v in hits.items() if shift or not k.endswith("_power")}


def wilson(rate: float, n: int) -> tuple[float, float]:
    z = 1.959964
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000, help="never-seen books per cell")
    parser.add_argument("--library", type=int, default=20, help="never-seen library texts per book")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--shift", type=float, default=0.0, help="also the rate for books raised by this much")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cells", nargs="*", default=list(CELLS), help="cells by name (default: all)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON lines")
    args = parser.parse_args()
    exact = math.floor(args.alpha * (args.library + 1) + 1e-9) / (args.library + 1)
    print(f"exact rate of a rank among {args.library} texts at alpha {args.alpha:g}: {exact:.4f}")
    for i, cell in enumerate(args.cells):
        began = time.time()
        rates = cell_rates(cell, args.trials, args.library, args.alpha, args.shift, args.seed + i)
        if args.json:
            print(json.dumps({"cell": cell, "trials": args.trials, "exact": exact, **rates}))
            continue
        print(cell)
        for name, rate in rates.items():
            lo, hi = wilson(rate, args.trials)
            print(f"  {name:14s} {rate:.4f}  [{lo:.4f}, {hi:.4f}]")
        print(f"  ({time.time() - began:.0f} s)")


if __name__ == "__main__":
    main()
