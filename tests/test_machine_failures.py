"""The machine's ordinary failures are the user's environment, not docaudit's: a full disk, a cache folder that is
a file, a device or under /proc, a folder the machine will not write, too little free space, a write refused
mid-run. Each ends in one line naming the path and the cause with exit status 74 (``MachineError``), before the
work where it can be known before, and leaves nothing half-written."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

import pytest
from conftest import within
from test_cli import assert_clean_error, run

from docaudit import io as docaudit_io
from docaudit.errors import INTERNAL, MACHINE, report_error

HANG_GUARD = 60  # seconds: a guard that turns a hang into a failure


def reported(error: Exception) -> tuple[int, str]:
    stream = io.StringIO()
    status = report_error(error, stream=stream)
    return status, stream.getvalue()


@pytest.mark.parametrize(
    "code, cause",
    [
        (errno.ENOSPC, "the disk is full"),
        (errno.EROFS, "the file system is read-only"),
        (errno.EACCES, "permission denied"),
        (errno.ENOTDIR, "a part of the path is a file"),
    ],
)
def test_the_machine_refusing_a_write_is_one_line_naming_the_path(code, cause):
    error = OSError(code, os.strerror(code), "/data/out/report.csv")
    status, printed = reported(error)
    assert status == MACHINE and printed.count("\n") == 1
    assert printed.startswith("error: cannot use /data/out/report.csv: " + cause)
    wrapped = RuntimeError("saving failed")
    wrapped.__cause__ = error
    assert reported(wrapped)[0] == MACHINE


def test_a_failure_of_docaudit_itself_is_still_internal():
    assert reported(OSError(errno.EBADF, "Bad file descriptor"))[0] == INTERNAL
    handled = KeyError("a bug while handling a refusal")
    handled.__context__ = OSError(errno.EACCES, "Permission denied", "/x")  # not its cause: still a bug
    assert reported(handled)[0] == INTERNAL


def test_a_full_disk_mid_write_leaves_the_earlier_file_and_no_temporary_one(tmp_path, monkeypatch):
    """Writes through /dev/full (every write: ENOSPC), as on a disk that fills while docaudit writes."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    target = tmp_path / "probe.json"
    target.write_text("the earlier output")
    real = docaudit_io.tempfile.mkstemp

    def full_disk(*args, **kwargs):
        fd, name = real(*args, **kwargs)
        os.dup2(os.open("/dev/full", os.O_WRONLY), fd)
        return fd, name

    monkeypatch.setattr(docaudit_io.tempfile, "mkstemp", full_disk)
    with pytest.raises(OSError) as raised:
        docaudit_io.atomic_write_text(target, "x" * 100_000)
    status, printed = reported(raised.value)
    assert status == MACHINE and f"cannot use {target}: the disk is full" in printed
    assert target.read_text() == "the earlier output"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.json"]


def cache_as(monkeypatch, tmp_path, kind: str) -> str:
    if kind == "a file":
        (tmp_path / "cache").write_text("someone's file")
        path = tmp_path / "cache"
    else:
        path = {"/dev/null": Path("/dev/null"), "under /proc": Path("/proc/self/cache")}[kind]
    monkeypatch.setenv("DOCAUDIT_CACHE", str(path))
    return str(path)


@pytest.mark.parametrize("kind", ["a file", "/dev/null", "under /proc"])
@pytest.mark.parametrize("command", [["score"], ["probe", "--dry-run"], ["cache", "info"]])
def test_a_cache_folder_that_is_not_a_folder_is_refused_before_the_work(tmp_path, monkeypatch, doc, kind, command):
    path = cache_as(monkeypatch, tmp_path, kind)
    args = command if command[0] == "cache" else [*command, doc]
    result = within(HANG_GUARD, run, *args)
    assert result.exit_code == MACHINE, result.output
    assert_clean_error(result, f"cache folder {path}")
    if kind == "a file":
        assert (tmp_path / "cache").read_text() == "someone's file"


def test_too_little_free_space_is_refused_before_the_work(tmp_path, monkeypatch, doc):
    import shutil

    from docaudit import folders

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(folders.shutil, "disk_usage", lambda _p: usage._replace(free=10 << 20))
    result = within(HANG_GUARD, run, "score", doc)
    assert result.exit_code == MACHINE, result.output
    assert_clean_error(result, "10 MB free on its disk, less than the 67 MB a run needs there")
    out = tmp_path / "out"
    result = within(HANG_GUARD, run, "probe", doc, "--dry-run", "--out", out)
    assert result.exit_code == MACHINE and not out.exists()


def test_an_output_folder_under_proc_is_refused(tmp_path, doc):
    result = within(HANG_GUARD, run, "probe", doc, "--dry-run", "--out", "/proc/self/out")
    assert result.exit_code == MACHINE, result.output
    assert_clean_error(result, "output folder /proc/self/out is under /proc")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="permissions do not bind root")
def test_a_read_only_cache_folder_is_refused_before_the_work(tmp_path, monkeypatch, doc):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o555)
    monkeypatch.setenv("DOCAUDIT_CACHE", str(cache))
    result = within(HANG_GUARD, run, "score", doc)
    assert result.exit_code == MACHINE, result.output
    assert_clean_error(result, f"cache folder {cache} cannot be written: permission denied")


def test_a_folder_refused_mid_run_is_one_line_and_nothing_is_published(tmp_path, monkeypatch):
    """The output folder's place made read-only after the checks: the staging folder goes, ``out`` stays absent."""
    from docaudit import outputs

    out = tmp_path / "out"

    def refused(src, dst):
        raise PermissionError(errno.EACCES, "Permission denied", str(src), None, str(dst))

    monkeypatch.setattr(outputs.os, "rename", refused)
    with pytest.raises(PermissionError) as raised, outputs.staged_dir(out, "probe") as staging:
        docaudit_io.atomic_write_text(staging / "probe.json", "{}")
    status, printed = reported(raised.value)
    assert status == MACHINE and f"-> {out}: permission denied" in printed
    assert os.listdir(tmp_path) == []


def test_cache_info_walks_no_link_and_stops_counting(tmp_path, monkeypatch):
    """``DOCAUDIT_CACHE=/`` walked into ``/proc/1/cwd`` (permission denied, exit 70): links are not followed,
    other file systems not entered, and the count stops at its limit."""
    from docaudit.query import cache_entries

    root = tmp_path / "cache"
    (root / "a").mkdir(parents=True)
    (root / "a" / "loop").symlink_to(root)
    (root / "proc").symlink_to("/proc")
    for i in range(5):
        (root / "a" / f"f{i}").write_text("x")
    found = cache_entries.summary(root)["other"]
    assert found["files"] == 7 and not found["more"]
    monkeypatch.setattr(cache_entries, "CACHE_SCAN_LIMIT", 3)
    found = cache_entries.summary(root)["other"]
    assert found["files"] == 3 and found["more"]


def test_a_full_disk_while_an_output_is_staged_names_the_output_folder(tmp_path):
    """A write that names no file (pandas, matplotlib, a close that finds the disk full) names ``--out``."""
    from docaudit import outputs

    out = tmp_path / "out"
    with pytest.raises(OSError) as raised, outputs.staged_dir(out, "probe"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    status, printed = reported(raised.value)
    assert status == MACHINE and printed.startswith(f"error: cannot use {out}: the disk is full")
    assert os.listdir(tmp_path) == []
