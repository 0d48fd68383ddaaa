"""Output folders under pressure: a user's files at any depth of an earlier output, a run killed while writing,
two runs publishing the same folder at once."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import assert_clean_error, run

from docaudit.errors import DocauditError
from docaudit.outputs import OUTPUT_MARKER, discard_output, prepare_output, record_files, staged_dir, write_marker

REPO = Path(__file__).resolve().parents[1]


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def lab_like(out: Path) -> Path:
    """A folder written as the lab writes its own: marked first, then each step's files recorded."""
    out.mkdir()
    write_marker(out, "lab", ["target", "members", "lab.json"], [])
    (out / "target" / "model").mkdir(parents=True)
    (out / "target" / "model" / "weights.bin").write_bytes(b"w" * 16)
    (out / "members").mkdir()
    (out / "members" / "a.txt").write_text("a member\n")
    (out / "lab.json").write_text("{}")
    record_files(out, out / "target" / "model", out / "members" / "a.txt", out / "lab.json")
    return out


def test_overwrite_refuses_a_users_file_at_any_depth_and_deletes_only_its_own(tmp_path):
    out = lab_like(tmp_path / "lab")
    (out / "members" / "NOTES.md").write_text("my notes\n")
    (out / "target" / "my_analysis.ipynb").write_text("{}")
    (out / "target" / "plots").mkdir()
    before = snapshot(out)
    with pytest.raises(
        DocauditError, match=r"did not write \(members/NOTES.md, target/my_analysis.ipynb, target/plots/"
    ):
        prepare_output(out, "lab", overwrite=True, resume=True)
    assert snapshot(out) == before
    discard_output(out)  # were it called anyway: only docaudit's files go
    assert sorted(snapshot(out)) == ["members/NOTES.md", "target/my_analysis.ipynb"]
    assert (out / "target" / "plots").is_dir() and not (out / "target" / "model").exists()


def test_a_marker_cannot_delete_through_a_link_or_outside_its_folder(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine\n")
    out = tmp_path / "ev"
    out.mkdir()
    (out / "sub").symlink_to(outside, target_is_directory=True)
    (out / OUTPUT_MARKER).write_text(
        json.dumps({"kind": "evaluation", "entries": [], "files": ["sub/keep.txt", "../elsewhere/keep.txt", "/etc/x"]})
    )
    discard_output(out)
    assert (outside / "keep.txt").read_text() == "mine\n"


STAGER = """
import sys, time
from pathlib import Path
from docaudit.outputs import staged_dir
with staged_dir(Path(sys.argv[1]), "evaluation") as tmp:
    (tmp / "evaluation.json").write_text("{}")
    print(tmp, flush=True)
    time.sleep(60)
"""


def start_stager(out: Path) -> tuple[subprocess.Popen, Path]:
    """A process writing ``out`` through a staging folder, stopped in the middle; its staging folder."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", STAGER, str(out)], stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline().strip()
    assert line, "the writing process did not start"
    return proc, Path(line)


def test_a_staging_folder_left_by_a_killed_run_is_removed_by_the_next(tmp_path):
    out = tmp_path / "ev"
    killed, stale = start_stager(out)
    killed.send_signal(signal.SIGKILL)
    killed.wait(30)
    assert stale.is_dir() and stale.name.startswith(".ev.") and (stale / "evaluation.json").is_file()
    live, running = start_stager(out)  # another run, still writing: its folder is left alone
    try:
        assert not stale.exists()  # removed when that run started
        with staged_dir(out, "evaluation") as tmp:
            (tmp / "evaluation.json").write_text("{}")
        assert running.is_dir() and sorted(p.name for p in tmp_path.iterdir()) == sorted([running.name, "ev"])
    finally:
        live.kill()
        live.wait(30)


def test_two_runs_publishing_one_folder_the_second_is_refused(tmp_path):
    """Both checked the folder while it was absent; the first to finish publishes, the second is refused and
    replaces nothing (without --overwrite)."""
    out = tmp_path / "conc"
    first, second = staged_dir(out, "classifier"), staged_dir(out, "classifier")
    a, b = first.__enter__(), second.__enter__()
    (a / "card.json").write_text("first")
    (b / "card.json").write_text("second")
    first.__exit__(None, None, None)
    with pytest.raises(DocauditError, match="was written meanwhile"):
        second.__exit__(None, None, None)
    assert (out / "card.json").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conc"]  # no staging folder left either


def test_overwrite_publishes_over_its_own_earlier_output(tmp_path):
    out = tmp_path / "ev"
    for text in ("one", "two"):
        with staged_dir(out, "evaluation", overwrite=True) as tmp:
            (tmp / "sub").mkdir()
            (tmp / "sub" / "rows.csv").write_text(text)
    assert (out / "sub" / "rows.csv").read_text() == "two"
    assert json.loads((out / OUTPUT_MARKER).read_text())["files"] == ["sub/rows.csv"]


def test_report_with_several_methods_checks_the_folder_of_the_reports(tmp_path, monkeypatch):
    from docaudit import api

    monkeypatch.setattr(api, "report", lambda *a, **k: pytest.fail("the report ran"))
    books = tmp_path / "books"
    books.mkdir()
    for i in range(3):
        (books / f"b{i}.txt").write_text(f"Book {i}, a few words of text.\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("my thesis\n")
    report = ("report", books, "--calibrate-members", books, "--calibrate-nonmembers", books, "--methods", "loss,zlib")
    assert_clean_error(run(*report, "--out", mine), "holds more than the outputs of loss, zlib (thesis.txt)")
    assert_clean_error(run(*report, "--out", books), "is or contains the input")
    monkeypatch.chdir(mine)
    assert_clean_error(run(*report, "--out", "."), "is the current folder or contains it")
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.txt"] and len(list(books.iterdir())) == 3
