"""Which documents and how they are read: dataset columns, the Gutenberg fetcher."""

from __future__ import annotations

from dataclasses import dataclass

from docaudit.config.base import setting

TEXT_COLUMNS = ("text", "input", "snippet")  # WikiMIA: input; BookMIA and PAC's StackMIAsub: snippet
LABEL_COLUMNS = ("label",)
ID_COLUMNS = ("id",)
PAIR_COLUMNS = ("member", "nonmember")  # MIMIR: one member and one non-member text per row


@dataclass(frozen=True)
class DatasetConfig:
    """How a benchmark file (JSONL, CSV, Parquet) or Hugging Face dataset is read as documents: the columns that
    hold each row's text, label (1 = member), id and group (None: recognised by name, ``TEXT_COLUMNS`` etc.; a group
    only when named), the split of a dataset with several, and whether a group's rows are joined into one document
    (with ``GROUP_SEPARATOR`` between them)."""

    text_column: str | None = setting(
        None, f"Dataset column holding the text (default: the first of {', '.join(TEXT_COLUMNS)}).", "inputs"
    )
    label_column: str | None = setting(None, "Dataset column holding the label, 1 = member (default: label).", "inputs")
    id_column: str | None = setting(
        None, "Dataset column holding the row id (default: id, else the row index).", "inputs"
    )
    group_column: str | None = setting(
        None, "Dataset column grouping rows into documents (e.g. BookMIA's book_id).", "inputs"
    )
    split: str | None = setting(None, "Split of a Hugging Face dataset with several.", "inputs")
    join_groups: bool = True


GROUP_SEPARATOR = "\n\n"
HUB_PROBE_SECONDS = 3.0  # how long reaching the Hugging Face hub may take before a dataset id is read offline


@dataclass(frozen=True)
class FetchConfig:
    """Downloading a manifest's books from a Project Gutenberg mirror. ``timeout`` bounds one file's whole
    download (connection, headers and body, however slowly the server sends them) and ``book_timeout`` everything
    spent on one book (every layout, round and backoff). After a round with transient failures the layouts are
    tried again up to ``retries`` times, ``backoff`` seconds after the first round, doubling each time. Without a
    sha256 in the manifest a file must be at least ``min_bytes`` long. ``overwrite`` lets an existing file that
    fails the manifest's checks be replaced."""

    workers: int = 4
    retries: int = 3
    backoff: float = 2.0
    timeout: float = 60.0
    book_timeout: float = 180.0
    min_bytes: int = 1024
    overwrite: bool = False
