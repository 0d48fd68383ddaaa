"""Defects a hostile user found: bad values given as bad input before any work (seeds out of range, trap ids no
file can be named after), a count too large for a float, a forged weights memo, cells a spreadsheet would run,
characters a terminal would act on, a skops archive of a million members, and tables with skipped rows."""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import within
from test_cli import assert_clean_error, run

from docaudit.errors import USAGE, DocauditError

HANG_GUARD = 30


@pytest.mark.parametrize("seed", ["-1", "12345678901234567890123"])
@pytest.mark.parametrize("command", ["train", "evaluate", "score"])
def test_a_seed_out_of_range_is_a_usage_error_before_any_work(tmp_path, doc, command, seed):
    """Before, ``--seed -1`` or a 23-digit seed failed as an internal error (70) after seconds of work."""
    args = {
        "train": ["--members", doc.parent, "--nonmembers", doc.parent, "--out", tmp_path / "out"],
        "evaluate": ["--members", doc.parent, "--nonmembers", doc.parent],
        "score": [doc],
    }[command]
    result = within(HANG_GUARD, run, command, *args, "--seed", seed)
    assert result.exit_code == USAGE, result.output
    assert_clean_error(result, "is not in the range 0<=x<=4294967295")


def test_a_seed_out_of_range_is_refused_by_the_api():
    from docaudit.run import RunContext

    for seed in (-1, 2**32, 10**22, 1.5):
        with pytest.raises(DocauditError, match="--seed"):
            RunContext(seed=seed)
    assert RunContext(seed=2**32 - 1).seed == 2**32 - 1


def test_thousands_of_traps_in_one_document_have_a_smallest_p_value():
    """``traps detect`` with 9,000 traps in one document failed with an OverflowError: C(18000, 9000) is no
    float."""
    from docaudit.inference.permutation import smallest_p

    assert smallest_p(9000, 9000) == 0.0
    assert smallest_p(3, 3) == pytest.approx(1 / 20)
    assert 0.0 < smallest_p(400, 400) < 1e-200


@pytest.mark.parametrize("doc_id", ["a\x00b", "x" * 5000, "sub/dir", "line\nbreak"])
def test_a_trap_id_no_file_can_be_named_after_is_refused_before_any_work(tmp_path, doc_id):
    """Before, an id holding NUL failed after 254 s of generation, one of 5,000 characters after 178 s ("File name
    too long"). The model named does not exist: the id is refused before it would be loaded."""
    from docaudit.audit.traps import make_traps
    from docaudit.config import ModelConfig, TrapConfig
    from docaudit.corpus.base import Document
    from docaudit.corpus.traps import read_registry

    document = Document(id=doc_id, path="", text="Some words of a book. " * 50, sha256="0" * 64)
    missing = ModelConfig(model=str(tmp_path / "no-such-model"))
    with pytest.raises(DocauditError, match="is not a usable name"):
        within(HANG_GUARD, make_traps, [document], missing, TrapConfig(), 0)
    entry = {"id": doc_id, "traps": [{"text": "a trap"}], "controls": [{"text": "a control"}]}
    (tmp_path / "registry.json").write_text(json.dumps({"format": "docaudit-trap-registry/1", "documents": [entry]}))
    with pytest.raises(DocauditError, match="is not a usable name"):
        read_registry(tmp_path / "registry.json")


def test_a_forged_memo_cannot_change_a_models_identity(tiny_gpt2, tiny_llama, tmp_path):
    """A memo naming another model's weights made ``score --model OTHER`` report that model's identity and
    statistics (status 0)."""
    from docaudit.config import ModelConfig
    from docaudit.query.cache import cache_root
    from docaudit.query.models import load_model
    from docaudit.query.sources import resolve_source, weights_hash

    truth = weights_hash(Path(tiny_llama), memo=False)
    memos = cache_root() / "weights-hash"
    shutil.rmtree(memos, ignore_errors=True)
    resolve_source(str(tiny_llama))  # writes the llama's memo
    (memo,) = memos.glob("*.txt")
    memo.write_text(weights_hash(Path(tiny_gpt2), memo=False))  # forged: the GPT-2's digest in its place
    loaded = load_model(ModelConfig(model=str(tiny_llama)))
    assert loaded.identity == f"local@{truth[:16]}"
    doc = tmp_path / "book.txt"
    doc.write_text("It was the best of times, it was the worst of times. " * 20)
    result = run("score", doc, "--model", tiny_llama, "--methods", "loss", "--context", "16", "--format", "json")
    assert result.exit_code == 0, result.output
    assert truth[:16] in json.dumps(json.loads(result.stdout)["model"])


def test_csv_cells_a_spreadsheet_would_run_are_made_text(tmp_path):
    """``report.csv`` and ``snippets.csv`` wrote ``book`` cells beginning with ``=`` or ``@``."""
    from docaudit.io import csv_text, write_csv

    frame = pd.DataFrame(
        {
            "book": ['=HYPERLINK("http://x")', "@SUM(A1)", "+1", "-1+2", "\tx", "plain", None],
            "score": [-1.5, 2.0, 3.0, -4.0, 5.0, 7.0, 8.0],
        }
    )
    write_csv(frame, tmp_path / "report.csv")
    for text in (csv_text(frame), (tmp_path / "report.csv").read_text()):
        back = pd.read_csv(io.StringIO(text), keep_default_na=False)
        assert not any(str(v).startswith(("=", "+", "-", "@", "\t", "\r")) for v in back["book"])
        assert back["book"].tolist()[:2] == ['\'=HYPERLINK("http://x")', "'@SUM(A1)"]
        assert back["score"].tolist() == frame["score"].tolist()  # numbers stay numbers


def test_every_csv_docaudit_writes_goes_through_the_safe_writer():
    package = Path(__file__).resolve().parents[1] / "docaudit"
    found = [
        f"{p.relative_to(package)}:{n}"
        for p in sorted(package.rglob("*.py"))
        if p.name != "io.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\.to_csv\((?!\))", line)  # a DataFrame's (a manifest row's own to_csv() is no CSV)
    ]
    assert not found, "write CSV through docaudit.io.write_csv or csv_text: " + ", ".join(found)


def test_a_terminal_table_shows_control_and_bidi_characters_as_escapes(tmp_path, tiny_gpt2):
    """Chapter titles and ids passed U+202E (a bidi override) and BEL to the terminal."""
    from docaudit.cli.echo import terminal_safe

    assert terminal_safe("a\u202eb\x07c\x1b[2Jd\re\tf\ng") == "a\\u202eb\\x07c\\x1b[2Jd\\re\tf\ng"
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "evil\u202etxt.\x07.txt").write_text("It was the best of times, it was the worst of times. " * 10)
    result = run("score", folder, "--model", tiny_gpt2, "--methods", "loss", "--context", "8")
    assert result.exit_code == 0, result.output
    assert "\u202e" not in result.stdout and "\x07" not in result.stdout
    assert "evil\\u202etxt.\\x07.txt" in result.stdout


def test_a_skops_archive_of_absurdly_many_members_is_refused_before_its_directory_is_read(tmp_path):
    """A classifier.skops of a million empty members (90 MB) was accepted after 39 s and 1.09 GB."""
    from docaudit.config import DEFAULT_CLASSIFIER
    from docaudit.methods.meta.persistence import load_classifier
    from docaudit.untrusted import member_limit, members_problem

    folder = Path(shutil.copytree(DEFAULT_CLASSIFIER, tmp_path / "clf"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i in range(30_000):
            archive.writestr(f"{i}", b"")
    (folder / "classifier.skops").write_bytes(buffer.getvalue())
    assert 30_000 > member_limit(len(buffer.getvalue()))
    with pytest.raises(DocauditError, match="holds 30,000 members, more than the"):
        within(HANG_GUARD, load_classifier, folder)
    shipped = (DEFAULT_CLASSIFIER / "classifier.skops").read_bytes()  # 2,508 members
    assert members_problem(io.BytesIO(shipped), len(shipped)) is None


def test_a_table_with_a_skipped_row_prints_whole_numbers_and_no_nan(tmp_path, tiny_gpt2):
    """A skipped row made pandas print every integer column as ``586.0000`` and the missing cells as NaN."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "book.txt").write_text("It was the best of times, it was the worst of times. " * 10)
    (folder / "empty.txt").write_text("   \n")
    result = run("score", folder, "--model", tiny_gpt2, "--methods", "loss", "--context", "8")
    assert result.exit_code == 0, result.output
    header, *rows = [line.split() for line in result.stdout.strip().splitlines()[-3:]]
    book = dict(zip(header, next(r for r in rows if r[0].endswith("book.txt"))))
    assert book["n_tokens"].isdigit() and book["context"] == "8", result.stdout
    assert "NaN" not in result.stdout and "nan" not in result.stdout
    empty = dict(zip(header, next(r for r in rows if r[0].endswith("empty.txt"))))
    assert empty["n_tokens"] == "-"
