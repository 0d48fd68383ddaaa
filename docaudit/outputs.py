"""Output folders: docaudit writes only into a new or empty folder, or one it wrote before (a marker file says so),
and replaces an earlier output only when asked. Checked before any work starts, so a bad ``--out`` costs nothing.

Every output folder holds ``.docaudit-output.json``: the kind of output (``classifier``, ``evaluation``,
``report``, ``lab``), the docaudit version, when it was written and the top-level entries docaudit wrote there.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from docaudit import __version__
from docaudit.errors import DocauditError
from docaudit.io import atomic_write_text, current_umask

OUTPUT_MARKER = ".docaudit-output.json"


def read_marker(folder: Path) -> dict | None:
    """The marker of a docaudit output folder, or None when there is none or it is unreadable."""
    try:
        marker = json.loads((Path(folder) / OUTPUT_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(marker, dict) or not isinstance(marker.get("kind"), str):
        return None
    return marker


def command_line(command: list[str] | None = None) -> list[str]:
    """The command that makes an output, as argv: ``command`` when given (the run context carries the docaudit
    command being run), else this process's own."""
    import sys

    return [str(a) for a in (command or [Path(sys.argv[0]).name, *sys.argv[1:]])]


def provenance(model_identity: str | None = None, tokenizer: str | None = None, command=None) -> dict:
    """Where an output comes from: the docaudit version, when (UTC), the model's identity (by content) and its
    tokenizer's hash, and the full command line that made it (:func:`command_line`)."""
    import shlex

    return {
        "docaudit_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model_identity": model_identity,
        "tokenizer": tokenizer,
        "command": shlex.join(command_line(command)),
    }


def write_marker(folder: Path, kind: str, entries) -> None:
    """Mark ``folder`` as a docaudit output of ``kind`` whose top-level ``entries`` docaudit wrote."""
    marker = {
        "kind": kind,
        "docaudit_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "entries": sorted(set(entries) - {OUTPUT_MARKER}),
    }
    atomic_write_text(Path(folder) / OUTPUT_MARKER, json.dumps(marker, indent=2))


def _foreign_entries(folder: Path, marker: dict) -> list[str]:
    """Top-level entries of ``folder`` that the marker does not list by exact name (an editor's ``.name.swp``
    beside an output file is the user's, not docaudit's)."""
    own = {e for e in marker.get("entries") or () if isinstance(e, str)} | {OUTPUT_MARKER}
    return sorted(e for e in os.listdir(folder) if e not in own)


def prepare_output(path, kind: str, overwrite: bool = False, inputs=(), resume: bool = False) -> Path:
    """Check that docaudit may write a ``kind`` output at ``path`` and return it resolved. Refused, with a one-line
    DocauditError and nothing touched: the current folder or one containing it; a path that is, or contains, one of
    the existing ``inputs``; an existing file or a path through one; a folder that cannot be created or written; a
    non-empty folder without docaudit's marker or with another kind's; an earlier output of this kind unless
    ``overwrite`` (or ``resume``: continue in it); with ``overwrite``, an earlier output that also holds files
    docaudit did not write."""
    given = str(path)
    try:
        out = Path(path).expanduser().resolve()
    except (OSError, RuntimeError) as e:
        raise DocauditError(f"output folder {given}: {e}") from None
    cwd = Path.cwd().resolve()
    if out == cwd or out in cwd.parents:
        raise DocauditError(f"output folder {given} is the current folder or contains it; name a new folder")
    for item in inputs:
        source = Path(item).expanduser()
        if source.exists() and (out == source.resolve() or out in source.resolve().parents):
            raise DocauditError(f"output folder {given} is or contains the input {item}; choose another folder")
    if not out.exists():
        parent = next(p for p in out.parents if p.exists())
        if not parent.is_dir():
            raise DocauditError(f"output folder {given} cannot be created: {parent} is a file")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise DocauditError(f"output folder {given} cannot be created in {parent}: permission denied")
        return out
    if not out.is_dir():
        raise DocauditError(f"output folder {given} exists and is a file, not a folder")
    if not os.access(out if resume else out.parent, os.W_OK | os.X_OK):
        raise DocauditError(f"output folder {given} cannot be written: permission denied")
    if not os.listdir(out):
        return out
    marker = read_marker(out)
    if marker is None:
        raise DocauditError(
            f"output folder {given} is not empty and was not written by docaudit (no "
            f"{OUTPUT_MARKER}); choose a new or empty folder"
        )
    if marker["kind"] != kind:
        raise DocauditError(
            f"output folder {given} holds a docaudit {marker['kind']} output, not a {kind}; choose another folder"
        )
    if resume and not overwrite:
        return out
    if not overwrite:
        raise DocauditError(
            f"output folder {given} holds an earlier docaudit {kind} output; pass --overwrite to replace it"
        )
    foreign = _foreign_entries(out, marker)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise DocauditError(
            f"output folder {given} also holds files docaudit did not write ({shown}); move them "
            "or choose another folder"
        )
    return out


def discard_output(out: Path) -> None:
    """Delete the entries an earlier docaudit output lists in its marker (only those), and the marker."""
    marker = read_marker(out) or {}
    for name in [*(marker.get("entries") or ()), OUTPUT_MARKER]:
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or os.sep in name:
            continue
        entry = Path(out) / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink(missing_ok=True)


@contextmanager
def staged_dir(out: Path, kind: str, overwrite: bool = False, inputs=()):
    """Check ``out`` (:func:`prepare_output`), then yield a fresh temporary folder beside it; when the block
    succeeds the folder, marked as a ``kind`` output, replaces ``out`` whole, when it fails nothing of it is left
    (``out`` keeps its previous content)."""
    out = prepare_output(out, kind, overwrite, inputs)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    os.chmod(tmp, 0o777 & ~current_umask())
    try:
        yield tmp
        write_marker(tmp, kind, os.listdir(tmp))
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def replace_dir(new: Path, final: Path) -> None:
    """Move the finished folder ``new`` to ``final``; a previous ``final`` is moved aside under a fresh name, then
    deleted."""
    old = None
    if final.exists():
        old = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.old."))
        os.replace(final, old)
    os.replace(new, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
