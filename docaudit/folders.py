"""The folders docaudit writes in (its cache, an output folder's place), checked before the work, nothing made: a
folder, or one that can be made in its nearest existing parent (not a file, a device such as ``/dev/null``, nor
under a kernel file system), on a file system that takes a new file (a probe file made and removed: read-only,
permissions and full disks all answer), with at least ``MIN_FREE_BYTES`` free. Each refusal is a
:class:`~docaudit.errors.MachineError` naming the path and the cause, so a run that cannot write ends before its
work, not after it."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from docaudit.config import MIN_FREE_BYTES
from docaudit.errors import MachineError, cause_of

KERNEL_FILE_SYSTEMS = (Path("/proc"), Path("/sys"), Path("/dev"))  # what the kernel shows as files, not storage


def kernel_file_system(path: Path) -> Path | None:
    """The kernel file system ``path`` (links followed) lies in, or None."""
    resolved = Path(os.path.realpath(path))
    return next((k for k in KERNEL_FILE_SYSTEMS if resolved == k or k in resolved.parents), None)


def folder_problem(path: Path, what: str) -> MachineError | None:
    """Why ``path`` cannot be read as a ``what`` folder (a file, a device, a kernel file system), or None when it
    is a folder or absent."""
    if (kernel := kernel_file_system(path)) is not None:
        return MachineError(f"{what} {path} is under {kernel}, which the kernel shows as files, not a folder to use")
    if os.path.lexists(path) and not os.path.isdir(path):
        return MachineError(f"{what} {path} is a file (or device), not a folder")
    return None


def writable_folder(path, what: str, place: Path | None = None) -> Path:
    """``path`` as a ``what`` folder docaudit can write ``MIN_FREE_BYTES`` in, nothing made: a probe file made and
    removed in ``place`` (default: ``path``, or its nearest existing parent, where it would be made)."""
    path = Path(path).expanduser()
    if (problem := folder_problem(path, what)) is not None:
        raise problem
    try:
        place = Path(place or next(p for p in (path, *path.absolute().parents) if os.path.lexists(p)))
        if not place.is_dir():
            raise MachineError(f"{what} {path} cannot be made: {place} is a file, not a folder")
        fd, probe = tempfile.mkstemp(dir=place, prefix=".docaudit-probe-")
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)
        free = shutil.disk_usage(place).free
    except OSError as e:
        within = "" if place is None or Path(place) == path else f" (in {place})"
        raise MachineError(f"{what} {path} cannot be written{within}: {cause_of(e) or e}") from None
    if free < MIN_FREE_BYTES:
        raise MachineError(
            f"{what} {path}: {free / 1e6:,.0f} MB free on its disk, less than the {MIN_FREE_BYTES / 1e6:,.0f} MB a "
            "run needs there; free space or choose another folder"
        )
    return path
