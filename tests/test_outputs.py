"""--out never deletes or overwrites what docaudit did not write, and a bad --out fails before any querying."""

import json
import os

import pytest
from test_cli import FAST, assert_clean_error, make_sets, run

from docaudit.outputs import OUTPUT_MARKER


def snapshot(root):
    """Every file under ``root`` with its bytes, and every folder."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            found[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = None
        for f in filenames:
            path = os.path.join(dirpath, f)
            with open(path, "rb") as fh:
                found[os.path.relpath(path, root)] = fh.read()
    return found


@pytest.fixture()
def precious(tmp_path):
    """A user's folder: a file and a sub-folder."""
    root = tmp_path / "precious"
    (root / "sub").mkdir(parents=True)
    (root / "thesis.txt").write_text("four years of work\n")
    (root / "sub" / "data.bin").write_bytes(bytes(range(256)))
    return root


def blind_eval(sets, out, *extra):
    return run(
        "evaluate",
        "--methods",
        "blind",
        "--members",
        sets["mem"],
        "--nonmembers",
        sets["non"],
        "--folds",
        "2",
        "--out",
        out,
        *extra,
    )


def test_train_refuses_a_foreign_folder_before_querying(precious, tmp_path, tiny_gpt2):
    sets = make_sets(tmp_path)
    before = snapshot(precious)
    train = ("train", "--members", sets["mem"], "--nonmembers", sets["non"], "--model", tiny_gpt2, *FAST)
    assert_clean_error(run(*train, "--out", precious), "not empty and was not written by docaudit")
    assert snapshot(precious) == before
    assert not (tmp_path / "cache" / "stats").exists()  # nothing was queried
    # --overwrite does not make a foreign folder docaudit's
    assert_clean_error(run(*train, "--out", precious, "--overwrite"), "not written by docaudit")
    assert snapshot(precious) == before


def test_out_that_is_or_contains_an_input(tmp_path, tiny_gpt2):
    sets = make_sets(tmp_path)
    before = snapshot(tmp_path)
    for out in (sets["mem"], tmp_path):
        for extra in ([], ["--overwrite"]):
            result = run(
                "evaluate",
                "--members",
                sets["mem"],
                "--nonmembers",
                sets["non"],
                "--model",
                tiny_gpt2,
                "--out",
                out,
                *extra,
            )
            assert_clean_error(result, "is or contains the input")
    book = sorted(sets["mem"].iterdir())[0]
    assert_clean_error(
        run("report", book, "--calibrate-members", sets["mem"], "--calibrate-nonmembers", sets["non"], "--out", book),
        "is or contains the input",
    )
    assert snapshot(tmp_path) == before


def test_current_folder_its_parents_and_files(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    sets = make_sets(work)
    (work / "notes.txt").write_text("mine\n")
    (tmp_path / "beside.txt").write_text("also mine\n")
    monkeypatch.chdir(work)
    before = snapshot(tmp_path)
    for out in (".", "..", str(work), "", os.path.join("mem", "..")):
        assert_clean_error(blind_eval(sets, out), "is the current folder or contains it")
        assert_clean_error(blind_eval(sets, out, "--overwrite"), "is the current folder or contains it")
    assert_clean_error(blind_eval(sets, "notes.txt"), "exists and is a file")
    assert_clean_error(blind_eval(sets, os.path.join("notes.txt", "sub")), "notes.txt is a file")
    assert_clean_error(run("lab", "--corpus", sets["mem"], "--out", "notes.txt"), "exists and is a file")
    assert_clean_error(run("lab", "--corpus", sets["mem"], "--out", "."), "current folder")
    assert_clean_error(
        run(
            "report",
            sets["non"],
            "--calibrate-members",
            sets["mem"],
            "--calibrate-nonmembers",
            sets["non"],
            "--out",
            os.path.join("notes.txt", "sub"),
        ),
        "notes.txt is a file",
    )
    assert snapshot(tmp_path) == before


def test_earlier_output_is_replaced_only_with_overwrite(tmp_path, tiny_gpt2):
    sets = make_sets(tmp_path)
    out = tmp_path / "ev"
    assert blind_eval(sets, out).exit_code == 0
    marker = json.loads((out / OUTPUT_MARKER).read_text())
    assert marker["kind"] == "evaluation" and "evaluation.json" in marker["entries"] and marker["docaudit_version"]
    first = snapshot(out)

    assert_clean_error(blind_eval(sets, out), "pass --overwrite")
    assert snapshot(out) == first
    # a folder of another kind is not replaced, even with --overwrite
    assert_clean_error(
        run(
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
            "--overwrite",
        ),
        "holds a docaudit evaluation output, not a classifier",
    )
    assert_clean_error(run("lab", "--corpus", sets["mem"], "--out", out), "not a lab")
    assert snapshot(out) == first

    # a folder of docaudit's own beside the output, named like the old temporary one, is left alone
    keep = tmp_path / ".ev.old"
    keep.mkdir()
    (keep / "keep.txt").write_text("not docaudit's\n")
    result = blind_eval(sets, out, "--overwrite", "--seed", "3")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "evaluation.json").read_text())["info"]["seed"] == 3
    assert (keep / "keep.txt").read_text() == "not docaudit's\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".ev")) == [".ev.old"]

    # a file the user added to the output is never deleted
    (out / "my-notes.md").write_text("my reading of the results\n")
    before = snapshot(out)
    assert_clean_error(blind_eval(sets, out, "--overwrite"), "did not write (my-notes.md)")
    assert snapshot(out) == before


def test_lab_resumes_its_own_folder_and_refuses_others(precious, tmp_path):
    pool = make_sets(tmp_path)["mem"]
    before = snapshot(tmp_path)
    assert_clean_error(run("lab", "--corpus", pool, "--out", precious), "not written by docaudit")
    assert_clean_error(run("lab", "--corpus", pool, "--out", pool), "is or contains the input")
    assert_clean_error(run("lab", "--corpus", pool, "--out", tmp_path), "is or contains the input")
    assert snapshot(tmp_path) == before
    # an earlier lab with a file the user put there: resumed as is, but never discarded by --overwrite
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / OUTPUT_MARKER).write_text(json.dumps({"kind": "lab", "entries": ["lab.json", "target"]}))
    (lab / "mine.txt").write_text("mine\n")
    before = snapshot(lab)
    assert_clean_error(run("lab", "--corpus", pool, "--out", lab, "--overwrite"), "did not write (mine.txt)")
    assert snapshot(lab) == before


def test_build_manifest_writes_only_new_files_or_earlier_manifests(precious, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from conftest import CORPUS

    def build(out, *extra):
        script = Path(__file__).resolve().parents[1] / "scripts" / "artifacts" / "build_manifest.py"
        return subprocess.run(
            [
                sys.executable,
                str(script),
                "--catalog",
                str(CORPUS / "catalog.csv"),
                "--cutoff",
                "2024-09-01",
                "--no-hashes",
                "--out",
                str(out),
                *extra,
            ],
            capture_output=True,
            text=True,
        )

    before = snapshot(precious)
    for out, extra, message in (
        (precious / "thesis.txt", [], "exists; pass --overwrite"),
        (precious / "thesis.txt", ["--overwrite"], "is not a docaudit manifest"),
        (precious / "sub", ["--overwrite"], "exists and is not a file"),
        (precious / "thesis.txt" / "m.csv", [], "is a file"),
    ):
        proc = build(out, *extra)
        assert proc.returncode == 2 and proc.stderr.startswith("error: ") and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert snapshot(precious) == before
    manifest = tmp_path / "m.csv"
    assert build(manifest).returncode == 0
    assert build(manifest).returncode == 2
    assert build(manifest, "--overwrite").returncode == 0


def test_discarding_an_earlier_output_deletes_only_its_own_entries(tmp_path):
    from docaudit.outputs import discard_output, write_marker

    lab = tmp_path / "lab"
    (lab / "target" / "model").mkdir(parents=True)
    (lab / "target" / "model" / "w.bin").write_bytes(b"0" * 10)
    (lab / "lab.json").write_text("{}")
    (tmp_path / "outside.txt").write_text("mine\n")
    write_marker(lab, "lab", ["target", "lab.json", "../outside.txt", "..", ""])
    discard_output(lab)
    assert list(lab.iterdir()) == []
    assert (tmp_path / "outside.txt").read_text() == "mine\n"


def test_sequence_out_that_is_a_reference_input_is_refused_as_one(tmp_path, tiny_gpt2):
    """Every command checks the same input options (model, reference model, frequency corpus) against --out, so
    sequence names a reference model or frequency corpus given as --out as the input it is."""
    import shutil

    sets = make_sets(tmp_path)
    ref_model, corpus = shutil.copytree(tiny_gpt2, tmp_path / "ref_model"), tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "c.txt").write_text("a reference text\n")
    before = snapshot(tmp_path)
    common = ["sequence", "--members", sets["mem"], "--nonmembers", sets["non"], "--model", tiny_gpt2]
    for extra, out in (
        (["--ref-model", ref_model], ref_model),
        (["--methods", "dcpdd", "--freq-corpus", corpus], corpus),
    ):
        assert_clean_error(run(*common, *extra, "--out", out), "is or contains the input")
    assert snapshot(tmp_path) == before
