"""Input folders built here that try to make docaudit read what it should not: a link to a file outside the folder
(a credentials file), a FIFO or kernel file that never ends, a file swapped after it was checked."""

import os
import pathlib

import pytest
from conftest import within

from docaudit.corpus.base import DocumentError, Skips
from docaudit.corpus.documents import OUTSIDE_LINK, expand_paths, load_documents, read_text

HANG_GUARD = 20  # seconds: a guard that turns a hang into a failure; every read here takes milliseconds

SECRET = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"


@pytest.fixture
def docsdir(tmp_path):
    """A folder with one book, a link to another book inside it, and a link to a credentials file outside it."""
    home = tmp_path / "home" / ".aws"
    home.mkdir(parents=True)
    (home / "credentials").write_text(SECRET)
    docs = tmp_path / "docsdir"
    (docs / "sub").mkdir(parents=True)
    (docs / "book.txt").write_text("It was the best of times, it was the worst of times.\n")
    (docs / "sub" / "other.txt").write_text("Call me Ishmael. Some years ago, never mind how long.\n")
    (docs / "again.txt").symlink_to(pathlib.Path("sub") / "other.txt")
    (docs / "notes.txt").symlink_to(home / "credentials")
    return docs


def test_a_link_out_of_an_input_folder_is_a_named_skip_and_never_read(docsdir):
    skips = Skips()
    docs = load_documents([docsdir], skips=skips)
    assert sorted(pathlib.Path(d.path).name for d in docs) == ["again.txt", "book.txt"]  # the link within is read
    assert all(SECRET.strip() not in d.text for d in docs)
    (skipped,) = skips.items
    assert skipped.file == str(docsdir / "notes.txt") and skipped.kind == OUTSIDE_LINK
    assert "outside its folder: not read (name the file itself to read it)" in skipped.reason
    with pytest.raises(DocumentError, match="notes.txt: a symbolic link to .*credentials, outside its folder"):
        load_documents([docsdir])  # without skips (--strict) it is the error


def test_a_file_named_by_the_user_is_read_through_its_link(docsdir):
    """Naming the link itself is the user's choice: it is followed."""
    (doc,) = load_documents([docsdir / "notes.txt"])
    assert doc.text.strip() == SECRET.strip()
    outside = {}
    files = expand_paths([docsdir, docsdir.parent / "home" / ".aws" / "credentials"], outside)
    assert list(outside) == [docsdir / "notes.txt"] and len(files) == 4  # the file named is not a duplicate


def test_a_score_run_never_reads_a_link_out_of_its_folder(docsdir, tiny_gpt2):
    import json

    from test_cli import run

    result = run("score", docsdir, "--model", tiny_gpt2, "--methods", "loss", "--context", "8", "--format", "json")
    assert result.exit_code == 0, result.output
    assert SECRET.strip() not in result.output
    rows = {pathlib.Path(r["file"]).name: r for r in json.loads(result.stdout)["rows"]}
    assert sorted(rows) == ["again.txt", "book.txt", "notes.txt"] and "loss" in rows["book.txt"]
    assert "outside its folder: not read" in rows["notes.txt"]["skipped"] and "loss" not in rows["notes.txt"]
    assert f"skipped 1 document ({OUTSIDE_LINK}): {docsdir / 'notes.txt'}" in result.stderr


def test_a_fifo_swapped_in_after_the_check_does_not_hang(tmp_path, monkeypatch):
    """The file is regular when checked, a FIFO without a writer when opened: the descriptor is checked again."""
    fifo = tmp_path / "book.txt"
    os.mkfifo(fifo)
    regular = tmp_path / "regular.txt"
    regular.write_text("text")
    real_stat = pathlib.Path.stat
    monkeypatch.setattr(pathlib.Path, "stat", lambda self, **kw: real_stat(regular if self == fifo else self, **kw))
    with pytest.raises(DocumentError, match="book.txt: not a file"):
        within(HANG_GUARD, read_text, fifo)


def test_a_link_to_a_fifo_or_device_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for target in (fifo, pathlib.Path("/dev/zero")):
        link = tmp_path / f"{target.name}.txt"
        link.symlink_to(target)
        with pytest.raises(DocumentError, match="not a file"):
            within(HANG_GUARD, read_text, link)


@pytest.mark.skipif(not os.access("/proc/kmsg", os.R_OK), reason="/proc/kmsg is readable only by root")
def test_a_link_to_proc_kmsg_is_refused_without_blocking(tmp_path):
    """``/proc/kmsg`` is a regular file of size 0 whose read waits for the next kernel message."""
    link = tmp_path / "kmsg.txt"
    link.symlink_to("/proc/kmsg")
    with pytest.raises(DocumentError, match="reading it would wait for data"):
        within(HANG_GUARD, read_text, link)


# --- file names that are not UTF-8 ---------------------------------------------------------------------------------


@pytest.fixture
def latin1_sets(tmp_path):
    """Members and non-members, one member named ``caf\\xe9.txt`` in Latin-1 (not valid UTF-8)."""
    from conftest import corpus_ids, corpus_text

    for group, name in (("members", "m"), ("nonmembers", "n")):
        (tmp_path / name).mkdir()
        for book in corpus_ids(group, 6):
            (tmp_path / name / f"{book}.txt").write_text(corpus_text(group, book, n_chars=800))
    first = sorted((tmp_path / "m").iterdir())[0]
    os.rename(first, os.fsencode(tmp_path / "m") + b"/caf\xe9.txt")
    return tmp_path / "m", tmp_path / "n"


@pytest.mark.slow
def test_a_file_name_that_is_not_utf8_is_shown_escaped(latin1_sets, tiny_gpt2, tmp_path):
    import csv
    import io
    import json

    from test_cli import run

    members, nonmembers = latin1_sets
    shown = f"{members}/caf\\xe9.txt"
    common = ("--model", tiny_gpt2, "--context", "16", "--max-tokens", "48")
    score = ("score", members, *common, "--methods", "loss", "--format")
    table, as_csv, as_json = (run(*score, fmt) for fmt in ("table", "csv", "json"))
    assert table.exit_code == as_csv.exit_code == as_json.exit_code == 0, table.output + as_csv.output
    assert shown in table.stdout
    assert shown in {r["file"] for r in csv.DictReader(io.StringIO(as_csv.stdout))}
    assert shown in {r["file"] for r in json.loads(as_json.stdout)["rows"]}
    sets = ("--members", members, "--nonmembers", nonmembers)
    evaluated = run(
        "evaluate", *sets, *common, "--methods", "loss", "--no-meta", "--folds", "2", "--out", tmp_path / "ev"
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert shown in (tmp_path / "ev" / "documents.csv").read_text(encoding="utf-8")
    trained = run("train", *sets, *common, "--folds", "2", "--trees", "10", "--norm", "none", "--features", "agg",
                  "--out", tmp_path / "clf")  # fmt: skip
    assert trained.exit_code == 0, trained.output
    assert shown in (tmp_path / "clf" / "predictions.csv").read_text(encoding="utf-8")


# --- datasets, manifests and config files: the check and the read are one operation -------------------------------


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.csv", "manifest.csv", "settings.toml"])
def test_a_fifo_where_a_regular_file_was_checked_is_refused_without_blocking(tmp_path, monkeypatch, name):
    """Every ``is_file`` check says yes (as when the file is swapped after the check): the read itself refuses a
    FIFO without a writer, on one line, instead of waiting for it."""
    from docaudit.cli.config_file import ConfigError, read_config_file
    from docaudit.corpus.datasets import DatasetSource, read_dataset
    from docaudit.corpus.manifest import read_manifest
    from docaudit.errors import DocauditError

    fifo = tmp_path / name
    os.mkfifo(fifo)
    monkeypatch.setattr(pathlib.Path, "is_file", lambda self: True)
    reader = {"manifest.csv": read_manifest, "settings.toml": read_config_file}.get(
        name, lambda p: read_dataset(DatasetSource(str(p)))
    )
    with pytest.raises((DocauditError, ConfigError), match="not a regular file"):
        within(HANG_GUARD, reader, fifo)


def test_an_oversized_config_or_dataset_is_refused_by_size(tmp_path, monkeypatch):
    from docaudit.cli.config_file import ConfigError, read_config_file
    from docaudit.config import READ_LIMITS
    from docaudit.corpus.datasets import DatasetSource, read_dataset
    from docaudit.errors import DocauditError

    big = tmp_path / "settings.toml"
    big.write_text("# " + "x" * 200 + "\n")
    monkeypatch.setitem(READ_LIMITS, "config", 100)
    with pytest.raises(ConfigError, match="over 100 bytes"):
        read_config_file(big)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"text": "' + "word " * 100 + '", "label": 1}\n')
    monkeypatch.setitem(READ_LIMITS, "document", 100)
    with pytest.raises(DocauditError, match="over the limit of 100 bytes"):
        read_dataset(DatasetSource(str(rows)))
