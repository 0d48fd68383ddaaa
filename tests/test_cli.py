import json
import os

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import corpus_ids, corpus_text

from docaudit.cli import main
from docaudit.verdicts import VERDICTS

FAST = ["--context", "16", "--trees", "20", "--bins", "20", "--norm", "max_tf", "--features", "hist", "--folds", "2"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_gpt2):
    """A classifier trained once on good documents, for the predict checks."""
    dirs = make_sets(tmp_path_factory.mktemp("sets"))
    out = tmp_path_factory.mktemp("models") / "tiny"
    result = run(
        "train", "--members", dirs["mem"], "--nonmembers", dirs["non"], "--model", tiny_gpt2, *FAST, "--out", out
    )
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture()
def sets(tmp_path):
    return make_sets(tmp_path)


def make_sets(tmp_path):
    dirs = {}
    for group, label in (("members", "mem"), ("nonmembers", "non")):
        d = tmp_path / label
        d.mkdir()
        for book in corpus_ids(group, 4):
            (d / f"{book}.txt").write_text(corpus_text(group, book, n_chars=1200))
        dirs[label] = d
    return dirs


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result


def assert_clean_error(result, pattern):
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: ") and pattern in lines[-1], result.stderr
    assert "Traceback" not in result.output


def test_train_then_predict(sets, tiny_gpt2, tiny_llama, tmp_path):
    out = tmp_path / "models" / "tiny"
    result = run(
        "train", "--members", sets["mem"], "--nonmembers", sets["non"], "--model", tiny_gpt2, *FAST, "--out", out
    )
    assert result.exit_code == 0, result.output
    assert "AUC" in result.output
    assert {p.name for p in out.iterdir()} == {
        "classifier.skops",
        "card.json",
        "card.md",
        "roc.csv",
        "roc.png",
        "predictions.csv",
        "folds.skops",
        ".docaudit-output.json",
    }
    predictions = pd.read_csv(out / "predictions.csv")  # out-of-fold: one row per document, its fold and score
    assert len(predictions) == 8 and set(predictions.fold) == {0, 1} and predictions.label.sum() == 4
    assert predictions.membership_score.between(0, 1).all()
    roc = pd.read_csv(out / "roc.csv")
    pooled = roc[roc.curve == "pooled out-of-fold"]
    assert pooled.tpr.iloc[-1] == 1 and len(pooled) >= 2
    umask = os.umask(0)
    os.umask(umask)
    assert {p.stat().st_mode & 0o777 for p in out.iterdir()} == {0o666 & ~umask}
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask
    card = json.loads((out / "card.json").read_text())
    assert card["n_members"] == card["n_nonmembers"] == 4 and card["configuration"] == "max_tf+hist"
    assert 0 <= card["blind"]["blind_auc"] <= 1 and "blind baseline" in result.output
    auc = card["pooled_bootstrap_95"]["auc"]
    assert auc["ci_low"] <= auc["point"] <= auc["ci_high"] and "bootstrap interval" in result.output

    book = sorted(sets["mem"].iterdir())[0]
    result = run("predict", "--classifier", out, "--model", tiny_gpt2, "--format", "json", book, sets["non"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert len(rows) == 5
    for row in rows:
        assert 0 <= row["membership_score"] <= 1 and row["n_tokens"] > 1
        assert row["verdict"] in VERDICTS and "prediction" not in row
        assert 2 / 5 <= row["p_value"] <= 1 and 1 / 5 <= row["p_value_blind"] <= 1 and row["smallest_p"] == 2 / 5
    # four known non-members: the smallest p-value, 1/5, can never reach 0.05
    assert all(row["verdict"] == "inconclusive" and "too few known non-members" in row["reason"] for row in rows)
    # the card's own model is the default for --model
    assert run("predict", "--classifier", out, book).exit_code == 0

    assert_clean_error(run("predict", "--classifier", out, "--model", tiny_llama, book), "trained for model")


def test_predict_cleans_documents_as_the_card_says(trained, tiny_gpt2, tmp_path):
    """predict reads documents as the classifier's training documents were read: a card without the
    ``normalize_chars`` field (written before it existed, like the shipped classifier's) means normalized text."""
    import shutil

    from transformers import AutoTokenizer

    from docaudit.corpus.cleaning import clean_text

    text = "\u201cWell,\u201d she said \u2014 \u201cit\u2019s late\u2026\u201d " * 8
    doc = tmp_path / "quotes.txt"
    doc.write_text(text, encoding="utf-8")
    tokenizer = AutoTokenizer.from_pretrained(tiny_gpt2)
    n_tokens = {
        norm: len(tokenizer(clean_text(text, norm), add_special_tokens=False)["input_ids"]) for norm in (False, True)
    }
    assert n_tokens[False] != n_tokens[True]
    card = json.loads((trained / "card.json").read_text())
    assert card["normalize_chars"] is False
    for field, expected in ((False, n_tokens[False]), (True, n_tokens[True]), (None, n_tokens[True])):
        copy = tmp_path / f"classifier-{field}"
        shutil.copytree(trained, copy)
        edited = {k: v for k, v in card.items() if k != "normalize_chars"}
        if field is not None:
            edited["normalize_chars"] = field
        (copy / "card.json").write_text(json.dumps(edited))
        result = run("predict", "--classifier", copy, "--model", tiny_gpt2, "--format", "json", doc)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["rows"][0]["n_tokens"] == expected


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("empty.txt", b"", "empty file"),
        ("binary.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        ("latin1.txt", "caf\xe9 cr\xe8me br\xfbl\xe9e".encode("latin-1"), "UTF-8"),
        (
            "boiler.txt",
            b"*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n\n\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\n",
            "no text left",
        ),
    ],
)
def test_bad_documents_fail_cleanly(sets, tiny_gpt2, trained, tmp_path, name, content, message):
    (sets["mem"] / name).write_bytes(content)
    out = tmp_path / "out"
    result = run(
        "train",
        "--members",
        sets["mem"],
        "--nonmembers",
        sets["non"],
        "--model",
        tiny_gpt2,
        *FAST,
        "--out",
        out,
        "--strict",
    )
    assert_clean_error(result, message)
    assert not out.exists()
    assert_clean_error(run("predict", "--classifier", trained, sets["mem"] / name), message)


def test_unknown_models_fail_cleanly(sets, tmp_path):
    base = ["train", "--members", sets["mem"], "--nonmembers", sets["non"], *FAST, "--out", tmp_path / "o"]
    assert_clean_error(run(*base, "--model", tmp_path / "missing-dir"), "unknown model")
    assert_clean_error(run(*base, "--model", tmp_path), "not a Hugging Face model")
    assert_clean_error(run(*base, "--model", "no-such-org/no-such-model-xyz"), "unknown model")
    assert not (tmp_path / "o").exists()


def test_context_longer_than_the_model_accepts(sets, tiny_gpt2, tmp_path):
    result = run(
        "train",
        "--members",
        sets["mem"],
        "--nonmembers",
        sets["non"],
        "--model",
        tiny_gpt2,
        *FAST,
        "--context",
        "300",
        "--out",
        tmp_path / "o",
    )
    assert_clean_error(result, "--context 300 is out of range: allowed 2..256")


def test_too_few_documents_for_folds(sets, tiny_gpt2, tmp_path):
    result = run(
        "train",
        "--members",
        sets["mem"],
        "--nonmembers",
        sets["non"],
        "--model",
        tiny_gpt2,
        *FAST,
        "--folds",
        "5",
        "--out",
        tmp_path / "o",
    )
    assert_clean_error(result, "too few documents for 5 folds")
    assert not (tmp_path / "o").exists()


def test_short_document_is_one_window_and_min_tokens_skips(sets, tiny_gpt2, tmp_path):
    (sets["mem"] / "short.txt").write_text("A short note.")
    (sets["non"] / "short2.txt").write_text("Another short note.")
    out = tmp_path / "o"
    result = run(
        "train",
        "--members",
        sets["mem"],
        "--nonmembers",
        sets["non"],
        "--model",
        tiny_gpt2,
        *FAST,
        "--out",
        out,
        "--min-tokens",
        "50",
    )
    assert result.exit_code == 0, result.output
    assert "2 skipped" in result.output
    ok = run("predict", "--classifier", out, "--format", "json", sets["mem"] / "short.txt")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["rows"][0]["n_tokens"] < 16


def test_grid_covers_every_configuration_from_one_cache(sets, tiny_gpt2):
    result = run(
        "train",
        "--members",
        sets["mem"],
        "--nonmembers",
        sets["non"],
        "--model",
        tiny_gpt2,
        "--grid",
        "--grid-contexts",
        "16,32",
        "--folds",
        "2",
        "--trees",
        "10",
        "--bins",
        "20",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert len(rows) == 2 * 5 * 2
    assert {(r["context"], r["norm"], r["features"]) for r in rows} == {
        (c, n, f)
        for c in (16, 32)
        for n in ("none", "ratio_tf", "ratio_gp", "max_tf", "max_gp")
        for f in ("agg", "hist")
    }
    assert all(0 <= r["auc_mean"] <= 1 for r in rows)


def test_predict_asks_to_retrain_an_older_classifier_and_refuses_tampered_fold_models(trained, tiny_gpt2, tmp_path):
    """A classifier saved before per-document p-values (no fold models, no ``conformal`` card section) answers
    "inconclusive" with "train it again"; a fold-model file holding other types is refused before loading."""
    import shutil

    import numpy as np
    import skops.io as sio
    from sklearn.preprocessing import FunctionTransformer

    from docaudit.methods.blind import shift_warning

    card = json.loads((trained / "card.json").read_text())
    auc = card["pooled_bootstrap_95"]["auc"]["point"]
    assert card["warning"] == shift_warning(card["blind"]["blind_auc"], auc) and "pooled" in card["quality"]
    assert card["conformal"]["n_nonmembers"] == 4 and len(card["conformal"]["nonmember_scores"]) == 2
    book = sorted(trained.parent.parent.glob("sets*/mem/*.txt"))[0]
    old = tmp_path / "old"
    shutil.copytree(trained, old)
    (old / "folds.skops").unlink()
    (old / "card.json").write_text(json.dumps({k: v for k, v in card.items() if k != "conformal"}))
    result = run("predict", "--classifier", old, "--model", tiny_gpt2, "--format", "json", book)
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["rows"][0]
    assert row["verdict"] == "inconclusive" and "train it again" in row["reason"] and row["p_value"] is None

    bad = tmp_path / "bad"
    shutil.copytree(trained, bad)
    (bad / "folds.skops").write_bytes(sio.dumps({"meta": [FunctionTransformer(np.exp)] * 2, "blind": []}))
    assert_clean_error(run("predict", "--classifier", bad, "--model", tiny_gpt2, book), "untrusted types")


def test_predict_refuses_an_alpha_outside_0_1(trained):
    book = sorted(trained.parent.parent.glob("sets*/mem/*.txt"))[0]
    assert_clean_error(run("predict", "--classifier", trained, "--alpha", "0", book), "--alpha must be in (0, 1)")
