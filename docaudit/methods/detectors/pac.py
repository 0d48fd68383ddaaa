"""PAC (Ye et al. 2024): the polarized distance of a text against that of copies with swapped words."""

from __future__ import annotations

import re

import numpy as np

from docaudit.config import DetectorConfig
from docaudit.methods.detectors.registry import PassInput, View, register, register_pass
from docaudit.methods.detectors.tokens import n_of, polarized_distance, text_seed
from docaudit.seeds import stream

_SPACE = re.compile(r"(\s+)")


def swap_words(text: str, n_swaps: int, rng: np.random.Generator) -> str:
    """``n_swaps`` random swaps of two words (whitespace-separated; whitespace is kept in place). Swap ``s``
    exchanges the words at positions ``a[s]`` and ``(a[s] + b[s]) % n`` with ``a = rng.integers(0, n, n_swaps)``
    and then ``b = rng.integers(1, n, n_swaps)``: two distinct positions, uniform over ordered pairs. A text of
    fewer than two words is returned unchanged."""
    parts = _SPACE.split(text)
    words = [i for i, p in enumerate(parts) if p and not p.isspace()]
    n = len(words)
    if n < 2 or n_swaps < 1:
        return text
    first = rng.integers(0, n, n_swaps)
    second = (first + rng.integers(1, n, n_swaps)) % n
    for a, b in zip(first, second):
        i, j = words[a], words[b]
        parts[i], parts[j] = parts[j], parts[i]
    return "".join(parts)


def pac_copies(text: str, config: DetectorConfig, seed: int) -> list[str]:
    """PAC's augmented copies: copy ``c`` (0-based) makes ``max(1, int(pac_swap_ratio * n_words))`` swaps drawn
    from the stream ``pac_swaps`` of the run's ``seed``, ``c`` and ``text_seed(text)``. As yyy01/PAC
    ``src/eda.py`` (``eda``, ``random_swap``: ``max(1, int(alpha * n_words))`` swaps of two random words per
    copy), except that words are whitespace runs kept in place (the authors split on single spaces) and that the
    two positions always differ and are seeded per text (the authors retry three times, then skip the swap, with
    a global seed)."""
    n_words = sum(1 for p in _SPACE.split(text) if p and not p.isspace())
    n_swaps = n_of(config.pac_swap_ratio, n_words)
    own = text_seed(text)
    return [swap_words(text, n_swaps, stream(seed, "pac_swaps", c, own)) for c in range(config.pac_copies)]


@register_pass("pac")
def augmented(detector: PassInput, text: str) -> list[str]:
    """PAC's augmented copies of the text (:func:`pac_copies`), seeded by the run's seed its target querier holds."""
    return pac_copies(text, detector.config, detector.target.seed)


@register("pac", "PAC", "polarized distance of swapped-word copies minus the text's", passes=("pac",))
def score_pac(v: View, c: DetectorConfig) -> float:
    """PAC (Ye et al. 2024), member-oriented: ``mean_i PD(aug_i(x)) - PD(x)``, the negation of the authors'
    ``PAC(x) = PD(x) - mean_i PD(aug_i(x))``. ``PD = mean(top max(1, int(k1 n)) logp) - mean(bottom max(1,
    int(k2 n)) logp)`` is the polarized distance and ``aug_i`` the ``N`` word-swapped copies (extra passes, see
    :func:`pac_copies`). Checked against yyy01/PAC ``attack.py``: ``calculate_Polarized_Distance`` (far region =
    top 5%, local region = bottom 30%), ``calculate_PAC`` (``pds - calibrated_pds``) and ``calculate_auc``, which
    scores ``roc_auc_score(labels, [-x for x in PAC_list])``: **a lower PAC means member**, and the published AUCs
    come from that orientation. A memorized text has a flat, high log-p profile (small PD) while its swapped copies
    lose probability at the swaps (larger PD)."""
    return float(np.mean([polarized_distance(a, c.pac_k1, c.pac_k2) for a in v.extra["pac"]])) - polarized_distance(
        v.logp, c.pac_k1, c.pac_k2
    )
