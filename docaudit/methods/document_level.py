"""From sequence scores to document scores (Meeus et al., sec. 6.2; docs/methods.md, "Document-level scaling").

A document's *sequences* are the querier's windows: the window ``tokens[start:end]`` (``end - start`` = the query
context C, 128 by default) is one sequence, and its slice of the document's TokenStats equals a single forward
pass over those tokens, so sequence scores come from the document's cached stats without querying again. From each
document ``n_sequences`` full-length windows are sampled (seeded by the seed and the document's hash; all windows
when it has fewer; a document shorter than C is its one window). Every sequence gets its document's label.

Methods that need the sequence's text (zlib, lowercase, ref, pac, neighbor) get it by decoding the window's token
ids with the target's tokenizer; their extra passes query that text (lowercased, augmented, ...) as a new text.
With a stride below C-1 the window's main-pass values cover only its scored tail, while the text is the whole
window.

Three levels (``LEVELS``), each a function of one fold ``(train, test)`` returning the test labels and scores:

- ``sequence``: the sequences of the test documents, scored directly (label = document label);
- ``doc_avg``: a test document's score is the mean of its sequence scores (no training);
- ``doc_threshold``: ``tau`` maximizes sequence-level accuracy (``score > tau`` = member) over the sequences of
  the **training** documents only; a test document's score is the fraction of its sequences above ``tau``.

The sequences are the windows of computationalprivacy/document-level-membership-inference
``src/compute_baselines.py`` (128 tokens, stride 127; the authors decode each window and query its text again,
docaudit takes the window's slice of the cached statistics). That repository holds no code for the two document
levels, which follow the paper's sec. 6.2. Every score is oriented higher = member, so "above ``tau``"
is right for every method.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from docaudit.config import ScalingConfig
from docaudit.errors import DocauditError
from docaudit.inference.calibration import accuracy_threshold
from docaudit.methods.detectors.detector import Detector
from docaudit.query.stats import TokenStats, scored_spans
from docaudit.seeds import stream


@dataclass
class SequenceScores:
    """Scores of the sampled sequences of several documents: ``doc[i]`` is the document index of sequence ``i``,
    ``window[i]`` its window index in that document, ``scores[method][i]`` its score."""

    doc: np.ndarray
    window: np.ndarray
    scores: dict[str, np.ndarray]


def sample_windows(stats: TokenStats, n: int, seed: int, text_sha256: str) -> np.ndarray:
    """Indices of ``n`` windows of the document, sampled without replacement among its full-length windows (all
    windows when none is full), seeded by ``seed`` and the document's hash; sorted."""
    spans = scored_spans(stats.n_tokens, stats.context, stats.stride)
    full = [i for i, (start, _, end) in enumerate(spans) if end - start == stats.context] or list(range(len(spans)))
    if len(full) <= n:
        return np.array(full)
    rng = stream(seed, "sequences", int(text_sha256[:12], 16))
    return np.sort(rng.choice(full, size=n, replace=False))


def sequence_scores(
    stats: Sequence[TokenStats],
    shas: Sequence[str],
    detector: Detector,
    config: ScalingConfig = ScalingConfig(),
    progress: bool = True,
    seed: int = 0,
) -> SequenceScores:
    """Score the sampled sequences of every document with the detector's methods. ``stats`` must come from the
    detector's target model (its tokenizer decodes the windows); ``seed``: the run's, for the windows sampled."""
    if config.n_sequences < 1:
        raise DocauditError(f"need at least one sequence per document, got {config.n_sequences}")
    tokenizer = detector.target.lm.tokenizer
    plan = [
        (d, w) for d, (s, sha) in enumerate(zip(stats, shas)) for w in sample_windows(s, config.n_sequences, seed, sha)
    ]
    spans = [scored_spans(s.n_tokens, s.context, s.stride) for s in stats]

    def window_text(d: int, w: int) -> str | None:
        start, _, end = spans[d][w]
        ids = stats[d].token_ids[start:end].tolist()
        return tokenizer.decode(ids, clean_up_tokenization_spaces=False) if detector.needs_text else None

    if detector.passes and detector.target.pool is not None:  # every extra pass on the Ray workers at once
        detector.prefetch([window_text(d, w) for d, w in plan], progress)

    def sequence(d: int, w: int) -> tuple:
        s = stats[d]
        _, first, end = spans[d][w]
        part = slice(first - 1, end - 1)
        return s.logp[part], s.mu[part], s.sigma[part], window_text(d, w), s.targets[part]

    rows = detector.score_many((sequence(d, w) for d, w in plan), progress, "scoring sequences")
    return SequenceScores(
        doc=np.array([d for d, _ in plan], dtype=int),
        window=np.array([w for _, w in plan], dtype=int),
        scores={m: np.array([r[m] for r in rows]) for m in detector.methods},
    )


def doc_average(values: np.ndarray, doc: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Mean sequence score of each document in ``docs``."""
    return np.array([values[doc == d].mean() for d in docs])


def fraction_above(values: np.ndarray, doc: np.ndarray, docs: np.ndarray, tau: float) -> np.ndarray:
    """Share of each document's sequences scoring above ``tau``."""
    return np.array([(values[doc == d] > tau).mean() for d in docs])


Level = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def level_sequence(
    values: np.ndarray, doc: np.ndarray, labels: np.ndarray, train: np.ndarray, test: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Level ``sequence``: the test documents' sequences and their documents' labels."""
    mask = np.isin(doc, test)
    return labels[doc[mask]], values[mask]


def level_doc_avg(
    values: np.ndarray, doc: np.ndarray, labels: np.ndarray, train: np.ndarray, test: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Level ``doc_avg``: each test document scored by the mean of its sequence scores."""
    return labels[test], doc_average(values, doc, test)


def level_doc_threshold(
    values: np.ndarray, doc: np.ndarray, labels: np.ndarray, train: np.ndarray, test: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Level ``doc_threshold``: tau fit on the training documents' sequences; each test document scored by the
    share of its sequences above tau."""
    in_train = np.isin(doc, train)
    tau = accuracy_threshold(values[in_train], labels[doc[in_train]])
    return labels[test], fraction_above(values, doc, test, tau)


LEVELS: dict[str, Level] = {"sequence": level_sequence, "doc_avg": level_doc_avg, "doc_threshold": level_doc_threshold}
