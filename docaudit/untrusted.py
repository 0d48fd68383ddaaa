"""The one reader of the files docaudit reads (every one may come from others): regular files only, opened without
blocking on anything else (a FIFO, a device), each kind within its size limit (``READ_LIMITS``), checked by size
before a byte is read (a sparse file is refused unread) and counted again while reading; zip archives (skops files,
``.npz`` cache entries) with a bounded number of members, inflating to a bounded size only, counted from the
directory and again while inflating. ``tests/test_untrusted_reads.py`` fails on any read of a file elsewhere."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from pathlib import Path
from typing import IO, Any

from docaudit.config import (
    ARCHIVE_BYTES_PER_MEMBER,
    ARCHIVE_INFLATE_FLOOR,
    ARCHIVE_INFLATE_RATIO,
    ARCHIVE_MAX_MEMBERS,
    ARCHIVE_MEMBERS_FLOOR,
    READ_LIMITS,
)

CHUNK = 1 << 20


class TooLarge(OSError):
    """A file holds more bytes than its kind may: ``size`` (None when found while reading) over ``limit``."""

    def __init__(self, path: Path, kind: str, limit: int, size: int | None = None):
        held = f"more than {limit:,} bytes" if size is None else f"{size:,} bytes"
        super().__init__(f"{path} holds {held}, over the {limit:,} a {kind} may hold")
        self.size, self.limit = size, limit


class NotRegular(OSError):
    """A path that is not a regular file (a folder, FIFO, socket or device)."""


class WouldWait(OSError):
    """A file whose read waits for data: a kernel file that looks regular (``/proc/kmsg``)."""


def _check(path: Path, kind: str, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise NotRegular(f"{path} is not a regular file")
    limit = READ_LIMITS[kind]
    if info.st_size > limit:
        raise TooLarge(path, kind, limit, info.st_size)


def open_untrusted(path: Path, kind: str) -> IO[bytes]:
    """``path`` opened for reading when it is a regular file (a link is followed to its target) of at most the
    bytes a ``kind`` of file may hold (``READ_LIMITS``); anything else is an ``OSError`` at once (:class:`NotRegular`,
    :class:`TooLarge`). Checked before opening (a device is never opened) and again on the descriptor (nothing
    swapped in between is read); the open itself never waits: a FIFO without a writer would block a plain ``open``."""
    _check(path, kind, os.stat(path))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        _check(path, kind, os.fstat(fd))
        return os.fdopen(fd, "rb")  # left non-blocking: a kernel file that waits fails its read instead
    except BaseException:
        os.close(fd)
        raise


def read_untrusted(path: Path, kind: str) -> bytes:
    """The bytes of the regular file ``path`` of kind ``kind`` (see :func:`open_untrusted`), counted while reading
    too: a file that grows past its limit is :class:`TooLarge`."""
    limit, pieces, total = READ_LIMITS[kind], [], 0
    with open_untrusted(path, kind) as f:
        while piece := _read(f, path, CHUNK):
            total += len(piece)
            if total > limit:
                raise TooLarge(path, kind, limit)
            pieces.append(piece)
    return b"".join(pieces)


def read_untrusted_text(path: Path, kind: str) -> str:
    """:func:`read_untrusted` decoded as UTF-8 (a byte-order mark dropped); ``UnicodeDecodeError`` when it is not."""
    return read_untrusted(path, kind).decode("utf-8-sig")


def load_untrusted_json(path: Path, kind: str) -> Any:
    """The JSON in the file ``path`` of kind ``kind``: ``OSError`` when it cannot be read within its limit,
    ``ValueError`` (``UnicodeDecodeError`` included) or ``RecursionError`` when it is not JSON."""
    return json.loads(read_untrusted_text(path, kind))


def sha256_untrusted(path: Path, kind: str) -> str:
    """Hex SHA-256 of the regular file ``path`` of kind ``kind`` (see :func:`open_untrusted`), read a chunk at a
    time."""
    h = hashlib.sha256()
    with open_untrusted(path, kind) as f:
        while block := _read(f, path, CHUNK):
            h.update(block)
    return h.hexdigest()


def _read(f: IO[bytes], path: Path, size: int) -> bytes:
    try:
        data = f.read(size)
    except BlockingIOError:
        data = None
    if data is None:
        raise WouldWait(f"{path}: reading it would wait for data (a device or kernel file)")
    return data


def member_limit(compressed: int) -> int:
    """The most members an archive of ``compressed`` bytes may hold (``ARCHIVE_MAX_MEMBERS`` and a count per byte
    far below what a forest's members take)."""
    return min(ARCHIVE_MAX_MEMBERS, ARCHIVE_MEMBERS_FLOOR + compressed // ARCHIVE_BYTES_PER_MEMBER)


def members_problem(f: IO[bytes], compressed: int) -> str | None:
    """Why the zip archive open in ``f`` (``compressed`` bytes) holds too many members, in words, or None; read from
    its end record (zip64 included) before its directory is parsed. Not a zip archive: None (opening it says so)."""
    try:
        end = zipfile._EndRecData(f)  # the reader zipfile.ZipFile itself starts with
    except OSError:
        return None
    finally:
        f.seek(0)
    count = None if end is None else end[zipfile._ECD_ENTRIES_TOTAL]
    limit = member_limit(compressed)
    if count is not None and count > limit:
        return f"it holds {count:,} members, more than the {limit:,} allowed for its size"
    return None


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


def regular_folder(path: Path) -> bool:
    """Whether ``path`` is a folder (not a link) holding regular files only (no link, FIFO, device or folder):
    what docaudit writes in its cache, and all a library may be pointed at there."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode) and all(
            stat.S_ISREG(os.lstat(entry).st_mode) for entry in Path(path).iterdir()
        )
    except OSError:
        return False
