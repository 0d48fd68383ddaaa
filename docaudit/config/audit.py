"""The settings of ``docaudit audit``: the level of the one statement per book and the time budget."""

from __future__ import annotations

from dataclasses import dataclass

from docaudit.config.base import check_range, setting
from docaudit.inference.verdicts import DEFAULT_ALPHA


@dataclass(frozen=True)
class AuditConfig:
    """One statement per book at level ``alpha`` (Holm–Bonferroni over the tests run: docs/methods.md, "One
    statement per book"); ``budget`` minutes of estimated time at most (None: no limit), tests planned in the
    order they are registered (``api.audit_tests``) until the budget is spent."""

    alpha: float = setting(
        DEFAULT_ALPHA, "Level of the statement per book, over all the tests run (Holm–Bonferroni).", "method"
    )
    budget: float | None = setting(
        None, "Minutes of estimated time at most; tests that do not fit are skipped (default: no limit).", "method"
    )

    def __post_init__(self):
        check_range("--alpha", self.alpha, 1e-6, 0.5)
        if self.budget is not None:
            check_range("--budget", self.budget, 0.1, 100_000)
