"""The probe's p-value under its null, simulated: books and library texts whose per-passage values come from one
law (texts differing in level, as real texts do), the books shorter than the library texts. Compared at the book's
own passage count the rate of "evidence" stays at alpha (sized to see a doubled rate: 10% against 5% with power
above 0.9); compared with the library texts' means over all their passages it does not (the test can fail). DE-COP's
gates: a library at the position-bias floor, and unreadable answers, make every book inconclusive."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from docaudit.audit.probes import ProbedText, judge
from docaudit.config import ProbeConfig
from docaudit.errors import DocauditError
from docaudit.inference.conformal import conformal_p
from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE, Reason

TRIALS = 600  # under a true rate of 0.10, P(alarm) > 0.95 for the alarm below; under 0.05, P(alarm) = 0.001
LIBRARY = 20
ALPHA = 0.05


def _text(name: str, values) -> ProbedText:
    values = [float(v) for v in values]
    return ProbedText(name, name, f"{abs(hash(name)):064x}"[:64], name, values, float(np.mean(values)))


def _values(rng, n: int) -> np.ndarray:
    """A text's per-passage values: a text-level level (texts differ a little), then skewed passage noise with many
    zeros (as n-gram coverage of a model that rarely copies)."""
    level = rng.gamma(50.0, 0.02)
    return np.where(rng.random(n) < 0.4, 0.0, rng.gamma(1.0, level, n))


def _alarm(rejections: int) -> bool:
    """Whether ``rejections`` of ``TRIALS`` exceed alpha at level 0.001 (one-sided binomial)."""
    return binom.sf(rejections - 1, TRIALS, ALPHA) < 0.001


def test_the_rank_p_value_at_the_books_passage_count_holds_its_level():
    rng = np.random.default_rng(11)
    config = ProbeConfig(min_library=10, alpha=ALPHA)
    matched = unmatched = 0
    for trial in range(TRIALS):
        library = [_text(f"lib{trial}-{j}", _values(rng, 16)) for j in range(LIBRARY)]
        book = _text(f"book{trial}", _values(rng, 4))
        [verdict] = judge([book], library, config, seed=trial)
        assert book.compared_at == 4
        matched += verdict.verdict == EVIDENCE
        unmatched += conformal_p(book.statistic, [t.statistic for t in library]) < ALPHA
    assert not _alarm(matched), matched / TRIALS
    assert _alarm(unmatched), unmatched / TRIALS  # a 4-passage mean against 16-passage means: too many alarms
    assert binom.sf(2 * TRIALS * ALPHA, TRIALS, 2 * ALPHA) < 0.6  # the alarm's power at a doubled rate


def test_the_power_sizing_of_the_alarm():
    """Under a doubled rate (0.10) the alarm fires with probability above 0.9; under alpha, 0.001 at most."""
    threshold = next(k for k in range(TRIALS) if _alarm(k))
    assert binom.sf(threshold - 1, TRIALS, 2 * ALPHA) > 0.9
    assert binom.sf(threshold - 1, TRIALS, ALPHA) < 0.001


def _decop(name, accuracy, unreadable=0.0, passages=3):
    text = _text(name, [accuracy] * passages)
    text.unreadable = unreadable
    return text


@pytest.mark.parametrize("library_accuracy, gated", [(0.25, True), (0.26, True), (0.30, False), (0.45, False)])
def test_decop_is_inconclusive_when_the_library_sits_at_the_position_bias_floor(library_accuracy, gated):
    config = ProbeConfig(probe="decop", min_library=10)
    library = [_decop(f"l{j}", library_accuracy + 0.001 * j) for j in range(LIBRARY)]
    [verdict] = judge([_decop("book", 0.9)], library, config, seed=0)
    assert (verdict.verdict == INCONCLUSIVE) == gated
    assert ("model_cannot_answer" in verdict.reason_codes) == gated
    if not gated:
        assert verdict.verdict == EVIDENCE and verdict.p_value == pytest.approx(1 / (LIBRARY + 1))


def test_a_book_with_unreadable_answers_stays_inconclusive_and_such_library_texts_leave_the_null():
    config = ProbeConfig(probe="decop", min_library=10)
    book = _decop("book", 0.9)
    book.reasons.append(Reason("unreadable_answers", "half of the answers name no option"))
    library = [_decop(f"l{j}", 0.4) for j in range(LIBRARY + 1)]
    library[0].reasons.append(Reason("unreadable_answers", "unreadable"))
    [verdict] = judge([book], library, config, seed=0)
    assert verdict.verdict == INCONCLUSIVE and verdict.reason_codes == ("unreadable_answers",)
    assert book.p_value == pytest.approx(1 / (LIBRARY + 1))  # the 20 usable library texts


def test_without_a_library_the_statistic_alone_is_inconclusive_and_a_small_library_cannot_give_evidence():
    [verdict] = judge([_text("book", [0.5, 0.7])], None, ProbeConfig(), seed=0)
    with pytest.raises(DocauditError, match="fewer than --min-library 20"):
        judge([_text("book", [0.5])], [_text(f"l{j}", [0.1]) for j in range(19)], ProbeConfig(), seed=0)
    assert verdict.verdict == INCONCLUSIVE and verdict.reason_codes == ("no_library",) and verdict.p_value is None
    library = [_text(f"l{j}", [0.0, 0.1]) for j in range(12)]
    [verdict] = judge([_text("book", [0.5, 0.7])], library, ProbeConfig(min_library=10), seed=0)
    assert verdict.verdict == INCONCLUSIVE and verdict.reason_codes == ("too_small_library",)
    assert verdict.p_value == pytest.approx(1 / 13) and "20 would be needed" in verdict.reason


def test_without_the_authors_word_splitting_the_ngram_probe_names_the_extra(monkeypatch):
    import sys

    from docaudit.methods.probes import ngram

    ngram._text_tools.cache_clear()
    monkeypatch.setitem(sys.modules, "sacremoses", None)
    try:
        with pytest.raises(DocauditError, match=r"pip install 'docaudit\[probes\]'"):
            ngram.words("any text")
    finally:
        ngram._text_tools.cache_clear()
