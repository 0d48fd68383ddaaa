"""Benchmark datasets as documents: a ``.jsonl``, ``.csv`` or ``.parquet`` file, a Hugging Face dataset saved
with ``save_to_disk``, or ``hf:NAME[:SPLIT]`` (a hub id or local dataset folder, loaded by ``datasets``), read as
one document per row.

The columns are named by a :class:`~docaudit.config.DatasetConfig` or recognised by name: the text is ``text``,
``input`` (WikiMIA) or ``snippet`` (BookMIA, PAC's StackMIAsub), the label ``label`` (1 = member, 0 = non-member),
the id ``id`` (else the row's 0-based index). A row with both a ``member`` and a ``nonmember`` column (MIMIR) gives
two documents, labelled 1 and 0. A group column (BookMIA's ``book_id``) joins the rows of each group, in file
order and separated by a blank line, into one document whose id is the group (labels must agree within a group),
so that document-level methods run on snippet benchmarks.

Rows are used verbatim: no boilerplate removal or character normalization (a benchmark's text is what its
published numbers were computed on). A row without text, with a label other than 0/1, or a group with mixed
labels is a counted, named skip (``file#row``).
"""

from __future__ import annotations

import io
import json
import math
import os
import pathlib
import socket
from collections.abc import Sequence

from docaudit.config import (
    GROUP_SEPARATOR,
    HUB_PROBE_SECONDS,
    ID_COLUMNS,
    LABEL_COLUMNS,
    PAIR_COLUMNS,
    READ_LIMITS,
    TEXT_COLUMNS,
    DatasetConfig,
)
from docaudit.corpus.base import Document, DocumentError, Skips, skip_warnings
from docaudit.errors import DocauditError
from docaudit.io import sha256_text
from docaudit.untrusted import TooLarge, read_untrusted

SUFFIXES = (".jsonl", ".csv", ".parquet")
HUB_PREFIX = "hf:"


class DatasetSource(os.PathLike):
    """A dataset given where documents are expected, with the columns to read. ``by_label``: its rows are members
    or non-members by their label, whichever set it was given in (``--data``). As a path it is its location, so
    output folders are checked against it like any input."""

    def __init__(self, location: str | os.PathLike, config: DatasetConfig = DatasetConfig(), by_label: bool = False):
        self.location, self.config, self.by_label = str(location), config, by_label

    def __fspath__(self) -> str:
        return self.location

    def __repr__(self) -> str:
        return f"DatasetSource({self.location!r})"


def is_dataset(path) -> bool:
    """Whether ``path`` names a dataset rather than text files: a :class:`DatasetSource`, ``hf:...``, a file
    ending in ``.jsonl``, ``.csv`` or ``.parquet``, or a folder written by ``datasets``' ``save_to_disk``."""
    if isinstance(path, DatasetSource):
        return True
    if not isinstance(path, (str, os.PathLike)):
        return False
    s = os.fspath(path)
    if s.startswith(HUB_PREFIX):
        return True
    p = pathlib.Path(s)
    if p.suffix.lower() in SUFFIXES:
        return True
    return p.is_dir() and any((p / f).is_file() for f in ("dataset_dict.json", "state.json"))


def as_source(path, config: DatasetConfig = DatasetConfig(), by_label: bool = False):
    """``path`` as a :class:`DatasetSource` with ``config`` when it names a dataset; other paths unchanged."""
    if isinstance(path, DatasetSource):
        return DatasetSource(path.location, config, by_label or path.by_label)
    return DatasetSource(path, config, by_label) if is_dataset(path) else path


def read_dataset(source, skips: Skips | None = None) -> list[Document]:
    """The documents of one dataset (``source``: a :class:`DatasetSource` or a path :func:`is_dataset` accepts,
    read with the default columns). Each document carries its ``label`` (None without a label column) and
    ``group``. Unusable rows are recorded in ``skips`` (without ``skips`` they are an error); a dataset with no
    usable row is an error naming the reasons."""
    source = source if isinstance(source, DatasetSource) else DatasetSource(source)
    rows, columns = _read_rows(source, skips)
    c = source.config
    where = source.location
    pair = c.text_column is None and _pick(columns, None, TEXT_COLUMNS) is None and set(PAIR_COLUMNS) <= set(columns)
    text_col = None if pair else _pick(columns, c.text_column, TEXT_COLUMNS, "text", where, required=True)
    label_col = None if pair else _pick(columns, c.label_column, LABEL_COLUMNS, "label", where)
    id_col = _pick(columns, c.id_column, ID_COLUMNS, "id", where)
    group_col = _pick(columns, c.group_column, (), "group", where)
    local = Skips()
    items = []  # (row key, text, label, group)
    for i, row in enumerate(rows):
        if row is None:  # a JSONL line already skipped
            continue
        key = str(row[id_col]) if id_col is not None and _present(row.get(id_col)) else str(i)
        group = str(row[group_col]) if group_col is not None and _present(row.get(group_col)) else None
        if group_col is not None and group is None:
            local.add(DocumentError(f"{where}#{key}", "no group", f"no value in group column '{group_col}'"))
            continue
        texts = (
            [(col, 1 - j, f"{key}:{col}") for j, col in enumerate(PAIR_COLUMNS)]
            if pair
            else [(text_col, row.get(label_col) if label_col else None, key)]
        )
        for column, label, name in texts:
            text = row.get(column)
            if not isinstance(text, str) or not text.strip():
                local.add(DocumentError(f"{where}#{name}", "no text", f"no text in column '{column}'"))
                continue
            if label_col is not None or pair:
                label = _label(label)
                if label is None:
                    local.add(
                        DocumentError(
                            f"{where}#{name}", "bad label", f"label {row.get(label_col)!r} is not 0 or 1 (1 = member)"
                        )
                    )
                    continue
            items.append((name, text, label, group))
    docs = _join_groups(items, where, local) if group_col is not None and c.join_groups else _documents(items, where)
    for s in local.items:
        if skips is None:
            raise DocumentError(s.file, s.kind, s.reason)
        skips.add(DocumentError(s.file, s.kind, s.reason))
    if not docs:
        reasons = "; ".join(skip_warnings(local.as_json())) or "it has no rows"
        raise DocauditError(f"{where}: no row can be used: {reasons}")
    return docs


def _documents(items, where: str) -> list[Document]:
    return [
        Document(id=name, path=f"{where}#{name}", text=text, sha256=sha256_text(text), label=label, group=group)
        for name, text, label, group in items
    ]


def _join_groups(items, where: str, skips: Skips) -> list[Document]:
    """One document per group: its rows' texts in order, separated by ``GROUP_SEPARATOR``."""
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(item[3], []).append(item)
    docs = []
    for group, members in groups.items():
        labels = {m[2] for m in members}
        if len(labels) > 1:
            skips.add(DocumentError(f"{where}#{group}", "mixed labels", f"group '{group}' has rows labelled 0 and 1"))
            continue
        text = GROUP_SEPARATOR.join(m[1] for m in members)
        docs.append(
            Document(
                id=group,
                path=f"{where}#{group}",
                text=text,
                sha256=sha256_text(text),
                label=labels.pop(),
                group=group,
            )
        )
    return docs


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and str(value).strip() != ""


def _label(value) -> int | None:
    """0 or 1 from an int, bool, float or string label; None for anything else."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return int(value) if value in (0, 1) else None
    if isinstance(value, str):
        return {"0": 0, "1": 1, "0.0": 0, "1.0": 1, "false": 0, "true": 1}.get(value.strip().lower())
    try:  # numpy scalars
        return _label(value.item())
    except AttributeError:
        return None


def _pick(columns: Sequence[str], given, known: Sequence[str], what: str = "", where: str = "", required=False):
    """The column ``given`` (an error when absent), else the first of ``known`` present (an error when
    ``required`` and none is)."""
    if given is not None:
        if given not in columns:
            raise DocauditError(f"{where}: no {what} column '{given}' (columns: {', '.join(map(str, columns))})")
        return given
    found = next((k for k in known if k in columns), None)
    if found is None and required:
        raise DocauditError(
            f"{where}: no {what} column (looked for {', '.join(known)}); name it with --{what}-column "
            f"(columns: {', '.join(map(str, columns))})"
        )
    return found


def _read_rows(source: DatasetSource, skips: Skips | None) -> tuple[list[dict], list[str]]:
    """The rows (dicts) and column names of the dataset; a JSONL line that is not a JSON object is a skip (its row
    is None)."""
    where = source.location
    if where.startswith(HUB_PREFIX) or pathlib.Path(where).is_dir():
        return _read_hf(source)
    p = pathlib.Path(where)
    try:
        data = read_untrusted(p, "document")
    except FileNotFoundError:
        raise DocauditError(f"{where}: no such file") from None
    except TooLarge:
        limit = READ_LIMITS["document"]
        raise DocauditError(f"{where}: over the limit of {limit:,} bytes for one dataset file") from None
    except OSError as e:
        raise DocauditError(f"{where}: cannot read it ({e})") from None
    suffix = p.suffix.lower()
    if suffix == ".jsonl":
        return _read_jsonl(where, data, skips)
    import pandas as pd

    try:
        if suffix == ".csv":
            frame = pd.read_csv(io.BytesIO(data), dtype=object, keep_default_na=False, na_values=[])
        else:
            frame = pd.read_parquet(io.BytesIO(data))
    except ImportError as e:
        raise DocauditError(f"{where}: reading Parquet needs pyarrow (pip install 'docaudit[datasets]'): {e}") from None
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as e:
        raise DocauditError(f"{where}: cannot read as {suffix[1:].upper()} ({str(e).splitlines()[0]})") from None
    frame = frame.astype(object).where(frame.notna(), None)
    return frame.to_dict(orient="records"), [str(c) for c in frame.columns]


def _read_jsonl(path: str, data: bytes, skips: Skips | None) -> tuple[list[dict], list[str]]:
    """The rows of a JSON Lines file ``path`` read as ``data``."""
    rows, columns = [], {}
    try:
        lines = data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as e:
        raise DocauditError(f"{path}: not valid UTF-8 (byte offset {e.start})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            row, why = None, f"line {n} is not valid JSON ({e.msg})"
        except (ValueError, RecursionError) as e:  # an integer too long to convert, or nesting too deep
            row, why = None, f"line {n} cannot be read ({type(e).__name__}: {str(e)[:100]})"
        else:
            why = f"line {n} is not a JSON object"
        if not isinstance(row, dict):
            error = DocumentError(f"{path}:{n}", "bad row", why)
            if skips is None:
                raise error
            skips.add(error)
            row = None  # kept in place: a row's index is its line's among the non-empty lines
        rows.append(row)
        if row is None:
            continue
        columns.update(dict.fromkeys(row))
    return rows, list(columns)


def hub_reachable(timeout: float = HUB_PROBE_SECONDS) -> bool:
    """Whether huggingface.co answers on port 443 within ``timeout`` seconds."""
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _read_hf(source: DatasetSource) -> tuple[list[dict], list[str]]:
    """Rows of a Hugging Face dataset: a ``save_to_disk`` folder (also as ``hf:FOLDER[:SPLIT]``), or
    ``hf:NAME[:SPLIT]`` through ``load_dataset``.
    When the hub cannot be reached the dataset is read from the local cache only (an error at once when absent,
    instead of ``datasets``' retries)."""
    where = source.location
    try:
        import datasets
    except ImportError:
        raise DocauditError(f"{where}: reading Hugging Face datasets needs pip install 'docaudit[datasets]'") from None
    name, split = where, source.config.split
    if where.startswith(HUB_PREFIX):
        name, _, named_split = where[len(HUB_PREFIX) :].partition(":")
        split = split or named_split or None
    try:
        if is_dataset(name) and pathlib.Path(name).is_dir():  # written by save_to_disk
            data = datasets.load_from_disk(name)
        else:
            if not pathlib.Path(name).exists() and not _offline() and not hub_reachable():
                _go_offline()
            data = datasets.load_dataset(name, split=split)
    except (ConnectionError, FileNotFoundError, ValueError, OSError) as e:
        offline = " (the Hugging Face hub cannot be reached and it is not in the local cache)" * _offline()
        raise DocauditError(f"{where}: cannot load the dataset{offline}: {str(e).splitlines()[0]}") from None
    if isinstance(data, datasets.DatasetDict):
        names = list(data)
        if split is None and len(names) == 1:
            split = names[0]
        if split not in data:
            raise DocauditError(f"{where}: choose a split with --split (splits: {', '.join(names)})")
        data = data[split]
    return data.to_list(), list(data.column_names)


def _offline() -> bool:
    import huggingface_hub.constants

    return bool(huggingface_hub.constants.HF_HUB_OFFLINE)


def _go_offline() -> None:
    """Hub access off for this process (``datasets`` reads the setting at import, so the modules' copies are set)."""
    import datasets.config
    import huggingface_hub.constants

    os.environ["HF_HUB_OFFLINE"] = "1"
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    datasets.config.HF_HUB_OFFLINE = True
