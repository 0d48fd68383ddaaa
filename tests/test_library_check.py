"""The blind check of a null library against a book: its p-value against a slow count, its level under
exchangeable profiles (sized to see a doubled rate; it fails with the +1 removed or the orientation reversed), the
gate in ``controls``' verdicts, the profiles of the shipped library and a damaged one refused in one line."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from test_controls import SMALL, _tested

from docaudit.audit.library_check import library_check, profile_of
from docaudit.audit.synthetic_controls import judge
from docaudit.errors import DocauditError
from docaudit.inference.outlier import NEIGHBOURS, outlier_p
from docaudit.methods.text_profile import FEATURES, middle_words

TRIALS, N = 3000, 19  # 1/(N+1) = 5%: the rate at 0.05 is exactly 5% under exchangeability


def slow_outlier_p(book, library, k: int = NEIGHBOURS) -> float:
    """Every text's mean distance to its k nearest others, by loops, the columns standardized over all texts."""
    rows = [list(book)] + [list(x) for x in library]
    cols = list(zip(*rows))
    means = [sum(c) / len(c) for c in cols]
    sds = [math.sqrt(sum((v - m) ** 2 for v in c) / len(c)) or 1.0 for c, m in zip(cols, means)]
    z = [[(v - m) / s for v, m, s in zip(r, means, sds)] for r in rows]
    score = []
    for i, a in enumerate(z):
        d = sorted(math.dist(a, b) for j, b in enumerate(z) if j != i)
        score.append(sum(d[:k]) / k)
    return (1 + sum(s >= score[0] for s in score[1:])) / len(score)


def test_the_p_value_is_the_slow_count():
    rng = np.random.default_rng(1)
    for n in (3, 8, 25):
        library = rng.normal(size=(n, 6))
        book = rng.normal(size=6) * (1 + n % 3)
        assert outlier_p(book, list(library)) == pytest.approx(slow_outlier_p(book, library))


def test_its_level_holds_under_exchangeable_profiles():
    rng = np.random.default_rng(2)
    hits = sum(outlier_p(x[0], list(x[1:])) <= 0.05 for x in rng.standard_t(3, size=(TRIALS, N + 1, 8)))
    bound = TRIALS * 0.05 + 2.33 * math.sqrt(TRIALS * 0.05 * 0.95)
    assert hits <= bound, hits / TRIALS
    from scipy.stats import binom

    assert binom.sf(bound, TRIALS, 0.10) >= 0.99  # a doubled rate (the +1 removed gives 10%) cannot pass


def test_a_book_far_from_the_library_is_caught_and_the_verdict_is_inconclusive():
    rng = np.random.default_rng(3)
    library = [_tested(i, rng.normal(size=16), rng) for i in range(39)]
    for t in library:
        t.profile = rng.normal(size=len(FEATURES)).tolist()
    near, far = _tested(100, rng.normal(size=16) + 3, rng), _tested(101, rng.normal(size=16) + 3, rng)
    near.profile = rng.normal(size=len(FEATURES)).tolist()
    far.profile = (rng.normal(size=len(FEATURES)) + 4).tolist()
    verdicts = judge([near, far], library, replace(SMALL, min_library=10))
    assert far.p_value_blind == pytest.approx(1 / 40) and verdicts[1].verdict == "inconclusive"
    assert "library_differs" in verdicts[1].reason_codes and "by their text alone" in verdicts[1].reason
    assert near.p_value_blind > 0.05 and "library_differs" not in verdicts[0].reason_codes
    assert library_check(None, [t.profile for t in library]) == (None, None)


def test_a_profile_reads_the_middle_of_a_text():
    text = " ".join(f"w{i}" for i in range(20_000))
    assert middle_words(text).split()[0] == "w6000" and len(middle_words(text).split()) == 8000
    assert len(profile_of("The cat sat. It was, of course, a cat!")) == len(FEATURES)


def test_the_shipped_library_has_profiles_and_a_damaged_one_is_refused(tmp_path):
    from docaudit.audit.controls_library import read_library
    from docaudit.config import CONTROLS_NULL

    data = json.loads(CONTROLS_NULL.read_text())
    books = read_library(CONTROLS_NULL, data["key"], 2)
    assert all(b.profile is not None and len(b.profile) == len(FEATURES) for b in books)
    for bad in (["x"] * len(FEATURES), [1.0] * 3, [float("nan")] * len(FEATURES)):
        data["texts"][0]["profile"] = bad
        path = tmp_path / "library.json"
        path.write_text(json.dumps(data))
        with pytest.raises(DocauditError, match="text 0: a profile") as refused:
            read_library(path, data["key"], 2)
        assert "\n" not in str(refused.value)
