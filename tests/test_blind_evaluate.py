import json

from click.testing import CliRunner
from conftest import corpus_ids, corpus_text

from docaudit.cli import main


def test_evaluate_blind_only_needs_no_model(tmp_path):
    for group, label in (("members", "a"), ("nonmembers", "b")):
        (tmp_path / label).mkdir()
        for book in corpus_ids(group, 6):
            (tmp_path / label / f"{book}.txt").write_text(corpus_text(group, book, n_chars=3000))
    result = CliRunner().invoke(
        main,
        [
            "evaluate",
            "--methods",
            "blind",
            "--members",
            tmp_path / "a",
            "--nonmembers",
            tmp_path / "b",
            "--folds",
            "3",
            "--model",
            tmp_path / "no-such-model",
            "--format",
            "json",
            "--out",
            tmp_path / "out",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["methods"]
    assert {r["method"] for r in rows} == {"blind"} and {r["level"] for r in rows} == {"tfidf", "nb", "dates"}
    assert all(0 <= r["auc_mean"] <= 1 for r in rows)
    assert (tmp_path / "out" / "evaluation.csv").exists()


def test_data_check_prints_the_shift_warning_once_on_stderr(tmp_path):
    for group, label in (("members", "a"), ("nonmembers", "b")):
        (tmp_path / label).mkdir()
        for book in corpus_ids(group, 6):
            (tmp_path / label / f"{book}.txt").write_text(corpus_text(group, book, n_chars=3000))
    args = ["data", "check", str(tmp_path / "a"), str(tmp_path / "b"), "--folds", "3"]
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 0, text.output
    assert "distribution shift" not in text.stdout and "blind baseline" in text.stdout
    assert text.stderr.count("WARNING: distribution shift") == 1
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warning"].startswith("WARNING: distribution shift")
    assert result.stderr.count("WARNING: distribution shift") == 1
