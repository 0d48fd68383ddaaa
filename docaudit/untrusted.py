"""Reading files that others give without letting them decide how long or how much: regular files only, opened
without blocking on anything else (a FIFO, a device), and zip archives (skops files, ``.npz`` cache entries) whose
members may inflate to a bounded size only, counted from the directory and again while inflating."""

from __future__ import annotations

import hashlib
import os
import stat
import zipfile
from pathlib import Path
from typing import IO

from docaudit.config import ARCHIVE_INFLATE_FLOOR, ARCHIVE_INFLATE_RATIO

CHUNK = 1 << 20


def open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading when it is a regular file (a link is followed to its target); anything else is
    an ``OSError`` at once. The open itself never waits: a FIFO without a writer would block a plain ``open``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class TooLarge(OSError):
    """A file holds more bytes than its reader accepts."""


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (see :func:`open_regular`); :class:`TooLarge` when it holds more than
    ``limit`` bytes."""
    with open_regular(path) as f:
        data = f.read(-1 if limit is None else limit + 1)
    if limit is not None and len(data) > limit:
        raise TooLarge(f"{path} holds more than {limit} bytes")
    return data


def inflate_limit(compressed: int) -> int:
    """The most bytes an archive of ``compressed`` bytes may inflate to: a fixed floor plus a ratio well above what
    docaudit's own files reach (about 13 for a classifier), far below a decompression bomb's (about 1,000)."""
    return ARCHIVE_INFLATE_FLOOR + ARCHIVE_INFLATE_RATIO * compressed


def inflate_problem(archive: zipfile.ZipFile, compressed: int) -> str | None:
    """Why the members of ``archive`` (a file of ``compressed`` bytes) inflate too far, in words, or None. The sizes
    the directory declares are summed first; then every member is inflated a chunk at a time and counted, since a
    directory can lie (nothing is kept: memory stays at one chunk)."""
    limit = inflate_limit(compressed)
    declared = sum(info.file_size for info in archive.infolist())
    if declared > limit:
        return f"its members would inflate to {declared:,} bytes, more than the {limit:,} allowed for its size"
    total = 0
    for info in archive.infolist():
        with archive.open(info) as member:
            while chunk := member.read(CHUNK):
                total += len(chunk)
                if total > limit:
                    return f"its members inflate to more than the {limit:,} bytes allowed for its size"
    return None


def sha256_regular(path: Path) -> str:
    """Hex SHA-256 of the regular file ``path`` (see :func:`open_regular`), read a chunk at a time."""
    h = hashlib.sha256()
    with open_regular(path) as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def regular_folder(path: Path) -> bool:
    """Whether ``path`` is a folder (not a link) holding regular files only (no link, FIFO, device or folder):
    what docaudit writes in its cache, and all a library may be pointed at there."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode) and all(
            stat.S_ISREG(os.lstat(entry).st_mode) for entry in Path(path).iterdir()
        )
    except OSError:
        return False
