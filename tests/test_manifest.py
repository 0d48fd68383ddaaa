"""Manifests: the shipped manifests validate and match the shared corpus; validation and the cutoff rules."""

from __future__ import annotations

import csv
import datetime as dt
import pathlib
import subprocess
import sys

import pytest
from conftest import CORPUS

from docaudit.corpus.manifest import (
    COLUMNS,
    ManifestRow,
    build_manifest,
    posted_interval,
    read_manifest,
    verify_files,
    write_manifest,
)
from docaudit.errors import DocauditError

REPO = pathlib.Path(__file__).resolve().parents[1]
MANIFESTS = REPO / "data_manifests"


@pytest.mark.parametrize("name", ["shared_corpus.csv", "pg19_vs_post2024.csv"])
def test_shipped_manifests_validate(name):
    path = MANIFESTS / name
    with open(path, newline="", encoding="utf-8") as fh:
        assert tuple(csv.DictReader(fh).fieldnames) == COLUMNS
    rows = read_manifest(path)
    assert len(rows) == 400 and len({r.id for r in rows}) == 400
    assert sum(r.is_member for r in rows) == 250
    assert {r.group for r in rows if r.is_member} == {"pg19"}
    assert {r.group for r in rows if not r.is_member} == {"post2024"}
    assert all(r.language == "en" and r.path.endswith(f"/{r.id}.txt") for r in rows)
    assert all(1850 <= r.pub_year <= 1910 for r in rows if r.is_member)
    if name == "shared_corpus.csv":
        assert all(len(r.sha256) == 64 and r.n_bytes > 0 and r.source == "shared_corpus" for r in rows)
    else:  # for fetching current copies: no fixed bytes
        assert all(r.sha256 == "" and r.n_bytes is None and r.source == "gutenberg" for r in rows)


def test_shared_corpus_hashes_match_the_files():
    rows = read_manifest(MANIFESTS / "shared_corpus.csv")
    assert verify_files(rows, CORPUS) == []
    with open(CORPUS / "catalog.csv", newline="", encoding="utf-8") as fh:
        catalog = {r["id"]: r for r in csv.DictReader(fh)}
    assert {r.id: r.sha256 for r in rows} == {i: c["sha256"] for i, c in catalog.items()}


@pytest.mark.parametrize(
    "name,extra",
    [("shared_corpus.csv", ["--source", "shared_corpus"]), ("pg19_vs_post2024.csv", ["--no-hashes"])],
)
def test_shipped_manifests_are_rebuilt_by_the_script(tmp_path, name, extra):
    out = tmp_path / name
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "artifacts" / "build_manifest.py"),
            "--catalog",
            str(CORPUS / "catalog.csv"),
            "--cutoff",
            "2024-09-01",
            "--out",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "400 books (250 members, 150 non-members)" in proc.stdout
    assert out.read_text(encoding="utf-8") == (MANIFESTS / name).read_text(encoding="utf-8")


def test_verify_files_reports_problems(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"hello")
    (tmp_path / "b.txt").write_bytes(b"hello")
    sha_hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    rows = [
        ManifestRow("a", "member", sha256=sha_hello, n_bytes=5, path="a.txt"),
        ManifestRow("b", "member", sha256="0" * 64, path="b.txt"),
        ManifestRow("c", "nonmember", path="c.txt"),
        ManifestRow("d", "nonmember", n_bytes=3, path="a.txt"),
    ]
    problems = verify_files(rows, tmp_path)
    assert len(problems) == 3
    assert problems[0].startswith("b:") and "sha256" in problems[0]
    assert problems[1].startswith("c:") and "missing" in problems[1]
    assert problems[2].startswith("d:") and "5 bytes" in problems[2]


def write_csv(path: pathlib.Path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_validation_errors(tmp_path):
    good = ["1", "gutenberg", "g", "member", "T", "A", "en", "2001", "1900", "", "", "1.txt"]

    def bad(rows, header=COLUMNS):
        return write_csv(tmp_path / "m.csv", header, rows)

    assert read_manifest(bad([good]))[0] == ManifestRow(
        id="1",
        label="member",
        source="gutenberg",
        group="g",
        title="T",
        author="A",
        language="en",
        pg_posted="2001",
        pub_year=1900,
        path="1.txt",
    )
    cases = [
        ([good, good], "duplicate id 1"),
        ([[*good[:3], "maybe", *good[4:]]], "label must be"),
        ([["", *good[1:]]], "empty id"),
        ([[*good[:9], "abc", *good[10:]]], "sha256"),
        ([[*good[:8], "nineteen", *good[9:]]], "pub_year must be an integer"),
        ([[*good[:11], "../escape.txt"]], "path must be relative"),
        ([], "no rows"),
    ]
    for rows, message in cases:
        with pytest.raises(DocauditError, match=message):
            read_manifest(bad(rows))
    with pytest.raises(DocauditError, match="missing column"):
        read_manifest(bad([good[:-1]], header=COLUMNS[:-1]))
    with pytest.raises(DocauditError, match="no such manifest"):
        read_manifest(tmp_path / "nope.csv")


def test_write_then_read_roundtrip(tmp_path):
    rows = [ManifestRow("7", "nonmember", title='Quotes "and", commas', pub_year=1923, n_bytes=10)]
    write_manifest(rows, tmp_path / "sub" / "m.csv")
    assert read_manifest(tmp_path / "sub" / "m.csv") == rows
    with pytest.raises(DocauditError, match="duplicate"):
        write_manifest(rows * 2, tmp_path / "m2.csv")
    assert not (tmp_path / "m2.csv").exists()


def test_posted_interval():
    assert posted_interval("1992") == (dt.date(1992, 1, 1), dt.date(1992, 12, 31))
    assert posted_interval("2024-02") == (dt.date(2024, 2, 1), dt.date(2024, 2, 29))
    assert posted_interval("2024-12") == (dt.date(2024, 12, 1), dt.date(2024, 12, 31))
    assert posted_interval("2024-09-13") == (dt.date(2024, 9, 13),) * 2
    assert posted_interval("soon") is None


def test_build_manifest_cutoff_rules(tmp_path):
    catalog = write_csv(
        tmp_path / "catalog.csv",
        ["id", "group", "pg_posted", "language", "pg19_pubyear", "file"],
        [
            ["1", "pg19", "2005-03-01", "English", "1890", "members/1.txt"],
            ["2", "post2024", "2024-09", "English", "", "nonmembers/2.txt"],
            ["3", "post2024", "2024-08", "English", "", ""],
            ["4", "other", "2024", "French", "", ""],
            ["5", "post2024", "2024-09-01", "English", "", ""],
            ["6", "pg19", "2025-01-02", "English", "1900", ""],
            ["7", "other", "", "English", "", ""],
        ],
    )
    rows, excluded = build_manifest(catalog, "2024-09-01")
    assert [(r.id, r.label) for r in rows] == [("1", "member"), ("2", "nonmember"), ("5", "nonmember")]
    assert rows[0].pub_year == 1890 and rows[0].language == "en" and rows[0].path == "members/1.txt"
    assert rows[2].path == "5.txt"
    assert set(excluded) == {"3", "4", "6", "7"}
    assert "not in group pg19" in excluded["3"] and "straddles" in excluded["4"] and "after the cutoff" in excluded["6"]
    rows, excluded = build_manifest(catalog, "2024-09-01", members_group=None)  # membership by date alone
    assert {r.id: r.label for r in rows} == {
        "1": "member",
        "2": "nonmember",
        "3": "member",
        "5": "nonmember",
        "6": "nonmember",
    }
    with pytest.raises(DocauditError, match="cutoff must be a date"):
        build_manifest(catalog, "September")
