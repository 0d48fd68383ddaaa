"""One statement per book from several tests: Holm–Bonferroni over the tests run, valid whatever the dependence
between their p-values (docs/methods.md, "One statement per book").

Every test planned and run for a book counts in m, whatever it answered; a test that answered "inconclusive"
contributes no evidence (its p-value is taken as 1). The book gets "evidence of membership" when the smallest
Holm-adjusted p-value, ``min(1, m · min p)``, is at most ``alpha`` (Holm's first step is Bonferroni's, so under
"the model never saw this book" the chance of that is at most alpha for any joint law of the p-values);
"inconclusive" when every test run was; else "no evidence of membership"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE, NO_EVIDENCE


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: for the i-th smallest of m,
    ``max over j ≤ i of min(1, (m − j + 1) · p_(j))``."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [1.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p_values[i])))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class Statement:
    """A book's statement: the ``verdict``, the combined p-value (the smallest Holm-adjusted one; None when every
    test was inconclusive), the tests counted ``m`` and each test's adjusted p-value (None: inconclusive)."""

    verdict: str
    p_value: float | None
    m: int
    adjusted: dict[str, float | None]


def statement(p_values: dict[str, float | None], alpha: float) -> Statement:
    """The statement from each test's p-value for one book (``None``: the test answered "inconclusive")."""
    names = list(p_values)
    if not names:
        raise ValueError("a statement needs at least one test")
    used = [1.0 if p_values[n] is None else float(p_values[n]) for n in names]
    adjusted = dict(zip(names, holm(used)))
    if all(p_values[n] is None for n in names):
        return Statement(INCONCLUSIVE, None, len(names), dict.fromkeys(names))
    combined = min(adjusted.values())
    verdict = EVIDENCE if combined <= alpha else NO_EVIDENCE
    shown = {n: None if p_values[n] is None else adjusted[n] for n in names}
    return Statement(verdict, combined, len(names), shown)
