import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import corpus_ids, corpus_text
from sklearn.metrics import roc_auc_score

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
    # each fold's AUC is that of the out-of-fold scores written per document
    documents = pd.read_csv(tmp_path / "out" / "documents.csv", dtype={"document": str})
    for row in rows:
        by_fold = documents.groupby("fold")
        expected = [roc_auc_score(d.label, d[f"blind:{row['level']}"]) for _, d in by_fold]
        assert row["fold_aucs"] == pytest.approx(expected) and row["auc_mean"] == pytest.approx(np.mean(expected))
    # PG-19 members against post-2024 non-members: the era shows (as data check warns on the same sets below)
    assert json.loads(result.stdout)["info"]["blind_auc"] == max(r["auc_mean"] for r in rows) >= 0.6


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
