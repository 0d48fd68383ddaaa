"""Output folders: docaudit writes only into a new or empty folder, or one it wrote before (a marker file says so),
and replaces an earlier output only when asked. Checked before any work starts, so a bad ``--out`` costs nothing.

Every output folder holds ``.docaudit-output.json``: the kind of output (``classifier``, ``evaluation``,
``report``, ``lab``), the docaudit version, when it was written, the top-level entries docaudit wrote there and
every file it wrote at every depth (``files``). Replacing an output deletes only those files: a file the user
added anywhere in the folder (``members/NOTES.md``) makes ``--overwrite`` refuse instead. (A marker written before
``files`` existed vouches for its top-level entries whole.)

A folder is written whole in a hidden staging folder beside it (holding ``STAGING_MARKER``), then renamed into
place: onto a path that is absent or an empty folder, or, with ``overwrite``, once the earlier output's own files
are gone; a rename onto anything else (another run's output, published meanwhile) is refused, never merged. A
staging folder left by a run that was killed is recognized by its marker and removed by the next run writing there.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from docaudit import __version__
from docaudit.errors import DocauditError, MachineError
from docaudit.folders import kernel_file_system, writable_folder
from docaudit.io import atomic_write_text, current_umask, writing
from docaudit.untrusted import load_untrusted_json

OUTPUT_MARKER = ".docaudit-output.json"
STAGING_MARKER = ".docaudit-staging.json"


def read_marker(folder: Path) -> dict | None:
    """The marker of a docaudit output folder, or None when there is none or it is unreadable."""
    try:
        marker = load_untrusted_json(Path(folder) / OUTPUT_MARKER, "output marker")
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


def write_marker(folder: Path, kind: str, entries, files=None) -> None:
    """Mark ``folder`` as a docaudit output of ``kind`` whose top-level ``entries`` and ``files`` (paths relative to
    ``folder``, at every depth) docaudit wrote; ``files`` None: every file now in ``folder`` (a folder docaudit has
    just written whole)."""
    files = _files_in(Path(folder)) if files is None else files
    marker = {
        "kind": kind,
        "docaudit_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "entries": sorted(set(entries) - {OUTPUT_MARKER}),
        "files": sorted(set(files) - {OUTPUT_MARKER}),
    }
    atomic_write_text(Path(folder) / OUTPUT_MARKER, json.dumps(marker, indent=2))


def record_files(folder: Path, *written: Path) -> None:
    """Add what docaudit has just ``written`` inside ``folder`` (files, or folders whose every file it wrote) to
    the files its marker lists: for an output written in place a step at a time (the lab)."""
    folder = Path(folder)
    marker = read_marker(folder)
    if marker is None:
        return
    files = set(_own_files(marker) or ())
    for path in written:
        rel = Path(path).relative_to(folder)
        files |= {f"{rel.as_posix()}/{f}" for f in _files_in(Path(path))} if Path(path).is_dir() else {rel.as_posix()}
    write_marker(folder, marker["kind"], marker.get("entries") or (), files)


def _files_in(folder: Path) -> list[str]:
    """Every entry of ``folder`` that is not a folder (links included, never followed), at every depth, as paths
    relative to it."""
    out = []
    for root, dirs, names in os.walk(folder):
        base = Path(root).relative_to(folder)
        out += [(base / n).as_posix() for n in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]]
    return out


def _own_files(marker: dict) -> set[str] | None:
    """The files a marker lists (relative paths without ``..``), or None for a marker that lists none."""
    files = marker.get("files")
    if not isinstance(files, list):
        return None
    return {f for f in files if isinstance(f, str) and _safe_relative(f)}


def _safe_relative(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and all(p not in ("", ".", "..") for p in parts) and "\\" not in name


def _foreign_entries(folder: Path, marker: dict) -> list[str]:
    """Entries of ``folder``, at every depth, that docaudit did not write: files the marker does not list by exact
    path (an editor's ``.name.swp`` beside an output file is the user's), and folders holding none of its files.
    For a marker without ``files``: the top-level entries it does not list."""
    own = _own_files(marker)
    if own is None:
        listed = {e for e in marker.get("entries") or () if isinstance(e, str)} | {OUTPUT_MARKER}
        return sorted(e for e in os.listdir(folder) if e not in listed)
    own.add(OUTPUT_MARKER)
    parents = {"/".join(f.split("/")[:i]) for f in own for i in range(1, f.count("/") + 1)}
    foreign = []
    for root, dirs, names in os.walk(folder):
        base = Path(root).relative_to(folder)
        for d in list(dirs):
            rel = (base / d).as_posix()
            if os.path.islink(os.path.join(root, d)):
                names.append(d)
            elif rel not in parents:
                foreign.append(rel + "/")
            else:
                continue
            dirs.remove(d)
        foreign += [rel for n in names if (rel := (base / n).as_posix()) not in own]
    return sorted(foreign)


def _place(path, inputs) -> Path:
    """``path`` resolved, refused when it is the current folder or contains it, or is or contains one of the
    existing ``inputs``."""
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
    return out


def prepare_output(path, kind: str, overwrite: bool = False, inputs=(), resume: bool = False) -> Path:
    """Check that docaudit may write a ``kind`` output at ``path`` and return it resolved. Refused, with a one-line
    DocauditError and nothing touched: the current folder or one containing it; a path that is, or contains, one of
    the existing ``inputs``; an existing file or a path through one; a folder under a kernel file system, or where
    the machine refuses a new file or has too little room (:class:`~docaudit.errors.MachineError`,
    ``folders.writable_folder``); a non-empty folder without docaudit's marker or with another kind's; an earlier
    output of this kind unless ``overwrite`` (or ``resume``: continue in it); with ``overwrite``, an earlier output
    that also holds files docaudit did not write."""
    given, out = str(path), _place(path, inputs)
    if (kernel := kernel_file_system(out)) is not None:
        raise MachineError(f"output folder {given} is under {kernel}, which the kernel shows as files")
    if not out.exists():
        parent = next(p for p in out.parents if p.exists())
        if not parent.is_dir():
            raise DocauditError(f"output folder {given} cannot be created: {parent} is a file")
        writable_folder(out, "output folder")
        return out
    if not out.is_dir():
        raise DocauditError(f"output folder {given} exists and is a file, not a folder")
    writable_folder(out, "output folder", place=out if resume else out.parent)
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


def prepare_parent(path, children, inputs=()) -> Path:
    """Check a folder that is to hold one output per name of ``children`` (``report`` with several methods), and
    return it resolved: refused as :func:`prepare_output` refuses a place (the current folder or one containing it,
    an input or a folder containing one, a file), and when it holds anything but those outputs (each is then
    checked by :func:`prepare_output`)."""
    given, out = str(path), _place(path, inputs)
    if out.exists() and not out.is_dir():
        raise DocauditError(f"output folder {given} exists and is a file, not a folder")
    if out.is_dir() and (other := sorted(set(os.listdir(out)) - set(children))):
        raise DocauditError(
            f"output folder {given} holds more than the outputs of {', '.join(children)} ({', '.join(other[:3])}); "
            "choose a new or empty folder"
        )
    return out


def discard_output(out: Path) -> None:
    """Delete the files an earlier docaudit output lists in its marker (only those, never through a link to a
    folder), the folders they leave empty, and the marker. For a marker without ``files``: its top-level entries."""
    out = Path(out)
    marker = read_marker(out) or {}
    own = _own_files(marker)
    if own is None:
        for name in [*(marker.get("entries") or ()), OUTPUT_MARKER]:
            if not isinstance(name, str) or not _safe_relative(name) or "/" in name or os.sep in name:
                continue
            entry = out / name
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink(missing_ok=True)
        return
    folders = set()
    for name in sorted(own):
        parts = name.split("/")
        if any(os.path.islink(out.joinpath(*parts[:i])) for i in range(1, len(parts))):
            continue  # a folder on the way was replaced by a link: nothing through it is docaudit's
        entry = out.joinpath(*parts)
        if entry.is_symlink() or not entry.is_dir():
            entry.unlink(missing_ok=True)
        folders |= {out.joinpath(*parts[:i]) for i in range(1, len(parts))}
    for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
        try:
            folder.rmdir()
        except OSError:
            pass  # not empty: it holds what docaudit did not write
    (out / OUTPUT_MARKER).unlink(missing_ok=True)


@contextmanager
def staged_dir(out: Path, kind: str, overwrite: bool = False, inputs=()):
    """Check ``out`` (:func:`prepare_output`), then yield a fresh staging folder beside it (staging folders of
    earlier runs that were killed are removed first); when the block succeeds the folder, marked as a ``kind``
    output, is published as ``out`` (:func:`publish_dir`), when it fails nothing of it is left (``out`` keeps its
    previous content)."""
    out = prepare_output(out, kind, overwrite, inputs)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    os.chmod(tmp, 0o777 & ~current_umask())
    staging = {"kind": kind, "pid": os.getpid(), "host": socket.gethostname()}
    atomic_write_text(tmp / STAGING_MARKER, json.dumps(staging))
    try:
        with writing(out):  # a write that names no file (a full disk in a CSV or plot) names the output folder
            yield tmp
        (tmp / STAGING_MARKER).unlink()
        write_marker(tmp, kind, os.listdir(tmp))
        publish_dir(tmp, out, kind, overwrite)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def remove_stale_staging(out: Path) -> None:
    """Remove the staging folders beside ``out`` that a docaudit run on this machine left when it was killed: hidden
    folders named after ``out`` holding ``STAGING_MARKER`` whose process is gone."""
    try:
        candidates = [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
    except OSError:
        return
    for folder in candidates:
        if folder.is_symlink() or not folder.is_dir():
            continue
        try:
            staging = load_untrusted_json(folder / STAGING_MARKER, "staging marker")
            pid, host = staging["pid"], staging["host"]
        except (OSError, ValueError, RecursionError, TypeError, KeyError):
            continue
        if isinstance(pid, int) and host == socket.gethostname() and not process_alive(pid):
            shutil.rmtree(folder, ignore_errors=True)


def process_alive(pid: int) -> bool:
    """Whether the process ``pid`` of this machine still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def publish_dir(new: Path, final: Path, kind: str, overwrite: bool = False) -> None:
    """Rename the finished folder ``new`` to ``final``: atomically onto an absent path or an empty folder; with
    ``overwrite``, after the earlier output's own files are deleted (:func:`discard_output`), only if nothing else
    is left. A ``final`` that holds anything else by then (another run's output, a file the user added) is refused
    with a one-line DocauditError and kept as it is."""
    if overwrite and final.is_dir() and not final.is_symlink():
        marker = read_marker(final)
        if marker is not None and marker["kind"] == kind and not _foreign_entries(final, marker):
            discard_output(final)
    try:
        os.rename(new, final)
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise
        raise DocauditError(
            f"output folder {final} was written meanwhile (by another run, or holds files docaudit did not write); "
            "nothing was replaced: choose another folder, or pass --overwrite"
        ) from None


def aside_path(final: Path) -> Path:
    """Where :func:`replace_dir` keeps the previous ``final`` while the new one moves in: the complete copy a
    reader falls back to if a run was killed between the two renames."""
    return final.with_name(f".{final.name}.old")


def replace_dir(new: Path, final: Path) -> None:
    """Move the finished folder ``new`` to ``final``; a previous ``final`` is moved aside (:func:`aside_path`) first
    and deleted once ``new`` is in place. After a run killed between the renames, the aside copy is the last
    complete one: it stays until the next replacement succeeds."""
    old = aside_path(final)
    if final.exists():
        if old.exists():
            shutil.rmtree(old)
        os.replace(final, old)
    os.replace(new, final)
    shutil.rmtree(old, ignore_errors=True)
