"""The probe's gates: DE-COP's library at the position-bias floor and unreadable answers make every book
inconclusive; no library, or too small a one, too. (Its p-value under nulls whose passages correlate along the
text, at matched geometry: tests/test_geometry.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from docaudit.audit.probes import ProbedText, judge
from docaudit.config import ProbeConfig
from docaudit.errors import DocauditError
from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE, Reason

LIBRARY = 20


def _text(name: str, values) -> ProbedText:
    values = [float(v) for v in values]
    return ProbedText(name, name, f"{abs(hash(name)):064x}"[:64], name, values, float(np.mean(values)))


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
