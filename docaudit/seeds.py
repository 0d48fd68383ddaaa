"""Every random stream docaudit draws, named, from the one run seed.

A command has one seed (``RunContext.seed``, ``--seed``). Each random choice draws from its own named stream,
``stream(seed, name, *keys)``: a NumPy generator seeded by ``[seed, *tag, *keys]`` where ``tag`` is the stream's
fixed spawn key in :data:`STREAMS` and ``keys`` are the per-item values the caller adds (a document's hash, a
copy's index). Streams with different tags never share draws, so adding a random choice to one part of a run does
not move the numbers of another. The tags are the values docaudit has always used, so a seed gives the same outputs
as before the streams were named. Scikit-learn's ``random_state`` (folds, forests) takes the seed itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Stream:
    """A named stream: its spawn key after the seed, the per-item keys callers add, and what it draws."""

    tag: tuple[int, ...]
    keys: str
    purpose: str


STREAMS: dict[str, Stream] = {
    "bootstrap": Stream((), "", "stratified bootstrap resamples of AUC / TPR intervals and paired AUC differences"),
    "calibration_bootstrap": Stream((7,), "", "report's bootstrap over calibration books and their snippets"),
    "snippets": Stream((), "book sha256[:12]", "report's random snippets of a book"),
    "rate_reference": Stream((33,), "snippet count k", "the calibration books' snippet subsets at count k"),
    "rate_subsample": Stream((34,), "count k, book index j", "an audited book's snippets subsampled to count k"),
    "excerpt": Stream((), "document sha256[:12]", "the random excerpt of --max-tokens tokens of a document"),
    "sequences": Stream((), "document sha256[:12]", "the windows sampled as sequences of a document"),
    "pac_swaps": Stream((), "copy c, text hash", "PAC's word swaps of augmented copy c"),
    "neighbour_masks": Stream((), "neighbour j, text hash", "the positions the masked LM replaces in neighbour j"),
    "recall_shots": Stream((), "", "ReCaLL's non-member prefix texts, taken out of the evaluation"),
    "dataset_splits": Stream((), "", "the dataset test's random half splits"),
    "dataset_sizes": Stream((1,), "", "the suspect subsets of the dataset test's p-value by number of documents"),
    "permutation": Stream((), "", "Monte Carlo permutations of the rank test"),
    "traps": Stream((), "", "trap generation, the traps / controls split and the copies' places"),
    "controls_passages": Stream((), "", "the passages of a book (seeded by the run seed and the book's hash)"),
    "continuations": Stream((35,), "prompt i, sample j", "the uniform of each token of continuation j of prompt i"),
    "served_seeds": Stream((61,), "prompt i, sample j", "the seed a server samples continuation j of prompt i with"),
    "probe_passages": Stream((51,), "text sha256[:12]", "the passages probe asks about in a text"),
    "extract_continuation": Stream((62,), "text sha256[:12]", "the passages extract continues in a text"),
    "probe_null": Stream(
        (52,), "book sha256[:12]", "the first passages of the windows a probed book and its library texts are ranked at"
    ),
    "library_rank": Stream((36,), "", "the first passages of the windows a book and its library texts are ranked at"),
    "lab_subset": Stream((), "", "the lab's --docs subset of the pool"),
    "lab_split": Stream((), "", "the lab's random member / non-member halves"),
}


def stream(seed: int, name: str, *keys: int) -> np.random.Generator:
    """The generator of stream ``name`` for ``seed`` and the caller's per-item ``keys``."""
    return np.random.default_rng([seed, *STREAMS[name].tag, *keys])
