"""What ``docaudit audit`` is asked: the books, the target and everything the user has that lets a test run (a
classifier, known non-members, a null library, a trap registry), the level and the time budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from docaudit.api.common import local_inputs
from docaudit.config import AuditConfig, ModelConfig
from docaudit.run import DocumentSpec, RunContext


@dataclass(frozen=True)
class AuditRequest:
    """Audit ``books`` in ``model`` (``chat_only``: a server that only writes text) with what the user has: a
    ``classifier`` for this model, known ``nonmembers``, a null ``library`` of never-seen texts, a trap registry
    ``traps``; ``config``: the level and the time budget. With ``out``, ``audit.json`` and ``audit.html`` (the case
    file) written there (a new or empty folder, or an earlier audit with ``overwrite``)."""

    books: Sequence[object]
    model: ModelConfig = field(default_factory=ModelConfig)
    chat_only: bool = False
    classifier: Path | None = None
    nonmembers: Sequence[object] | None = None
    library: Sequence[object] | None = None
    traps: Path | None = None
    config: AuditConfig = field(default_factory=AuditConfig)
    reading: DocumentSpec = field(default_factory=DocumentSpec)
    run: RunContext = field(default_factory=RunContext)
    out: Path | None = None
    overwrite: bool = False

    def inputs(self) -> list:
        """Every local input: what the output folder must not be or contain."""
        return local_inputs((self.books, self.nonmembers, self.library, self.classifier, self.traps, self.model))
