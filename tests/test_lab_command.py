"""`docaudit lab` end to end at a tiny size, and resuming after an interruption."""

import json

import pytest
from click.testing import CliRunner
from labtarget import excerpts, single_thread

import docaudit.lab.target as lab
from docaudit.cli import main
from docaudit.outputs import prepare_output

ARGS = [
    "--layers",
    "1",
    "--width",
    "64",
    "--heads",
    "2",
    "--positions",
    "64",
    "--vocab-size",
    "400",
    "--epochs",
    "12",
    "--train-batch-size",
    "8",
    "--doc-tokens",
    "160",
    "--folds",
    "2",
    "--methods",
    "loss,mink,minkpp",
]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("pool")
    for book, text in excerpts(16, n_words=120).items():
        (root / f"{book}.txt").write_text(text)
    return root


@pytest.mark.slow
def test_lab_end_to_end_resumes_after_interruption(pool, tmp_path, monkeypatch):
    save = lab.save_checkpoint
    saves = []

    def interrupt_after_third_epoch(*args, **kwargs):
        save(*args, **kwargs)
        saves.append(1)
        if len(saves) == 3:
            raise KeyboardInterrupt

    out = tmp_path / "lab"
    with single_thread():
        monkeypatch.setattr(lab, "save_checkpoint", interrupt_after_third_epoch)
        first = CliRunner().invoke(main, ["lab", "--corpus", pool, "--out", out, *ARGS])
        assert first.exit_code == 130 and "interrupted" in first.stderr
        assert not (out / "lab.json").exists()
        monkeypatch.setattr(lab, "save_checkpoint", save)
        result = CliRunner().invoke(
            main, ["lab", "--corpus", pool, "--out", out, *ARGS, "--extra-dtypes", "bfloat16", "--format", "json"]
        )
    assert result.exit_code == 0, result.output
    segments = lab.read_target_metadata(out / "target" / "model")["segments"]
    assert [(s["start_epoch"], s["end_epoch"]) for s in segments] == [(0, 3), (3, 12)]

    report = json.loads(result.stdout)
    assert report["members"] == report["nonmembers"] == 8
    assert report["loss"]["gap"] > 0  # the target fits its members better
    # the target memorized its members: every member's loss is below every non-member's, and document-level AUCs
    # are near 1 (1.0 measured; 0.9 leaves room for another platform's arithmetic)
    assert max(report["loss"]["member_doc_losses"]) < min(report["loss"]["nonmember_doc_losses"])
    auc = {(m["method"], m["level"]): m["auc_mean"] for m in report["methods"]}
    assert auc[("meta_classifier", "document")] >= 0.9 and auc[("loss", "doc_avg")] >= 0.9, auc
    assert ("minkpp", "doc_threshold") in auc
    assert report["blind_auc"] == max(v for (m, _), v in auc.items() if m == "blind")
    assert json.loads((out / "lab.json").read_text())["members"] == 8
    precisions = {(p["precision"], p["method"], p["level"]) for p in report["precisions"]}
    assert {
        ("float32", "meta_classifier", "document"),
        ("bfloat16", "meta_classifier", "document"),
        ("bfloat16", "minkpp", "doc_avg"),
    } <= precisions
    by_precision = {(p["precision"], p["method"], p["level"]): p["auc_mean"] for p in report["precisions"]}
    for (precision, method, level), value in by_precision.items():
        assert value == pytest.approx(auc[(method, level)], abs=0 if precision == "float32" else 0.1), precision
    for label in ("members", "nonmembers"):
        assert len(list((out / label).glob("*.txt"))) == 8

    # the lab's marker lists every file it wrote, at every depth: --overwrite keeps the user's files in its folders
    assert prepare_output(out, "lab", overwrite=True, resume=True) == out.resolve()
    (out / "members" / "NOTES.md").write_text("my notes\n")
    (out / "target" / "my_analysis.ipynb").write_text("{}")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    again = CliRunner().invoke(main, ["lab", "--corpus", pool, "--out", out, *ARGS, "--overwrite"])
    assert again.exit_code == 3 and "did not write (members/NOTES.md, target/my_analysis.ipynb)" in again.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("old, new", [("--context", "--positions"), ("--max-tokens", "--doc-tokens")])
def test_lab_options_named_apart_from_the_query_options(pool, tmp_path, old, new):
    """The target's positions and the tokens per document are not the query's --context and --max-tokens."""
    result = CliRunner().invoke(main, ["lab", "--corpus", pool, "--out", tmp_path / "lab", old, "64"])
    assert result.exit_code == 2 and f"No such option '{old}'" in result.stderr
    assert not (tmp_path / "lab").exists()
    assert new in CliRunner().invoke(main, ["lab", "--help"]).stdout
