"""Writing files safely: atomic writes, content hashes and strict JSON (no NaN); ``tomllib`` for reading TOML
on every supported Python."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomllib is the standard library's copy of tomli (3.11+)
    import tomli as tomllib  # noqa: F401 (imported from here by the config reader)


def current_umask() -> int:
    """The process's file-creation mask (read by setting and restoring it), so atomic writes get the permissions
    a plain ``open`` would give."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def writing(path: Path):
    """Name ``path`` in an ``OSError`` of the block that names no file (a write or close that finds the disk full
    names none), so the one-line error says which file the machine refused."""
    try:
        yield
    except OSError as e:
        if e.filename is None:
            e.filename = str(path)
        raise


def atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write through ``write(file_object)`` to a temporary file beside ``path``, then rename over it; on any
    failure the temporary file is removed (where the folder still allows it) and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with writing(path), os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # a folder made read-only meanwhile: the first error is the one to tell
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` as UTF-8 through :func:`atomic_write`: a reader never sees a half-written file. What UTF-8
    cannot hold (a file name that was not valid UTF-8, read with surrogate escapes) is written as a backslash
    escape."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8", "backslashreplace")))


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula


def spreadsheet_safe(frame):
    """``frame`` with every text cell a spreadsheet would take for a formula (one that begins with ``=``, ``+``,
    ``-``, ``@``, a tab or a carriage return: a book named ``=HYPERLINK(...)``) preceded by an apostrophe, which
    spreadsheets show as text (OWASP's advice on CSV injection); numbers are left as they are."""

    def safe(value):
        return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value

    from pandas.api.types import is_object_dtype, is_string_dtype

    out = frame.copy()
    for i, dtype in enumerate(out.dtypes):
        if is_object_dtype(dtype) or is_string_dtype(dtype):
            out.isetitem(i, out.iloc[:, i].map(safe))
    return out


def csv_text(frame) -> str:
    """``frame`` as CSV text without its index, safe to open in a spreadsheet (:func:`spreadsheet_safe`): every CSV
    docaudit writes or prints is made here."""
    return spreadsheet_safe(frame).to_csv(index=False)


def write_csv(frame, path: Path) -> None:
    """``frame`` as a UTF-8 CSV file (:func:`csv_text`), names that UTF-8 cannot hold backslash-escaped (see
    :func:`atomic_write_text`)."""
    spreadsheet_safe(frame).to_csv(path, index=False, errors="backslashreplace")


def sha256_text(text: str) -> str:
    """Hex SHA-256 of the text's UTF-8 bytes: a document's identity in caches and duplicate checks."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def jsonable(value: Any) -> Any:
    """``value`` with NumPy scalars as Python numbers and every NaN or infinity as None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(value: Any, indent: int = 2) -> str:
    """Strict JSON of ``value`` (see :func:`jsonable`): what every docaudit JSON output is written with."""
    return json.dumps(jsonable(value), indent=indent, allow_nan=False)
