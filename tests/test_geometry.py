"""Matched geometry: the layout every text's passages follow, the rank at matched geometry against a slow
reference, and null simulations of ``controls`` and ``probe`` whose passages correlate along the text (a slow
drift, chapters, neighbours pulling apart, raised chapter openings), short tiled books against long library texts
and mixed lengths, with no model (``lab.passage_nulls``). Each null check is sized to see a doubled rate and is
shown to fire on the former geometry (passages spread over each text's whole length)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from docaudit.audit import probes, synthetic_controls
from docaudit.audit.probes import ProbedText
from docaudit.audit.synthetic_controls import BookControls
from docaudit.config import ControlsConfig, ProbeConfig
from docaudit.corpus.segments import stretch_starts
from docaudit.inference.controls import block_mean
from docaudit.inference.matched import matched_rank
from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE
from docaudit.lab.passage_nulls import TextProcess, text_values

ALPHA = 0.05
LIBRARY = 20  # the smallest library whose smallest p-value, 1/21, is below 0.05
TRIALS = 600  # null books per cell
EXACT = 1 / (LIBRARY + 1)  # P(p <= 0.05) for a continuous statistic ranked among 20
WIDTH, COUNT, PASSAGE = 100, 16, 100  # stretches of 100 units holding passages of 100: a short book is tiled
CONTROLS = ControlsConfig(
    passages=COUNT, context_tokens=32, prefix_tokens=32, suffix_tokens=36, stretch_tokens=WIDTH, block=2
)
PROBE = ProbeConfig(passages=COUNT, prompt_words=50, continuation_words=50, stretch_words=WIDTH, min_library=10)


def _alarm(rejections: int) -> bool:
    """Whether ``rejections`` of ``TRIALS`` exceed the exact rate at level 0.001 (one-sided binomial)."""
    return binom.sf(rejections - 1, TRIALS, EXACT) < 0.001


def test_the_alarm_sees_a_doubled_rate():
    threshold = next(k for k in range(TRIALS) if _alarm(k))
    assert binom.sf(threshold - 1, TRIALS, 2 * EXACT) > 0.9 and binom.sf(threshold - 1, TRIALS, EXACT) < 0.001


def slow_starts(n_units, length, width, count, rng):
    """The layout written out: the text's first ``length`` units left out, whole stretches of the rest counted one
    by one, the offset after the left-out units, then one start per stretch."""
    n = 0
    while n < count and length + (n + 1) * width <= n_units:
        n += 1
    if n == 0:
        return []
    offset = length + int(rng.integers(0, n_units - length - n * width + 1))
    return [offset + k * width + int(rng.integers(0, width - length + 1)) for k in range(n)]


def test_every_text_gets_the_same_layout_whatever_its_length():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n, length = int(rng.integers(0, 5000)), int(rng.integers(1, 60))
        width, count = int(rng.integers(length, 200)), int(rng.integers(1, 40))
        seed = int(rng.integers(1 << 30))
        got = stretch_starts(n, length, width, count, np.random.default_rng(seed))
        assert got == slow_starts(n, length, width, count, np.random.default_rng(seed))
        assert all(a + length <= b for a, b in zip(got, got[1:])) and (not got or got[-1] + length <= n)
        assert len(got) == min(count, max(0, n - length) // width) and all(a >= length for a in got)
        assert all(length <= b - a <= 2 * width - length for a, b in zip(got, got[1:]))
    with pytest.raises(ValueError):
        stretch_starts(100, 20, 10, 4, rng)


def slow_rank(book, library, rng, needed, least):
    """The matched rank written out: the count from the ``needed``-th longest library text, then one window of
    that many passages of the book and of each library text long enough, one at a time."""
    n = len(book)
    longest = sorted((len(x) for x in library), reverse=True)
    nth = longest[needed - 1] if 0 < needed <= len(longest) else (n if needed <= 0 else -1)
    k = n if nth >= n else (nth if nth >= min(least, n) else n)
    first = int(rng.integers(0, n - k + 1))
    mine = sum(book[first : first + k]) / k
    above = compared = 0
    for values in library:
        if len(values) < k:
            continue
        first = int(rng.integers(0, len(values) - k + 1))
        compared += 1
        above += sum(values[first : first + k]) / k >= mine
    return (None if compared == 0 else (1 + above) / (compared + 1)), compared, k


def test_matched_rank_matches_a_slow_reference():
    rng = np.random.default_rng(3)
    for _ in range(400):
        library = [list(rng.normal(size=int(rng.integers(1, 20)))) for _ in range(int(rng.integers(1, 15)))]
        book = list(rng.normal(0.3, 1, size=int(rng.integers(1, 20))))
        needed, least = int(rng.integers(0, 16)), int(rng.integers(1, 6))
        got = matched_rank(book, library, np.random.default_rng(9), needed, least)
        p, compared, k = slow_rank(book, library, np.random.default_rng(9), needed, least)
        assert got.texts == compared and got.passages == k and got.smallest_p == 1 / (compared + 1)
        assert (got.p_value is None and p is None) or got.p_value == pytest.approx(p)
    tie = matched_rank([1.0, 1.0], [[1.0, 1.0, 1.0]] * 3, rng)
    assert tie.p_value == 1.0  # ties count against the book


def _controls_text(i: int, values, rng) -> BookControls:
    values = np.asarray(values, dtype=float)
    return BookControls(
        f"t{i}",
        f"t{i}.txt",
        f"{i:064x}",
        len(values),
        contrast=block_mean(values, 2),
        placebo=block_mean(rng.standard_normal(len(values)), 2),
        deltas=values.tolist(),
    )


def _probe_text(i: int, values) -> ProbedText:
    values = [float(v) for v in values]
    return ProbedText(f"t{i}", f"t{i}.txt", f"{i:064x}", f"t{i}", values, float(np.mean(values)))


def _former(n_units: int) -> tuple[int, int]:
    """The former layout: the passages spread over the whole text, one per equal stretch of it."""
    count = min(COUNT, n_units // PASSAGE)
    return max(PASSAGE, n_units // max(count, 1)), count


def evidence_rate(process, book_units, library_units, command: str, former=False, shift=0.0, trials=TRIALS) -> float:
    """The share of ``trials`` books (raised by ``shift``; 0: never seen) judged "evidence of membership" by
    ``command``'s own rule against ``LIBRARY`` never-seen texts, lengths drawn by ``book_units`` and
    ``library_units`` (functions of the generator), each text laid out at matched geometry or (``former``) as
    before."""
    rng = np.random.default_rng(0)
    hits = 0
    for trial in range(trials):
        units = [book_units(rng)] + [library_units(rng) for _ in range(LIBRARY)]
        layouts = [_former(n) if former else (WIDTH, COUNT) for n in units]
        values = [text_values(process, n, lay, rng, shift * (j == 0)) for j, (n, lay) in enumerate(zip(units, layouts))]
        if command == "controls":
            texts = [_controls_text(j, v, rng) for j, v in enumerate(values)]
            [verdict] = synthetic_controls.judge(texts[:1], texts[1:], CONTROLS, seed=trial)
        else:
            texts = [_probe_text(j, v) for j, v in enumerate(values)]
            [verdict] = probes.judge(texts[:1], texts[1:], PROBE, seed=trial)
        hits += verdict.verdict == EVIDENCE
    return hits / trials


def _fixed(n):
    return lambda rng: n


def _between(lo, hi):
    return lambda rng: int(rng.integers(lo, hi))


CELLS = {  # the process, the book's length, the library texts' lengths (in units)
    "drift, a tiled 400-unit book, 20,000-unit library": (
        TextProcess("monotone", 400.0, latent_sd=1.5),
        _fixed(400),
        _fixed(20000),
    ),
    "chapters, mixed lengths": (TextProcess("periodic", 700.0), _between(800, 20000), _between(400, 40000)),
    "neighbours pulling apart, tiled library texts": (
        TextProcess("negative", 100.0, level_sd=0.25, latent_sd=2.0),
        _between(8000, 40000),
        _between(1600, 1700),
    ),
}


@pytest.mark.parametrize("cell", list(CELLS))
def test_controls_holds_its_level_at_matched_geometry_and_the_former_layout_does_not(cell):
    process, book, library = CELLS[cell]
    rate = evidence_rate(process, book, library, "controls")
    assert not _alarm(round(rate * TRIALS)), rate
    if cell != "chapters, mixed lengths":  # the former layout over-fires here (a doubled rate, or nearly)
        former = evidence_rate(process, book, library, "controls", former=True)
        assert _alarm(round(former * TRIALS)), former


def test_probe_holds_its_level_at_matched_geometry_and_the_former_layout_does_not():
    process, book, library = CELLS["drift, a tiled 400-unit book, 20,000-unit library"]
    rate = evidence_rate(process, book, library, "probe")
    assert not _alarm(round(rate * TRIALS)), rate
    former = evidence_rate(process, book, library, "probe", former=True)
    assert _alarm(round(former * TRIALS)), former


def test_a_raised_book_gets_evidence_in_the_right_direction():
    """A book whose every passage is raised by 3 (a text's mean varies by about 1 here): "evidence" for most of
    200 (the orientation: a statistic ranked the wrong way round would almost never fire)."""
    process, book, library = CELLS["chapters, mixed lengths"]
    assert evidence_rate(process, book, library, "controls", shift=3.0, trials=200) > 0.5


def test_library_texts_too_short_for_the_books_layout_are_not_compared():
    """Sixteen passages in the book: ranked among the 25 library texts that hold them (texts of 8 cannot); where
    only 10 do, at 8 consecutive passages of its own among all 40; where the others hold 3 (fewer than two blocks),
    "inconclusive" (``library_too_short``) with the count."""
    rng = np.random.default_rng(6)
    book = _controls_text(98, np.full(16, 5.0), rng)
    library = [_controls_text(i, rng.normal(size=8 if i < 15 else 16), rng) for i in range(40)]
    [verdict] = synthetic_controls.judge([book], library, CONTROLS)
    assert verdict.verdict == EVIDENCE and book.library_texts == 25 and book.library_eligible == 40
    assert book.p_value == pytest.approx(1 / 26) and book.compared_passages == 16
    few = [_controls_text(i, rng.normal(size=8 if i < 30 else 16), rng) for i in range(40)]
    [verdict] = synthetic_controls.judge([book], few, CONTROLS)
    assert verdict.verdict == EVIDENCE and book.library_texts == 40 and book.compared_passages == 8
    shortest = [_controls_text(i, rng.normal(size=3 if i < 30 else 16), rng) for i in range(40)]
    [verdict] = synthetic_controls.judge([book], shortest, CONTROLS)
    assert verdict.verdict == INCONCLUSIVE and verdict.reason_codes == ("library_too_short",)
    assert book.p_value == pytest.approx(1 / 11) and "only 10 of the library's 40 texts" in verdict.reason
    probed = [_probe_text(i, [0.0] * (3 if i < 30 else 16)) for i in range(40)]
    [verdict] = probes.judge([_probe_text(96, np.full(16, 5.0))], probed, PROBE, 0)
    assert verdict.verdict == EVIDENCE and verdict.p_value == pytest.approx(1 / 41)  # at 3 passages: no block here
    [verdict] = probes.judge([_probe_text(96, np.full(16, 5.0))], probed[25:], PROBE, 0)  # 15: none reach 20
    assert verdict.reason_codes == ("library_too_short",) and verdict.p_value == pytest.approx(1 / 11)
