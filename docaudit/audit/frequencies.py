"""DC-PDD's reference token frequencies for a command's detector (docs/methods.md, "DC-PDD")."""

from __future__ import annotations

from collections.abc import Sequence

from docaudit.corpus.documents import Document, Skips, load_documents
from docaudit.methods.detectors.detector import Detector


def set_reference_frequencies(
    detector: Detector,
    docs: Sequence[Document],
    freq_corpus=None,
    raw: bool = False,
    normalize_chars: bool = False,
    progress: bool = False,
    skips: Skips | None = None,
) -> str | None:
    """When the detector runs ``dcpdd``, give it the token frequencies of ``freq_corpus`` (paths or datasets, read
    like any documents) or, without one, of ``docs`` themselves (their texts only: no label is used). Returns where
    the frequencies came from, or None when ``dcpdd`` is not selected."""
    if "dcpdd" not in detector.methods:
        return None
    reference = docs if freq_corpus is None else load_documents(freq_corpus, raw, progress, skips, normalize_chars)
    detector.set_frequencies([(d.text, d.sha256) for d in reference])
    return "evaluated texts" if freq_corpus is None else "reference corpus"
