"""The report's per-book verdicts: the debiased contamination fraction (truth known: a book whose snippets are a
known mix of member-like and non-member-like ones), the full-conformal p-value of a book's rate against a slow
reference, and its validity under the null by simulation."""

import numpy as np
import pandas as pd
import pytest

from docaudit.audit.book_verdicts import (
    book_verdicts,
    conformal_rate_p,
    debiased_bootstrap,
    debiased_fraction,
    threshold,
)
from docaudit.config import ContaminationConfig
from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE


def snippets(books: dict[str, list[np.ndarray]]) -> pd.DataFrame:
    rows = []
    for role, groups in books.items():
        for i, scores in enumerate(groups):
            rows += [{"role": role, "book": f"{role}{i}", "file": f"{role}{i}.txt", "score": s} for s in scores]
    return pd.DataFrame(rows)


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
    table = debiased_bootstrap(snip, None, 200, 0.95, 0)
    row = table.iloc[0]
    pos, neg = np.concatenate(member), np.concatenate(nonmember)
    tau = threshold(pos, neg, None)
    raw = (mixed > tau).mean()
    assert abs(raw - 0.5) > 0.05  # the raw rate is off by the false positives
    assert abs(row.debiased_fraction - 0.5) < 0.06
    assert row.debiased_ci_low <= row.debiased_fraction <= row.debiased_ci_high
    assert row.debiased_ci_low <= 0.5 <= row.debiased_ci_high


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
    rng = np.random.default_rng(3)
    members = [rng.normal(1, 1, 15) for _ in range(5)]
    nonmembers = [rng.normal(0, 1, 15) for _ in range(6)]
    for shift in (0.0, 0.5, 2.0):
        book = rng.normal(shift, 1, 15)
        assert conformal_rate_p(book, members, nonmembers, target_fpr) == pytest.approx(
            slow_rate_p(book, members, nonmembers, target_fpr)
        )


@pytest.mark.parametrize("target_fpr", [None, 0.1])
def test_books_like_the_calibration_nonmembers_get_evidence_at_most_at_the_nominal_rate(target_fpr):
    """The null, where the truth is known: audited books drawn like the calibration non-member books (which vary
    from book to book). Their p-value is below 0.05 at most 5% of the time (+ binomial noise); books drawn like the
    members get "evidence" far more often."""
    rng = np.random.default_rng(5)

    def book(mean):
        return rng.normal(mean + rng.normal(0, 0.3), 1, 20)

    below, total = 0, 0
    for _ in range(40):
        members = [book(0.7) for _ in range(20)]
        nonmembers = [book(0.0) for _ in range(39)]
        p = [conformal_rate_p(book(0.0), members, nonmembers, target_fpr) for _ in range(10)]
        below += sum(v < 0.05 for v in p)
        total += len(p)
    assert below / total <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / total), below / total
    snip = snippets(
        {"member": members, "non-member": nonmembers, "audited": [book(1.5) for _ in range(5)] + [book(0.0)]}
    )
    table, info = book_verdicts(snip, {}, ContaminationConfig(target_fpr=0.1, book_bootstrap=50), 0, None, 2)
    evidence_members = (table.verdict.iloc[:5] == EVIDENCE).sum()
    assert evidence_members >= 3 and info["n_known_nonmembers"] == 39 and info["smallest_p"] == 1 / 40


def test_too_few_calibration_nonmembers_is_inconclusive():
    rng = np.random.default_rng(0)
    snip = snippets(
        {
            "member": [rng.normal(2, 1, 20) for _ in range(5)],
            "non-member": [rng.normal(0, 1, 20) for _ in range(5)],
            "audited": [rng.normal(3, 1, 20)],
        }
    )
    table, _ = book_verdicts(snip, {}, ContaminationConfig(book_bootstrap=20), 0, None, 2)
    assert table.verdict.iloc[0] == INCONCLUSIVE and "too few known non-members" in table.reason.iloc[0]
    assert table.p_value.iloc[0] == pytest.approx(1 / 6)
