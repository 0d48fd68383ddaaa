"""Benchmark-size inputs: a document that cannot be used is skipped, named and counted, never silently dropped
and never the end of the run; ``--strict`` makes it an error."""

import json
import os

import pytest
from conftest import CORPUS
from test_cli import assert_clean_error, run

N_PER_SET = 1500
CREDITS = (
    "Produced by Jane Roe, Richard Doe and the Online Distributed\nProofreading Team at https://www.pgdp.net\n\n"
    "E-text prepared by the Project Gutenberg volunteers\n"
)
BAD = {  # file name -> (content, kind)
    "0100_credits.txt": (CREDITS.encode(), "no text left after cleaning"),
    "0200_empty.txt": (b"", "empty"),
    "0300_blank.txt": (b"  \n\n \t\n", "empty"),
    "0400_binary.txt": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
    "0500_latin1.txt": ("caf\xe9 cr\xe8me".encode("latin-1"), "not UTF-8"),
}


def snippet_sets(root, n=N_PER_SET):
    """Two sets of ``n`` 60-word snippets of real books (one set from members, one from non-members)."""
    dirs = {}
    for group, name in (("members", "a"), ("nonmembers", "b")):
        words = []
        for path in sorted((CORPUS / group).glob("*.txt"))[:8]:
            words += path.read_text(encoding="utf-8")[20_000:150_000].split()
        d = root / name
        d.mkdir()
        for i in range(n):
            (d / f"{i:04d}.txt").write_text(" ".join(words[i * 60 : (i + 1) * 60]))
        dirs[name] = d
    return dirs


def add_bad(d):
    for name, (content, _) in BAD.items():
        (d / name).write_bytes(content)
    os.symlink("0600_loop.txt", d / "0600_loop.txt")
    return {str(d / name): kind for name, (_, kind) in BAD.items()} | {str(d / "0600_loop.txt"): "unreadable"}


@pytest.mark.slow
def test_data_check_skips_unusable_documents_of_a_large_set(tmp_path):
    sets = snippet_sets(tmp_path)
    bad = add_bad(sets["a"])
    result = run("data", "check", sets["a"], sets["b"], "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["n_a"] == out["n_b"] == N_PER_SET
    assert {s["file"]: s["kind"] for s in out["skipped"]} == bad
    reasons = {os.path.basename(s["file"]): s["reason"] for s in out["skipped"]}
    assert reasons["0100_credits.txt"] == "no text left after cleaning" and "symlink loop" in reasons["0600_loop.txt"]
    assert "NUL" in reasons["0400_binary.txt"] and "byte 0xe9" in reasons["0500_latin1.txt"]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: skipped")]
    assert sorted(warnings) == sorted(
        [
            f"warning: skipped 1 document (no text left after cleaning): {sets['a'] / '0100_credits.txt'}",
            f"warning: skipped 2 documents (empty): {sets['a'] / '0200_empty.txt'}, {sets['a'] / '0300_blank.txt'}",
            f"warning: skipped 1 document (binary): {sets['a'] / '0400_binary.txt'}",
            f"warning: skipped 1 document (not UTF-8): {sets['a'] / '0500_latin1.txt'}",
            f"warning: skipped 1 document (unreadable): {sets['a'] / '0600_loop.txt'}",
        ]
    )

    strict = run("data", "check", sets["a"], sets["b"], "--strict")
    assert_clean_error(strict, "0100_credits.txt: no text left after cleaning")


def test_text_output_counts_skips_and_all_unusable_fails(tmp_path):
    sets = snippet_sets(tmp_path, n=6)
    add_bad(sets["b"])
    result = run("data", "check", sets["a"], sets["b"])
    assert result.exit_code == 0, result.output
    assert "skipped 6 documents that cannot be used" in result.stdout

    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    add_bad(only_bad)
    assert_clean_error(run("data", "check", sets["a"], only_bad), "none of the 6 documents in")
    assert_clean_error(run("score", only_bad / "0100_credits.txt"), "0100_credits.txt: no text left after cleaning")


@pytest.fixture()
def docs_with_bad(tmp_path):
    sets = snippet_sets(tmp_path, n=4)
    (sets["a"] / "0100_credits.txt").write_text(CREDITS)
    (sets["a"] / "0200_one_token.txt").write_text("a")
    return sets


def test_score_skips_unusable_documents_by_name(docs_with_bad, tiny_gpt2):
    d = docs_with_bad["a"]
    options = ("--model", tiny_gpt2, "--methods", "loss,zlib", "--context", "64", "--format", "json")
    result = run("score", *options, d)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    scored = [r for r in rows if "skipped" not in r]
    good = sorted(p for p in d.iterdir() if p.name not in ("0100_credits.txt", "0200_one_token.txt"))
    alone = json.loads(run("score", *options, *good).stdout)["rows"]  # the usable documents, scored without the others
    assert [(r["file"], r["loss"], r["zlib"]) for r in scored] == [(r["file"], r["loss"], r["zlib"]) for r in alone]
    assert len(scored) == 4
    assert {os.path.basename(r["file"]): r["skipped"] for r in rows if "skipped" in r} == {
        "0100_credits.txt": "no text left after cleaning",
        "0200_one_token.txt": "too short: 1 token (a document needs at least 2 to be queried)",
    }
    assert "warning: skipped 1 document (too short)" in result.stderr
    assert_clean_error(run("score", "--model", tiny_gpt2, "--context", "64", "--strict", d), "0100_credits.txt")
    assert_clean_error(
        run("score", "--model", tiny_gpt2, "--context", "64", d / "0200_one_token.txt"),
        "0200_one_token.txt: too short: 1 token",
    )


def test_train_and_evaluate_list_skipped_documents(docs_with_bad, tiny_gpt2, tmp_path):
    sets = docs_with_bad
    fast = ["--context", "16", "--trees", "10", "--bins", "20", "--folds", "2"]
    result = run(
        "train",
        "--members",
        sets["a"],
        "--nonmembers",
        sets["b"],
        "--model",
        tiny_gpt2,
        *fast,
        "--norm",
        "max_tf",
        "--features",
        "hist",
        "--out",
        tmp_path / "clf",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    assert card["n_members"] == card["n_nonmembers"] == 4 and card["n_skipped"] == 2
    assert sorted(os.path.basename(s["file"]) for s in card["skipped"]) == ["0100_credits.txt", "0200_one_token.txt"]

    result = run("predict", "--classifier", tmp_path / "clf", "--format", "json", sets["a"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert sum("verdict" in r for r in rows) == 4
    assert {os.path.basename(r["file"]) for r in rows if "skipped" in r} == {"0100_credits.txt", "0200_one_token.txt"}

    evaluate = ["evaluate", "--members", sets["a"], "--nonmembers", sets["b"], "--model", tiny_gpt2, *fast[:2]]
    evaluate += ["--methods", "loss", "--no-meta", "--no-blind", "--folds", "2"]
    result = run(*evaluate)
    assert result.exit_code == 0, result.output
    assert "4 members, 4 non-members (2 skipped)" in result.stdout
    assert_clean_error(run(*evaluate, "--strict"), "no text left after cleaning")


@pytest.mark.slow
def test_report_skips_books_that_cannot_be_used(docs_with_bad, tiny_gpt2, tmp_path):
    sets, out = docs_with_bad, tmp_path / "rep"
    result = run(
        "report",
        sets["a"],
        "--calibrate-members",
        sets["a"],
        "--calibrate-nonmembers",
        sets["b"],
        "--model",
        tiny_gpt2,
        "--snippets",
        "2",
        "--snippet-words",
        "20",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "4 books, 4 + 4 calibration books (4 skipped)" in result.stdout
    info = json.loads((out / "report.json").read_text())["info"]
    assert sorted(os.path.basename(s["file"]) for s in info["skipped"]) == [
        "0100_credits.txt",
        "0100_credits.txt",
        "0200_one_token.txt",
        "0200_one_token.txt",
    ]
