"""``predict`` ranks a document among the known non-members of its length class: a null where features drift with
the tokens queried (scripts/nulls/null_predict_length.py, small) that the former rule, every known non-member, fails
and the length classes pass; and the classes themselves."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from nulls.null_predict_length import trial  # noqa: E402

from docaudit.inference.conformal import length_class  # noqa: E402
from docaudit.inference.verdicts import too_few_of_its_length  # noqa: E402

TRIALS = 400
SETTINGS = argparse.Namespace(members=30, at_cap=25, below=35, cap=1024, slope=3.0, shift=1.0, trees=50)


def bound(rate: float) -> int:
    """The most trials with p <= alpha the check accepts at an exact rate ``rate`` (+ 2.33 binomial SEs)."""
    return int(np.floor(TRIALS * rate + 2.33 * np.sqrt(TRIALS * rate * (1 - rate))))


def test_the_check_is_sized_to_see_a_doubled_rate():
    from scipy.stats import binom

    for n in (25, 60):
        exact = np.floor(0.05 * (n + 1)) / (n + 1)
        assert binom.sf(bound(exact), TRIALS, 2 * exact) >= 0.85


@pytest.mark.slow
def test_a_document_read_to_the_budget_holds_the_level_among_its_length_class():
    got = np.array([trial(t, SETTINGS) for t in range(TRIALS)])
    every, by_class, size = got[:, 0], got[:, 1], int(got[0, 2])
    assert size == SETTINGS.at_cap
    exact_all = np.floor(0.05 * 61) / 61
    exact_class = np.floor(0.05 * (size + 1)) / (size + 1)
    assert (every <= 0.05).sum() > bound(exact_all)  # the former rule: the null sees its excess
    assert (by_class <= 0.05).sum() <= bound(exact_class)


def test_length_classes_and_the_reason_for_a_small_class():
    assert length_class(512, 512) == length_class(900, 512) == -1
    assert length_class(300, 512) == length_class(256, 512) == 8 != length_class(255, 512)
    assert length_class(5000, None) == 12
    assert too_few_of_its_length(20, 512) == [] and too_few_of_its_length(19, 512) != []
    [reason] = too_few_of_its_length(10, 512)
    assert reason.code == "too_few_of_its_length" and "1/11" in reason.text and "20 of its length" in reason.text
