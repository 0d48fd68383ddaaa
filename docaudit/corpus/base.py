"""What a document is (:class:`Document`), and what a run does with one it cannot use (:class:`Skips`).

Both the file reader (:mod:`docaudit.corpus.documents`) and the dataset reader (:mod:`docaudit.corpus.datasets`)
make these, so they live below both."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from docaudit.errors import DocauditError


@dataclass(frozen=True)
class Document:
    """One document: ``id`` is the file stem (a dataset row's id), ``text`` the cleaned (or raw) text, ``sha256``
    the hash of ``text.encode("utf-8")`` (the text actually used, so caches keyed on it follow the cleaning);
    ``label`` (1 = member) and ``group`` come from a dataset's columns (:mod:`docaudit.corpus.datasets`);
    ``title`` and ``author`` from a Project Gutenberg header, for reports (:mod:`docaudit.corpus.metadata`)."""

    id: str
    path: str
    text: str
    sha256: str
    label: int | None = None
    group: str | None = None
    title: str | None = None
    author: str | None = None


def shown(path) -> str:
    """A path as docaudit shows and records it: bytes of its name that are not UTF-8 (read by Python as surrogate
    escapes, which no output can encode) as backslash escapes, ``caf\\xe9.txt``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


# what the loading functions take: a file or directory, several of them, or documents already loaded
Paths = str | os.PathLike | Sequence[str | os.PathLike] | Sequence[Document]


class DocumentError(DocauditError):
    """A document that cannot be used (unreadable, empty after cleaning, too short ...): ``kind`` names the problem
    (skipped documents are counted per kind), ``reason`` says what exactly."""

    def __init__(self, path, kind: str, reason: str):
        super().__init__(f"{shown(path)}: {reason}")
        self.path, self.kind, self.reason = shown(path), kind, reason


@dataclass(frozen=True)
class Skipped:
    """A document left out of a run: its file, the kind of problem and what exactly."""

    file: str
    kind: str
    reason: str


class Skips:
    """The documents a run leaves out, and why. Commands over many documents skip a document that cannot be used
    instead of stopping, list it in their output (``as_json``) and warn once per kind (:func:`skip_warnings`);
    with ``strict`` the first such document is an error."""

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.items: list[Skipped] = []

    def add(self, error: DocumentError, by_choice: bool = False) -> None:
        """Record a skipped document; ``by_choice``: left out by a filter the user asked for (never an error)."""
        if self.strict and not by_choice:
            raise error
        self.items.append(Skipped(error.path, error.kind, error.reason))

    def select(
        self, docs: Sequence[Document], reasons: Sequence[str | None], kind: str, by_choice: bool = False
    ) -> list[int]:
        """Indices of the documents whose reason is None; each of the others is skipped as ``kind``. Raises
        :class:`DocauditError` when none is left."""
        for doc, reason in zip(docs, reasons):
            if reason is not None:
                self.add(DocumentError(doc.path, kind, reason), by_choice)
        keep = [i for i, reason in enumerate(reasons) if reason is None]
        if docs and not keep:
            if len(docs) == 1:
                raise DocumentError(docs[0].path, kind, reasons[0])
            raise DocauditError(f"none of the {len(docs)} documents can be used: all {kind}")
        return keep

    def as_json(self) -> list[dict]:
        """The skipped documents as ``{"file", "kind", "reason"}`` dicts, for JSON outputs."""
        return [asdict(s) for s in self.items]


def skip_warnings(skipped: Sequence[dict], shown: int = 3) -> list[str]:
    """One line per kind of problem among ``Skips.as_json()`` entries: the count and the first few files."""
    kinds: dict[str, list[str]] = {}
    for entry in skipped:
        kinds.setdefault(entry["kind"], []).append(entry["file"])
    return [
        f"skipped {len(files)} document{'s' * (len(files) != 1)} ({kind}): {', '.join(files[:shown])}"
        + (f" and {len(files) - shown} more" if len(files) > shown else "")
        for kind, files in kinds.items()
    ]
