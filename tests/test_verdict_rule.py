"""The verdict rule and Benjamini–Hochberg q-values, against a slow reference."""

import numpy as np
import pytest

from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE, NO_EVIDENCE, bh_adjust, decide


def reference_bh(p):
    """q_i = min over j with p_j >= p_i of p_j * m / rank_j, capped at 1 (the definition, one p at a time)."""
    m = len(p)
    ranks = {i: 1 + sum(pj < p[i] or (pj == p[i] and j < i) for j, pj in enumerate(p)) for i in range(m)}
    return [min(1.0, min(p[j] * m / ranks[j] for j in range(m) if p[j] >= p[i])) for i in range(m)]


def test_bh_matches_reference_and_skips_missing():
    rng = np.random.default_rng(3)
    p = list(rng.uniform(0, 0.2, 9)) + [0.5, 0.01]
    assert bh_adjust(p) == pytest.approx(reference_bh(p))
    with_missing = bh_adjust([p[0], None, p[1]])
    assert with_missing[1] is None
    assert with_missing[0] == pytest.approx(reference_bh([p[0], p[1]])[0])


def test_decide_uses_the_adjusted_p_value():
    assert decide(0.01, 0.04).verdict == EVIDENCE
    assert decide(0.01, 0.06).verdict == NO_EVIDENCE
    assert decide(0.01, None).verdict == EVIDENCE
    assert decide(0.2, None, alpha=0.1).verdict == NO_EVIDENCE


def test_inconclusive_always_carries_a_reason():
    v = decide(0.001, 0.001, inconclusive_reason="the blind baseline already separates this book")
    assert v.verdict == INCONCLUSIVE and "blind" in v.reason and v.p_value == 0.001
    assert decide(None, None).reason
