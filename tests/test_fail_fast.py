"""Inputs that cannot give a verdict, or cannot be read, are refused before torch or a model loads: a
calibration set too small for any p-value below the level, an empty file, a folder of binary files."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CORPUS

from docaudit import api
from docaudit.audit.specs import ReportSpec
from docaudit.errors import DocauditError

ROOT = Path(__file__).resolve().parents[1]
FRESH = (
    "import sys\nfrom click.testing import CliRunner\nfrom docaudit.cli import main\n"
    "r = CliRunner().invoke(main, sys.argv[1:])\n"
    "print(r.exit_code, 'torch' in sys.modules, 'transformers' in sys.modules)\nprint(r.stderr.strip())\n"
)


def fresh(*args) -> tuple[int, bool, str]:
    """The command run in a new interpreter: its status, whether torch or transformers was imported, its error."""
    done = subprocess.run(
        [sys.executable, "-c", FRESH, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    first, *rest = done.stdout.splitlines()
    status, torch, transformers = first.split()
    return int(status), torch == "True" or transformers == "True", "\n".join(rest)


def books(tmp_path: Path, group: str, n: int) -> Path:
    folder = tmp_path / f"{group}-{n}"
    folder.mkdir()
    for path in sorted((CORPUS / group).glob("*.txt"))[:n]:
        shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture
def book():
    return sorted((CORPUS / "members").glob("*.txt"))[0]


def test_map_with_three_calibration_books_refused_before_loading(tmp_path, book):
    status, loaded, error = fresh("map", book, "--calibrate-nonmembers", books(tmp_path, "nonmembers", 3))
    assert status == 3 and not loaded
    assert error.startswith("error: with 3 calibration non-member book(s) the smallest p-value is 1/4 = 0.25")
    assert "give at least 20" in error


def test_report_says_so_before_loading_at_the_level_per_method(tmp_path, book):
    """A report still gives each book's contamination rate, so it runs; the warning comes before any model loads
    (here the dry run: nothing is loaded)."""
    members, nonmembers = books(tmp_path, "members", 3), books(tmp_path, "nonmembers", 3)
    args = ("report", book, "--calibrate-members", members, "--calibrate-nonmembers", nonmembers)
    status, loaded, error = fresh(*args, "--out", tmp_path / "out", "--methods", "loss,zlib", "--dry-run")
    assert status == 0 and not loaded and not (tmp_path / "out").exists()
    lines = error.splitlines()
    assert len(lines) == 2 and all(line.startswith("warning: with 3 calibration non-member") for line in lines)
    assert "the level 0.025" in lines[0] and "give at least 40" in lines[0]


@pytest.mark.parametrize("n,refused", [(19, True), (20, False)])
def test_the_boundary_is_the_smallest_attainable_p(tmp_path, book, n, refused):
    request = api.MapRequest([book], [books(tmp_path, "nonmembers", n)])
    if refused:
        with pytest.raises(DocauditError, match="1/20 = 0.05, not below the level 0.05"):
            api.check(request)
    else:
        assert api.check(request)[0].sizes is not None


def test_report_alpha_moves_the_boundary(tmp_path, book):
    members, nonmembers = [books(tmp_path, "members", 3)], [books(tmp_path, "nonmembers", 9)]
    request = api.ReportRequest([book], members, nonmembers, tmp_path / "o", spec=ReportSpec(alpha=0.2))
    assert api.check(request)[0].warnings == []  # 1/10 < 0.2
    (warning,) = api.check(api.ReportRequest([book], members, nonmembers, tmp_path / "o"))[0].warnings
    assert "1/10 = 0.1, not below the level 0.05" in warning and "give at least 20" in warning


def test_unreadable_documents_refused_before_loading(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    status, loaded, error = fresh("predict", empty)
    assert (status, loaded) == (3, False) and error == f"error: {empty}: empty file"
    binary = tmp_path / "binary"
    binary.mkdir()
    for name in ("a.txt", "b.txt"):
        (binary / name).write_bytes(bytes(range(256)) * 8)
    status, loaded, error = fresh("score", binary)
    assert (status, loaded) == (3, False) and "none of the 2 documents" in error
    status, loaded, error = fresh("predict", sorted((CORPUS / "members").glob("*.txt"))[0], "--alpha", "2")
    assert (status, loaded) == (3, False) and "--alpha" in error
