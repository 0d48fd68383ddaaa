"""`docaudit evaluate` and `docaudit report` end to end with a tiny model."""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import corpus_ids, corpus_text
from sklearn.metrics import roc_auc_score
from test_cli import assert_clean_error, make_sets, run

from docaudit.audit.contamination import wilson_interval
from docaudit.inference.verdicts import INCONCLUSIVE
from docaudit.metrics import chunk_folds

pytestmark = pytest.mark.usefixtures("one_thread")

METHODS = ["loss", "zlib", "lowercase", "mink", "minkpp", "pac"]
LEVELS = ["sequence", "doc_avg", "doc_threshold"]


def test_evaluate_end_to_end(tiny_gpt2, tmp_path):
    sets = make_sets(tmp_path)
    out = tmp_path / "ev"
    args = [
        "evaluate",
        "--members",
        sets["mem"],
        "--nonmembers",
        sets["non"],
        "--model",
        tiny_gpt2,
        "--context",
        "32",
        "--sequences",
        "2",
        "--folds",
        "2",
        "--seed",
        "1",
        "--trees",
        "20",
        "--bins",
        "20",
        "--norm",
        "max_tf",
        "--features",
        "hist",
        "--out",
        out,
    ]
    result = run(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rows = {(r["method"], r["level"]): r for r in report["methods"]}
    blind = {("blind", kind) for kind in ("tfidf", "nb", "dates")}
    assert set(rows) == {("meta_classifier", "document")} | {(m, lv) for m in METHODS for lv in LEVELS} | blind
    for row in rows.values():
        assert {"method", "level", "auc_mean", "auc_std", "tpr_at_10fpr_mean", "tpr_at_1fpr_mean"} <= set(row)
        assert len(row["fold_aucs"]) == 2  # each document-level fold AUC is recomputed from documents.csv below
        assert row["auc_mean"] == pytest.approx(np.mean(row["fold_aucs"]))
    # every method on the same folds: the chunks of chunk_folds(labels, 2, seed=1), 2 sequences per document
    info = report["info"]
    labels = np.array([1] * 4 + [0] * 4)
    ids = [p.stem for d in (sets["mem"], sets["non"]) for p in sorted(d.iterdir())]
    assert info["fold_test_documents"] == [[ids[i] for i in test] for _, test in chunk_folds(labels, 2, 1)]
    n_test = [len(test) for _, test in chunk_folds(labels, 2, 1)]
    assert info["sequences_per_document"] == [2] * 8
    # 4 + 4 documents in 2 folds: each fold tests 2 of a class, and the run says that its fold AUCs mean little
    assert info["small_folds_warning"].startswith("WARNING: small folds. A fold tests as few as 2 document(s)")
    assert info["small_folds_warning"] in result.stderr
    for (method, level), row in rows.items():
        assert row["fold_n_test"] == ([2 * n for n in n_test] if level == "sequence" else n_test), (method, level)
    assert {p.name for p in out.iterdir()} == {
        "evaluation.csv",
        "evaluation_folds.csv",
        "evaluation.json",
        "roc.csv",
        "roc.png",
        "documents.csv",
        "documents.json",
        ".docaudit-output.json",
    }
    documents = pd.read_csv(
        out / "documents.csv", dtype={"document": str}
    )  # per document: its fold and every document-level score
    assert list(documents.document) == ids and list(documents.label) == list(labels)
    for i, (_, test) in enumerate(chunk_folds(labels, 2, 1)):
        assert (documents.fold.iloc[test] == i).all()
    for (method, level), row in rows.items():
        if level != "sequence":
            column = documents[f"{method}:{level}"]
            assert column.notna().all()
            mine = [roc_auc_score(labels[test], column.iloc[test]) for _, test in chunk_folds(labels, 2, 1)]
            assert row["fold_aucs"] == pytest.approx(mine), (method, level)
    assert [r["document"] for r in json.loads((out / "documents.json").read_text())["rows"]] == ids
    assert report["docaudit_version"] and json.loads((out / "evaluation.json").read_text())["docaudit_version"]
    table = pd.read_csv(out / "evaluation.csv")
    assert len(table) == 1 + len(METHODS) * len(LEVELS) + len(blind)
    assert table.pooled_auc.notna().all()  # every row, the sequence rows too (as roc.png draws them)
    assert table.pooled_auc_ci_low.notna().sum() == 1 + len(METHODS) * 2 + len(blind)  # documents: an interval
    for (method, level), row in rows.items():
        if level == "sequence":  # the pooled AUC of every out-of-fold sequence score, as roc.png draws them
            assert row["pooled_auc"] is not None and row["pooled_auc_ci_low"] is None, method

    text = run(*args[:-2])  # same run from the cache, printed as the table
    assert text.exit_code == 0, text.output
    assert "doc_threshold" in text.stdout and "meta_classifier" in text.stdout
    # each row: its AUC per fold as mean ± std; a TPR no row can estimate (2 non-members per fold) is named once
    # above the table, not as a column of "n/a" on every row
    assert text.stdout.count(" ± ") >= 1 + len(METHODS) * len(LEVELS) + len(blind)
    assert "TPR at 10% FPR not shown: needs ≥ 10 non-members per fold" in text.stdout
    assert "TPR at 1% FPR not shown: needs ≥ 100 non-members per fold" in text.stdout
    assert "TPR@" not in text.stdout and "n/a (needs" not in text.stdout


def make_books(tmp_path, n_chars=1500):
    books = {}
    for group, name in (("members", "cal_mem"), ("nonmembers", "cal_non"), ("nonmembers", "audit")):
        d = tmp_path / name
        d.mkdir()
        ids = corpus_ids(group, 4)
        for book in ids[2:] if name == "audit" else ids[:2]:
            (d / f"{book}.txt").write_text(corpus_text(group, book, n_chars=n_chars))
        books[name] = d
    (books["audit"] / "extra.txt").write_text(corpus_text("members", corpus_ids("members", 5)[4], n_chars=n_chars))
    return books


def report_args(books, tiny_gpt2, out, *extra):
    return [
        "report",
        books["audit"],
        "--calibrate-members",
        books["cal_mem"],
        "--calibrate-nonmembers",
        books["cal_non"],
        "--model",
        tiny_gpt2,
        "--snippets",
        "4",
        "--snippet-words",
        "40",
        "--out",
        out,
        *extra,
    ]


def test_report_end_to_end(tiny_gpt2, tmp_path):
    books = make_books(tmp_path)
    out = tmp_path / "rep"
    result = run(*report_args(books, tiny_gpt2, out, "--min-snippets", "4"))
    assert result.exit_code == 0, result.output
    assert "threshold" in result.stdout and "report.html" in result.stdout
    names = {p.name for p in out.iterdir()}
    assert {"report.csv", "report.html", "rates.png", "calibration_roc.png", "calibration.csv", "snippets.csv"} <= names
    table = pd.read_csv(out / "report.csv")
    assert len(table) == 3 and {"book", "n_snippets", "contamination_rate", "ci_low", "ci_high"} <= set(table.columns)
    assert (table.n_snippets == 4).all()
    # a book's rate is the share of its snippets scored above the report's threshold
    snippets = pd.read_csv(out / "snippets.csv", dtype={"book": str})
    threshold = json.loads((out / "report.json").read_text())["info"]["threshold"]
    audited = snippets[snippets.role == "audited"].groupby("book").score
    assert dict(zip(table.book.astype(str), table.contamination_rate)) == pytest.approx(
        (audited.apply(lambda s: (s > threshold).mean())).to_dict()
    )
    assert (table.ci_low <= table.contamination_rate).all() and (table.contamination_rate <= table.ci_high).all()
    assert list(table.contamination_rate) == sorted(table.contamination_rate, reverse=True)
    assert {"verdict", "reason", "p_value", "q_value", "p_value_blind", "debiased_fraction"} <= set(table.columns)
    # the verdict first in every format: report.csv's first column, the JSON rows' first key, the terminal's first block
    assert list(table.columns[:2]) == ["verdict", "reason"]
    assert all(list(b)[:2] == ["verdict", "reason"] for b in json.loads((out / "report.json").read_text())["books"])
    assert result.stdout.index("verdicts (alpha") < result.stdout.index("Wilson")
    # two calibration non-member books: a book's conformal p-value is (1 + k) / 3, never below the 0.05 level
    assert table.p_value.isin([1 / 3, 2 / 3, 1.0]).all(), table.p_value
    assert (table.n_compared == 4).all()
    assert set(table.verdict) == {INCONCLUSIVE} and table.reason.str.contains("too few known non-members").all()
    # an inconclusive book's debiased fraction would read as a finding: none is printed, on any page
    assert table.debiased_fraction.isna().all() and table.debiased_ci_low.isna().all()
    assert result.stdout.count("debiased n/a (no verdict: see the reason)") == 3
    warned = json.loads((out / "report.json").read_text())["info"]["calibration_auc"] < 0.6
    page = (out / "report.html").read_text()
    assert ("barely separated" in result.stderr) == warned == ("barely separated" in page)
    assert page.count("data:image/png;base64,") == 3 and 'src="rates.png"' not in page
    for book in table.book:
        assert str(book) in page
    assert page.index("Verdict per book") < page.index("The audited books beside the calibration books")
    lines = result.stdout.splitlines()
    for row in table.itertuples():  # the verdict line right under the book's name, its numbers after it
        at = lines.index(str(row.book))
        assert lines[at + 1].strip().startswith(row.verdict) and "debiased" in lines[at + 2]

    fpr = run(*report_args(books, tiny_gpt2, tmp_path / "rep2", "--target-fpr", "0.0"))
    assert fpr.exit_code == 0, fpr.output
    snippets = pd.read_csv(tmp_path / "rep2" / "snippets.csv")
    threshold = json.loads((tmp_path / "rep2" / "report.json").read_text())["info"]["threshold"]
    non = snippets[snippets.role == "non-member"].score
    assert threshold == pytest.approx(non.max()) and (non > threshold).sum() == 0


def test_report_bad_inputs(tiny_gpt2, tmp_path):
    books = make_books(tmp_path, n_chars=600)
    out = tmp_path / "rep"
    no_class = [a for a in report_args(books, tiny_gpt2, out) if a not in ("--calibrate-nonmembers", books["cal_non"])]
    assert_clean_error(run(*no_class), "Missing option '--calibrate-nonmembers'")
    empty_dir = tmp_path / "nothing"
    empty_dir.mkdir()
    args = report_args(books, tiny_gpt2, out)
    args[args.index(books["cal_non"])] = empty_dir
    assert_clean_error(run(*args), "no .txt files")
    (books["audit"] / "empty.txt").write_text("")
    assert_clean_error(run(*report_args(books, tiny_gpt2, out), "--strict"), "empty file")
    (books["audit"] / "empty.txt").write_text("Too short a book.")
    assert_clean_error(run(*report_args(books, tiny_gpt2, out), "--strict"), "too short for one snippet of 40 words")
    assert_clean_error(run(*report_args(books, tiny_gpt2, out), "--alpha", "1.5"), "--alpha must be in (0, 1)")
    assert not out.exists() and not list(tmp_path.glob(".rep*"))


def test_wilson_interval():
    lo, hi = wilson_interval(0, 20)
    assert lo == 0 and 0.1 < hi < 0.2
    lo, hi = wilson_interval(10, 20)
    assert lo == pytest.approx(1 - hi) and lo < 0.5 < hi
    assert wilson_interval(20, 20)[1] == 1.0
