"""The settings of ``docaudit audit``: the level of the one statement per book and the time budget."""

from __future__ import annotations

from dataclasses import dataclass

from docaudit.config.base import check_count, check_range, setting
from docaudit.inference.verdicts import DEFAULT_ALPHA


@dataclass(frozen=True)
class AuditConfig:
    """One statement per book at level ``alpha`` (Holm–Bonferroni over the tests run: docs/methods.md, "One
    statement per book"); ``budget`` minutes of estimated time at most (None: no limit), tests planned in the
    order they are registered (``api.audit_tests``) until the budget is spent; ``extract_tokens``: the tokens from the
    start of each book the extraction figures read (shown beside the statement, not counted in it)."""

    alpha: float = setting(
        DEFAULT_ALPHA, "Level of the statement per book, over all the tests run (Holm–Bonferroni).", "method"
    )
    budget: float | None = setting(
        None, "Minutes of estimated time at most; tests that do not fit are skipped (default: no limit).", "method"
    )

    extract_tokens: int = setting(
        1000, "Tokens from the start of each book that the extraction figures read (bounding their time).", "method"
    )

    def __post_init__(self):
        check_range("--alpha", self.alpha, 1e-6, 0.5)
        if self.budget is not None:
            check_range("--budget", self.budget, 0.1, 100_000)
        check_count("--extract-tokens", self.extract_tokens, 100, 1_000_000)
