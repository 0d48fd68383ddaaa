"""The same text as a member and as a non-member is refused by every labelled command, or left out of both sets with
--drop-duplicates and counted in the output."""

import json

import pytest
from conftest import corpus_ids, corpus_text
from test_cli import FAST, assert_clean_error, run

from docaudit.inference.verdicts import EVIDENCE, INCONCLUSIVE, NO_EVIDENCE

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture()
def sets(tmp_path):
    """5 members and 5 non-members, one of the non-members a copy of a member with Windows line ends (the same text
    once cleaned)."""
    dirs = {}
    for group, label in (("members", "mem"), ("nonmembers", "non")):
        d = tmp_path / label
        d.mkdir()
        for book in corpus_ids(group, 5 if label == "mem" else 4):
            (d / f"{book}.txt").write_text(corpus_text(group, book, n_chars=1200))
        dirs[label] = d
    copied = sorted(dirs["mem"].iterdir())[1]
    (dirs["non"] / "copy.txt").write_bytes(copied.read_text().replace("\n", "\r\n").encode())
    dirs["copied"] = copied
    return dirs


def assert_refused(result, sets):
    assert_clean_error(result, "1 document is both in the")
    assert sets["copied"].name in result.stderr and "copy.txt" in result.stderr and "--drop-duplicates" in result.stderr


def assert_dropped(record, sets):
    assert record["documents"] == 1
    assert sorted(record["files"]) == sorted([str(sets["copied"]), str(sets["non"] / "copy.txt")])


def test_data_check(sets):
    args = ["data", "check", sets["mem"], sets["non"], "--folds", "2"]
    assert_refused(run(*args), sets)
    result = run(*args, "--drop-duplicates", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["n_a"] == 4 and report["n_b"] == 4
    assert_dropped(report["duplicates_dropped"], sets)
    text = run(*args, "--drop-duplicates")
    assert "1 document found in both sets left out (2 files)" in text.stdout


def test_evaluate(sets):
    args = ["evaluate", "--methods", "blind", "--members", sets["mem"], "--nonmembers", sets["non"], "--folds", "2"]
    assert_refused(run(*args), sets)
    result = run(*args, "--drop-duplicates", "--format", "json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)["info"]
    assert info["n_members"] == 4 and info["n_nonmembers"] == 4
    assert_dropped(info["duplicates_dropped"], sets)
    assert "1 document found in both sets left out" in run(*args, "--drop-duplicates").stdout


def test_train(sets, tiny_gpt2, tmp_path):
    args = ["train", "--members", sets["mem"], "--nonmembers", sets["non"], "--model", tiny_gpt2, *FAST]
    assert_refused(run(*args, "--out", tmp_path / "clf"), sets)
    assert not (tmp_path / "cache" / "stats").exists() and not (tmp_path / "clf").exists()
    result = run(*args, "--out", tmp_path / "clf", "--drop-duplicates", "--format", "json")
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    assert card["n_members"] == 4 and card["n_nonmembers"] == 4
    assert_dropped(card["duplicates_dropped"], sets)
    assert "1 document found in both sets left out" in (tmp_path / "clf" / "card.md").read_text()


@pytest.mark.slow
def test_report_calibration(sets, tiny_gpt2, tmp_path):
    args = [
        "report",
        sets["mem"] / f"{corpus_ids('members', 5)[4]}.txt",
        "--calibrate-members",
        sets["mem"],
        "--calibrate-nonmembers",
        sets["non"],
        "--model",
        tiny_gpt2,
        "--snippets",
        "2",
        "--snippet-words",
        "30",
        "--out",
        tmp_path / "rep",
    ]
    assert_refused(run(*args), sets)
    result = run(*args, "--drop-duplicates")
    assert result.exit_code == 0, result.output
    assert "1 document found in both sets left out" in result.stdout
    info = json.loads((tmp_path / "rep" / "report.json").read_text())["info"]
    assert info["n_calibration_members"] == 4 and info["n_calibration_nonmembers"] == 4
    assert_dropped(info["duplicates_dropped"], sets)


def test_dataset_test(sets, tiny_gpt2):
    args = [
        "dataset-test",
        "--suspect",
        sets["mem"],
        "--nonmembers",
        sets["non"],
        "--model",
        tiny_gpt2,
        "--context",
        "32",
        "--methods",
        "loss,zlib",
        "--splits",
        "2",
    ]
    assert_refused(run(*args), sets)
    result = run(*args, "--drop-duplicates", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["n_suspect"] == 4 and report["n_nonmember"] == 4
    assert report["blind_kind"] == "tfidf"
    # the verdict rule at the default level 0.05: a blind test that separates the sets makes it inconclusive
    p, p_blind = report["p_value"], report["p_value_blind"]
    expected = INCONCLUSIVE if p_blind < 0.05 else EVIDENCE if p < 0.05 else NO_EVIDENCE
    assert report["verdict"]["verdict"] == expected, (p, p_blind)
    assert "self_check_p_value" not in report and report["test"].startswith("one-sided rank test")
    # --alpha reaches the verdict and the sentence on which p-value to rely on
    strict = json.loads(run(*args, "--drop-duplicates", "--format", "json", "--alpha", "1e-6").stdout)
    assert ">= 1e-06" in strict["rely_on"] and strict["verdict"]["verdict"] != EVIDENCE
    assert_dropped(report["duplicates_dropped"], sets)
    assert str(sets["copied"]) not in {row["file"] for row in report["scores"]}
