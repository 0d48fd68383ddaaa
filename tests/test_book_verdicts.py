"""The report's per-book verdicts: the debiased contamination fraction (truth known: a book whose snippets are a
known mix of member-like and non-member-like ones), the p-value of a book's rate against a slow reference, and null
simulations where the truth is known: short books, book-to-book spread of the false-positive rate, several methods.

Each null simulation is sized for power >= 0.9 to see a doubled false-positive rate (one-sided binomial check at
2.33 standard errors), simulated at the level of snippet scores."""

import numpy as np
import pandas as pd
import pytest

from docaudit.audit.book_verdicts import book_verdicts, debiased_fraction, matched_interval, matched_sets, rate_p_values
from docaudit.config import ContaminationConfig
from docaudit.inference.calibration import threshold
from docaudit.inference.snippet_rates import debiased_interval
from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE


def snippets(books: dict[str, list[np.ndarray]]) -> pd.DataFrame:
    """The snippet table of a report: one row per snippet score, books named by role and number."""
    keys = [(role, f"{role}{i}", len(scores)) for role, groups in books.items() for i, scores in enumerate(groups)]
    scores = [s for groups in books.values() for s in groups]
    return pd.DataFrame(
        {
            "role": np.repeat([k[0] for k in keys], [k[2] for k in keys]),
            "book": np.repeat([k[1] for k in keys], [k[2] for k in keys]),
            "file": np.repeat([f"{k[1]}.txt" for k in keys], [k[2] for k in keys]),
            "score": np.concatenate(scores) if scores else np.array([]),
        }
    )


def book(rng, mean, spread, n):
    """``n`` snippet scores of a book whose mean score (hence false-positive rate) is drawn with SD ``spread``."""
    return rng.normal(mean + rng.normal(0, spread), 1, n)


def bound(rate: float, n: int) -> float:
    """The largest null rate accepted for a nominal ``rate`` over ``n`` repetitions (2.33 binomial SEs)."""
    return rate + 2.33 * np.sqrt(rate * (1 - rate) / n)


def test_debiased_fraction_formula():
    assert debiased_fraction(0.5, 0.8, 0.2) == pytest.approx(0.5)
    assert debiased_fraction(0.1, 0.8, 0.2) == 0.0 and debiased_fraction(0.95, 0.8, 0.2) == 1.0
    assert debiased_fraction(0.5, 0.2, 0.2) is None


def test_debiased_fraction_recovers_a_known_mix_that_the_raw_rate_misstates():
    rng = np.random.default_rng(0)
    member = [rng.normal(1.0, 1, 200) for _ in range(20)]
    nonmember = [rng.normal(0.0, 1, 200) for _ in range(20)]
    mixed = np.r_[rng.normal(1.0, 1, 300), rng.normal(0.0, 1, 300)]  # half of the snippets trained on
    snip = snippets({"member": member, "non-member": nonmember, "audited": [mixed]})
    table, info = book_verdicts(snip, ContaminationConfig(), 0, None)
    row = table.iloc[0]
    raw = (mixed > threshold(np.concatenate(member), np.concatenate(nonmember), None)).mean()
    assert abs(raw - 0.5) > 0.05  # the raw rate is off by the false positives
    assert abs(row.debiased_fraction - 0.5) < 0.06
    assert row.debiased_ci_low < row.debiased_fraction < row.debiased_ci_high
    assert row.debiased_ci_low <= 0.5 <= row.debiased_ci_high
    assert info["calibration_problems"] == [] and row.n_compared == 200


def slow_rate_p(book, members, nonmembers, target_fpr):
    pos = np.concatenate(members)
    neg = np.concatenate([*nonmembers, book])
    if target_fpr is None:
        scores = np.r_[pos, neg]
        labels = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
        best, tau = -1, None
        for cut in [-np.inf, *sorted(set(scores)), np.inf]:
            acc = ((scores > cut) == labels).mean()
            if acc > best:
                best, tau = acc, cut
    else:
        tau = sorted(neg, reverse=True)[int(np.floor(target_fpr * len(neg)))]
    rate = (book > tau).mean()
    return (1 + sum((s > tau).mean() >= rate for s in nonmembers)) / (len(nonmembers) + 1)


@pytest.mark.parametrize("target_fpr", [None, 0.1])
def test_rate_p_value_matches_a_slow_reference(target_fpr):
    """Books of as many snippets as the calibration books: the matched p-value is the full-conformal one."""
    rng = np.random.default_rng(3)
    members = [rng.normal(1, 1, 15) for _ in range(5)]
    nonmembers = [rng.normal(0, 1, 15) for _ in range(6)]
    books = [rng.normal(shift, 1, 15) for shift in (0.0, 0.5, 2.0)]
    config = ContaminationConfig(target_fpr=target_fpr, min_snippets=10)
    p, ks, why, n = rate_p_values(books, members, nonmembers, config, 0)
    assert ks == [15, 15, 15] and why == [None] * 3 and n == 6
    for value, b in zip(p, books):
        assert value == pytest.approx(slow_rate_p(b, members, nonmembers, target_fpr))


def short_book_null_rate(p_value, reps: int = 100, seed: int = 5) -> float:
    """Share of never-trained books of 8 and 19 snippets (4 per calibration draw, ``reps`` draws: 400 books) with
    p < 0.05 against 20 member and 39 non-member calibration books of 100 snippets. ``p_value(audited, members,
    nonmembers)`` gives the audited books' p-values."""
    rng = np.random.default_rng(seed)
    below = total = 0
    for _ in range(reps):
        members = [book(rng, 0.7, 0.1, 100) for _ in range(20)]
        nonmembers = [book(rng, 0.0, 0.1, 100) for _ in range(39)]
        audited = [book(rng, 0.0, 0.1, n) for n in (8, 19, 8, 19)]
        p = p_value(audited, members, nonmembers)
        below += sum(v < 0.05 for v in p)
        total += len(p)
    return below / total


def matched_p(audited, members, nonmembers, config=ContaminationConfig(min_snippets=5), seed=0):
    return rate_p_values(audited, members, nonmembers, config, seed)[0]


@pytest.mark.slow
def test_short_books_like_the_calibration_nonmembers_get_small_p_values_at_most_at_the_nominal_rate():
    """A book with fewer snippets than the calibration books has a noisier rate: ranked against their 100-snippet
    rates it got p < 0.05 for 14-23% of never-trained books (8-19 snippets). Compared at its own snippet count it
    stays within its exact rate among 39 calibration books, 1/40 (p < 0.05 only above every one of them); books
    drawn like the members still reach p < 0.05."""
    assert short_book_null_rate(matched_p) <= bound(1 / 40, 400)
    rng = np.random.default_rng(6)
    members = [book(rng, 0.7, 0.1, 100) for _ in range(20)]
    nonmembers = [book(rng, 0.0, 0.1, 100) for _ in range(39)]
    p = matched_p([book(rng, 1.2, 0.1, 40) for _ in range(20)], members, nonmembers)
    assert sum(v < 0.05 for v in p) >= 10


def test_too_short_books_and_calibration_books_are_named():
    rng = np.random.default_rng(1)
    members = [rng.normal(1, 1, 30) for _ in range(3)]
    nonmembers = [rng.normal(0, 1, n) for n in (30, 30, 4)]
    p, ks, why, n = rate_p_values(
        [rng.normal(0, 1, 6), rng.normal(0, 1, 40)], members, nonmembers, ContaminationConfig(), 0
    )
    assert p[0] is None and ks[0] is None and "gave 6, fewer than the 10" in why[0]
    assert ks[1] == 30 and why[1] is None and n == 2  # the 4-snippet calibration book is left out


def excludes_zero_rate(
    spread: float, n_members: int = 10, n_books: int = 39, length: int = 100, cal_length: int = 100
) -> tuple[float, float]:
    """Share of 800 never-trained books of ``length`` snippets whose interval (:func:`matched_prediction_interval`)
    excludes 0, and share of intervals that are a point, with the book-to-book SD ``spread`` of the mean snippet
    score (so of the false-positive rate); ``n_members`` member books (mean snippet score 2) and ``n_books``
    non-member books (mean 0) of ``cal_length`` snippets, one calibration draw per 8 books."""
    rng = np.random.default_rng(11)
    excluded = points = 0
    reps = 800
    for i in range(reps):
        if i % 8 == 0:
            members = [book(rng, 2.0, spread, cal_length) for _ in range(n_members)]
            nonmembers = [book(rng, 0.0, spread, cal_length) for _ in range(n_books)]
        lo, hi = matched_prediction_interval(book(rng, 0.0, spread, length), members, nonmembers)
        excluded += lo > 0
        points += hi <= lo
    return excluded / reps, points / reps


def matched_prediction_interval(b, members, nonmembers, seed: int = 0):
    """The report's interval of a book: the calibration books' rates at the book's snippet count."""
    tau = threshold(np.concatenate(members), np.concatenate(nonmembers), None)
    k = min(len(b), min(map(len, nonmembers)))
    sets = matched_sets(k, members, nonmembers, np.arange(len(nonmembers)), seed)
    return matched_interval(b, k, sets, tau, 0.95)


# A doubled rate is seen with power >= 0.9 by each null check below (binomial, one-sided at 2.33 SEs):
# 800 books at a nominal 2.5% reject when more than 30 exclude 0, which Bin(800, 0.05) exceeds with probability
# 0.94; 400 books at a nominal 5% reject when more than 30 are not covered, which Bin(400, 0.10) exceeds with
# probability 0.96 (see test_null_checks_are_sized_to_see_a_doubled_rate).


def test_null_checks_are_sized_to_see_a_doubled_rate():
    from scipy.stats import binom

    for nominal, reps in ((0.025, 800), (0.05, 400)):
        assert binom.sf(np.floor(bound(nominal, reps) * reps), reps, 2 * nominal) >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize(
    "spread, n_members, n_books, length, cal_length",
    [(0.5, 60, 60, 100, 100), (1.0, 60, 60, 100, 100), (1.0, 40, 40, 30, 100)],
)
def test_debiased_interval_of_a_never_trained_book_excludes_zero_at_most_at_its_level(
    spread, n_members, n_books, length, cal_length
):
    """Book-to-book spread of the false-positive rate (SD of a book's mean snippet score 0.5 and 1.0, a per-book
    FPR SD of 0.12 and 0.24): a bootstrap over calibration books and snippets ignores the book's own deviation and
    its 95% interval excluded 0 for 14% and 12.5% of never-trained books (120 each), a point for 22.5% and 38%. The
    prediction interval without its edge book (a mixture over the observed rates only, at the calibration books'
    full snippet counts) excluded 0 for 7.4% of never-trained 30-snippet books against 10 calibration books of
    each kind (100 snippets), and for 7.6% and 5.9% of 400-snippet books against 15 and 20: the book's own rate
    is beyond every observed one with probability 1/(n+1). With the edge book and the calibration rates at the
    book's snippet count, at most 2.5% (+ noise) and never a point. Below 39 books of a kind the interval always
    reaches 0, so a check there cannot fail: every cell here has at least 40."""
    excluded, points = excludes_zero_rate(spread, n_members, n_books, length, cal_length)
    assert excluded <= bound(0.025, 800), excluded
    assert points == 0


@pytest.mark.slow
@pytest.mark.parametrize("n_books", [40, 60])
def test_debiased_interval_covers_a_trained_book_and_is_never_a_point(n_books):
    """Books of 40 snippets, half of them trained on, against ``n_books`` calibration books of each kind (one draw
    per 8 books): the 95% interval misses 0.5 at most at 5% (+ noise) over 400 books, and is narrower than [0, 1]
    for some (below 39 books of a kind it is all of [0, 1] by construction, a check that cannot fail)."""
    rng = np.random.default_rng(2)
    missed = narrower = 0
    for i in range(400):
        if i % 8 == 0:
            members = [book(rng, 1.5, 0.3, 100) for _ in range(n_books)]
            nonmembers = [book(rng, 0.0, 0.3, 100) for _ in range(n_books)]
        half = np.r_[book(rng, 1.5, 0.3, 20), book(rng, 0.0, 0.3, 20)]
        lo, hi = matched_prediction_interval(half, members, nonmembers)
        missed += not lo <= 0.5 <= hi
        narrower += hi - lo < 1
        assert hi > lo
    assert missed / 400 <= bound(0.05, 400), missed
    assert narrower > 0
    tau = threshold(np.concatenate(members), np.concatenate(nonmembers), None)
    t, f = ([(s > tau).mean() for s in books] for books in (members, nonmembers))
    for above in (0, 40):  # at the ends of what a rate can be the interval still has width
        lo, hi = debiased_interval(above, 40, t, f)
        assert hi > lo


def test_an_inconclusive_book_gets_no_debiased_fraction():
    """A book too short to compare (7 snippets, every verdict "inconclusive") has no debiased fraction, whatever
    its rate; a book with a verdict has one."""
    rng = np.random.default_rng(9)
    snip = snippets(
        {
            "member": [rng.normal(2, 1, 60) for _ in range(40)],
            "non-member": [rng.normal(0, 1, 60) for _ in range(60)],
            "audited": [rng.normal(2, 1, 7), rng.normal(2, 1, 60)],
        }
    )
    table, info = book_verdicts(snip, ContaminationConfig(), 0, None)
    assert table.reason_codes.tolist()[0] == ["too_few_snippets"]
    assert table.debiased_fraction.isna().tolist() == [True, False]
    assert table.debiased_ci_low.isna().tolist() == [True, False]
    assert info["debiased_edge_books"] == 39


@pytest.mark.parametrize("case", ["chance", "fpr"])
def test_a_calibration_that_cannot_support_a_verdict_makes_every_book_inconclusive(case):
    rng = np.random.default_rng(4)
    if case == "chance":  # members and non-members alike: AUC near 0.5
        members = [rng.normal(0, 1, 50) for _ in range(20)]
    else:  # nine member snippets to one non-member: the most accurate cut passes most non-members (FPR ~95%)
        members = [rng.normal(1, 1, 50) for _ in range(360)]
    nonmembers = [rng.normal(0, 1, 50) for _ in range(40)]
    snip = snippets({"member": members, "non-member": nonmembers, "audited": [rng.normal(5, 1, 50)]})
    table, info = book_verdicts(snip, ContaminationConfig(), 0, None)
    assert info["calibration_problems"]
    assert (table.verdict == INCONCLUSIVE).all() and table.debiased_fraction.isna().all()
    word = "barely separated" if case == "chance" else "known non-member snippets members"
    assert word in table.reason.iloc[0]
    code = "calibration_at_chance" if case == "chance" else "threshold_false_positives"
    assert code in table.reason_codes.iloc[0]
    assert {r["code"] for r in table.reasons.iloc[0]} == set(table.reason_codes.iloc[0])


def test_report_reasons_have_codes_and_next_steps_printed_once_when_shared():
    """Each reason a report gives has a code and a next step; the terminal prints the reasons every book shares once
    above the books, and under a book only its own; report.csv joins the codes."""
    from docaudit.inference.verdicts import NEXT_STEPS
    from docaudit.report.contamination import flat
    from docaudit.report.verdicts import format_report_verdicts

    rng = np.random.default_rng(0)
    snip = snippets(
        {
            "member": [rng.normal(2, 1, 20) for _ in range(5)],
            "non-member": [rng.normal(0, 1, 20) for _ in range(5)],
            "audited": [rng.normal(3, 1, 20), rng.normal(3, 1, 4)],  # the second too short to compare
        }
    )
    table, info = book_verdicts(snip, ContaminationConfig(min_snippets=10), 0, None)
    assert table.reason_codes.tolist() == [["too_few_nonmembers"], ["too_few_snippets"]]
    assert all(r["next_step"] == NEXT_STEPS[r["code"]] for rs in table.reasons for r in rs)
    assert flat(table).reason_codes.tolist() == ["too_few_nonmembers", "too_few_snippets"]
    assert "reasons" not in flat(table)
    books = table.assign(book=["a", "b"], contamination_rate=0.5)
    text = format_report_verdicts(books, {"verdicts": info | {"n_methods": 1}, "confidence": 0.95})
    assert "every book:" not in text and text.count("next step:") == 2
    same = snippets(
        {
            "member": [rng.normal(2, 1, 20) for _ in range(5)],
            "non-member": [rng.normal(0, 1, 20) for _ in range(5)],
            "audited": [rng.normal(3, 1, 20), rng.normal(0, 1, 20)],
        }
    )
    table, info = book_verdicts(same, ContaminationConfig(), 0, None)
    books = table.assign(book=["a", "b"], contamination_rate=0.5)
    text = format_report_verdicts(books, {"verdicts": info | {"n_methods": 1}, "confidence": 0.95})
    assert text.count("every book: inconclusive: too few known non-members") == 1
    assert text.count("next step:") == 1 and text.count("inconclusive (the reasons above)") == 2


def any_method_evidence_rate(level: float, reps: int = 400, seed: int = 8) -> float:
    """Share of never-trained books (one per draw, ``reps`` draws) whose p-value is below ``level`` under any of 5
    methods (with one book its q-value is its p-value) whose snippet scores share a fifth of their variance; 20
    member and 119 non-member calibration books of 40 snippets (smallest p-value 1/120, below 0.05 / 5)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):

        def five(mean):
            common = rng.normal(0, np.sqrt(0.2), 40)
            return [common + rng.normal(mean, np.sqrt(0.8), 40) for _ in range(5)]

        members, nonmembers, audited = [five(0.8) for _ in range(20)], [five(0.0) for _ in range(119)], five(0.0)
        hits += any(
            matched_p([audited[m]], [b[m] for b in members], [b[m] for b in nonmembers])[0] < level for m in range(5)
        )
    return hits / reps


@pytest.mark.slow
def test_several_methods_keep_evidence_under_any_of_them_at_the_nominal_rate():
    """``report --methods a,b,c,d,e``: five methods, one verdict set each. Each at alpha, a never-trained book got
    "evidence" under one of them far more often than alpha; each at alpha / 5 (``book_verdicts``' ``n_methods``,
    the next test), at most alpha (+ noise)."""
    assert any_method_evidence_rate(0.05 / 5) <= bound(0.05, 400)


def test_several_methods_decide_at_alpha_over_their_number():
    rng = np.random.default_rng(0)
    snip = snippets(
        {
            "member": [rng.normal(2, 1, 20) for _ in range(5)],
            "non-member": [rng.normal(0, 1, 20) for _ in range(79)],
            "audited": [rng.normal(4, 1, 20)],
        }
    )
    one, _ = book_verdicts(snip, ContaminationConfig(book_bootstrap=20), 0, None, 0.05, 1)
    three, info = book_verdicts(snip, ContaminationConfig(book_bootstrap=20), 0, None, 0.05, 3)
    assert one.p_value.iloc[0] == three.p_value.iloc[0] == pytest.approx(1 / 80)
    assert one.verdict.iloc[0] == EVIDENCE and three.verdict.iloc[0] == EVIDENCE
    assert info["alpha_per_method"] == pytest.approx(0.05 / 3) and info["n_methods"] == 3


def test_too_few_calibration_nonmembers_is_inconclusive():
    rng = np.random.default_rng(0)
    snip = snippets(
        {
            "member": [rng.normal(2, 1, 20) for _ in range(5)],
            "non-member": [rng.normal(0, 1, 20) for _ in range(5)],
            "audited": [rng.normal(3, 1, 20)],
        }
    )
    table, _ = book_verdicts(snip, ContaminationConfig(), 0, None)
    assert table.verdict.iloc[0] == INCONCLUSIVE and "too few known non-members" in table.reason.iloc[0]
    assert table.p_value.iloc[0] == pytest.approx(1 / 6)


def test_report_q_values_are_benjamini_yekutieli_and_its_blind_gate_has_a_fixed_level():
    """The books' p-values share their calibration subsets and each book has its own threshold, so no positive
    dependence is known: the q-values are Benjamini-Yekutieli's (written out here), valid under any dependence. The
    blind gate is at its fixed level (0.05), as predict's: a blind p-value of 0.03 gates a book at --alpha 0.02."""
    rng = np.random.default_rng(12)
    snip = snippets(
        {
            "member": [rng.normal(2, 1, 30) for _ in range(20)],
            "non-member": [rng.normal(0, 1, 30) for _ in range(99)],
            "audited": [rng.normal(m, 1, 30) for m in (3.0, 2.5, 1.5, 1.0, 0.5, 0.0)],
        }
    )
    table, info = book_verdicts(snip, ContaminationConfig(), 0, None)
    p = table.p_value.to_numpy()
    m = len(p)
    order = np.argsort(p)
    harmonic = sum(1 / i for i in range(1, m + 1))
    slow = np.empty(m)
    running = 1.0
    for rank in range(m, 0, -1):  # q_(i) = min over j >= i of p_(j) m c(m) / j
        running = min(running, p[order[rank - 1]] * m * harmonic / rank)
        slow[order[rank - 1]] = running
    assert table.q_value.to_numpy() == pytest.approx(slow)
    assert info["adjustment"] == "Benjamini-Yekutieli"
    blind = {(b, f): 0.03 for b, f in zip(table.book, table.file)}
    gated, info = book_verdicts(snip, ContaminationConfig(), 0, blind, alpha=0.02)
    assert all(codes == ["blind_separates"] for codes in gated.reason_codes)
    assert "0.03 < 0.05" in gated.reason.iloc[0] and info["blind_gate_level"] == 0.05


@pytest.mark.slow
def test_short_never_trained_excerpts_get_no_debiased_fraction_end_to_end(tmp_path):
    """Real texts: a tiny target trained on a random half of 60 PG-19 excerpts of 400 words; calibration: 20 trained
    and 20 never-trained excerpts (16 snippets of 25 words each); audited: 8 never-trained excerpts of 100 words (4
    snippets, fewer than --min-snippets 10). The calibration separates (a debiased fraction would be printed), but
    every audited verdict is "inconclusive: too few snippets", so none gets a debiased fraction."""
    import json

    from click.testing import CliRunner
    from labtarget import TINY, excerpts, single_thread

    from docaudit.cli import main
    from docaudit.lab.experiment import split_members
    from docaudit.lab.target import train_target

    texts = excerpts(60, n_words=400)
    split = split_members(list(texts), seed=5)
    trained = [b for b in sorted(texts) if split[b]]
    never = [b for b in sorted(texts) if not split[b]]
    groups = {"cal_mem": trained[:20], "cal_non": never[:20], "audit": never[20:28]}
    for name, books in groups.items():
        (tmp_path / name).mkdir()
        for b in books:
            text = texts[b] if name != "audit" else " ".join(texts[b].split()[:100])
            (tmp_path / name / f"{b}.txt").write_text(text, encoding="utf-8")
    with single_thread():
        model = train_target([texts[b] for b in trained], list(texts.values()), tmp_path / "target", TINY)
        args = ["report", str(tmp_path / "audit"), "--calibrate-members", str(tmp_path / "cal_mem")]
        args += ["--calibrate-nonmembers", str(tmp_path / "cal_non"), "--model", str(model), "--max-context", "63"]
        args += ["--snippets", "16", "--snippet-words", "25", "--out", str(tmp_path / "rep"), "--format", "json"]
        result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    verdicts = out["info"]["verdicts"]
    assert verdicts["calibration_problems"] == [] and verdicts["tpr"] > verdicts["fpr"], verdicts
    books = out["books"]
    assert len(books) == 8 and all(b["reason_codes"] == ["too_few_snippets"] for b in books)
    assert all(b["debiased_fraction"] is None and b["debiased_ci_low"] is None for b in books)
