"""Quiet runs and fast failures: without progress nothing but warnings and errors reaches stderr (real subprocesses
whose stderr is a pipe, and the API under capfd); bad input is refused before torch or a model is loaded; one rule
for the folds; ``--dry-run`` says what a run would query and loads nothing; the query bar moves within one document."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_ids, corpus_text, document_sets
from test_gguf import write_gguf

from docaudit import api
from docaudit.audit.specs import EvaluationSpec
from docaudit.config import MetaConfig, ModelConfig, QueryConfig
from docaudit.config.rules import QUERY_TOKENS_PER_SECOND, check_folds, check_inner_folds
from docaudit.errors import DocauditError
from docaudit.io import sha256_text
from docaudit.run import DetectorSpec, ModelSpec, RunContext

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "sklearn", "skops", "scipy.stats")


def docaudit(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m docaudit ARGS`` in a real process, stdout and stderr pipes (not terminals)."""
    return subprocess.run(
        [sys.executable, "-m", "docaudit", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)} | (env or {}),
        timeout=300,
    )


def heavy_modules_after(*args) -> tuple[int, list[str], str]:
    """Run the command line in a fresh interpreter; its exit status, the heavy libraries it imported, its stderr."""
    code = (
        "import sys\nfrom docaudit.cli import main\n"
        f"try:\n    main({[str(a) for a in args]!r})\nexcept SystemExit as e:\n    status = e.code\n"
        f"print(status, [m for m in {HEAVY!r} if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300, env=os.environ
    )
    status, loaded = done.stdout.strip().splitlines()[-1].split(" ", 1)
    return int(status), eval(loaded), done.stderr


def only_warnings_and_errors(stderr: str) -> list[str]:
    """The lines of ``stderr`` that are neither warnings nor errors (what a quiet run must not print)."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith(("warning:", "error:"))]


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict[str, Path]:
    return document_sets(tmp_path_factory.mktemp("sets"), n=4, n_chars=1200)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory, tiny_llama) -> Path:
    directory = tmp_path_factory.mktemp("gguf")
    return write_gguf(tiny_llama, directory / "tiny.gguf")


def test_missing_document_is_refused_before_torch_loads():
    status, loaded, stderr = heavy_modules_after("predict", "/nonexistent/doc.txt")
    assert status != 0
    assert stderr.strip().splitlines() == ["error: /nonexistent/doc.txt: no such file or directory"]
    assert loaded == []


def test_too_few_documents_for_the_folds_is_refused_before_the_model(sets, tmp_path):
    # the model does not exist either: the folds are checked first, without torch
    status, loaded, stderr = heavy_modules_after(
        "evaluate", "--members", sets["mem"], "--nonmembers", sets["non"], "--model", tmp_path / "no-model"
    )
    assert status != 0 and loaded == []
    assert stderr.strip().splitlines() == [
        "error: too few documents for 5 folds: 4 members and 4 non-members (each class needs at least 5; add "
        "documents or use --folds 4)"
    ]


def test_inner_folds_of_the_meta_classifier_are_checked_before_the_model(sets):
    status, loaded, stderr = heavy_modules_after(
        "train", "--members", sets["mem"], "--nonmembers", sets["non"], "--folds", "2", "--out", "unused"
    )
    assert status != 0 and loaded == []
    assert stderr.strip().splitlines() == [
        "error: too few documents for --norm/--features auto: the inner cross-validation needs 3 members and "
        "non-members in every training fold, and 2 folds of 4 members and 4 non-members leave 2 (add documents, "
        "use --folds 4, or name --norm and --features)"
    ]


def test_refused_output_folder_before_the_model(sets, tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("the user's own file")
    status, loaded, stderr = heavy_modules_after(
        "evaluate", "--members", sets["mem"], "--nonmembers", sets["non"], "--folds", "2", "--no-meta", "--out", foreign
    )
    assert status != 0 and loaded == []
    assert "not empty and was not written by docaudit" in stderr
    assert (foreign / "notes.txt").read_text() == "the user's own file"


def test_data_check_follows_the_folds_rule_of_evaluate(sets):
    result = docaudit("data", "check", sets["mem"], sets["non"])
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "error: too few documents for 5 folds: 4 in set A and 4 in set B (each class needs at least 5; add documents "
        "or use --folds 4)"
    )
    assert result.stdout == ""


def test_check_folds_rule():
    check_folds(2, 2, 3)
    with pytest.raises(DocauditError, match="need at least 2 folds, got 1"):
        check_folds(1, 10, 10)
    with pytest.raises(DocauditError, match="3 members and 9 non-members"):
        check_folds(4, 3, 9)


def test_folds_advice_leads_somewhere():
    """The advice never points at a number of folds that is refused in turn: below 2 documents of a class only
    more documents help; otherwise the largest number of folds that works is named."""
    with pytest.raises(DocauditError) as refused:
        check_folds(2, 1, 10)
    assert "add documents" in str(refused.value) and "--folds" not in str(refused.value).split("(", 1)[1]
    with pytest.raises(DocauditError, match=r"use --folds 3\)") as refused:
        check_folds(5, 3, 9)
    check_folds(3, 3, 9)  # the advice holds
    meta = MetaConfig()  # inner folds of 3: n - ceil(n / k) training documents per class must reach 3
    with pytest.raises(DocauditError) as refused:
        check_inner_folds(meta, 2, 3, 3)
    assert "--folds" not in str(refused.value).split("(", 1)[1] and "add documents" in str(refused.value)
    with pytest.raises(DocauditError, match=r"add documents, use --folds 4,"):
        check_inner_folds(meta, 2, 4, 4)
    check_inner_folds(meta, 4, 4, 4)  # the advice holds


def test_dry_run_says_what_it_would_query_and_loads_nothing(sets, tmp_path):
    out = tmp_path / "out"
    args = ("evaluate", "--members", sets["mem"], "--nonmembers", sets["non"], "--folds", "2", "--no-meta")
    args += ("--out", out)
    status, loaded, _ = heavy_modules_after(*args, "--dry-run", "--context", "64")
    assert status == 0 and loaded == [] and not out.exists()
    result = docaudit(*args, "--dry-run", "--context", "64")
    assert result.returncode == 0 and result.stderr == ""
    chars = sum(f.stat().st_size for d in (sets["mem"], sets["non"]) for f in d.glob("*.txt"))
    sizes = [f.stat().st_size for d in (sets["mem"], sets["non"]) for f in d.glob("*.txt")]
    tokens = sum(-(-s // 4) for s in sizes)  # 4 characters per token, rounded up per document
    windows = sum(1 if t <= 64 else -(-(t - 64) // 63) + 1 for t in (-(-s // 4) for s in sizes))
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"dry run: querying 8 documents, ~{tokens:,} tokens, ~")
    assert lines[0].endswith(f" in all ({QUERY_TOKENS_PER_SECOND['transformers']:.0f} tok/s, documented)")
    assert f"{windows:,} model passes (windows of 64 tokens)" in lines[1]
    # the first use's conversion (the test's cache is empty), loading, then the passes: the documents, the
    # lowercased sequences and PAC's five copies of each sequence
    assert lines.pop(2).startswith("  converting the embedded model (its first use, once): 253 MB, ~")
    assert lines[2].startswith("  loading the model: once, ~")
    assert lines[3].startswith(f"  model passes: documents: ~{tokens:,} tokens, ~")
    assert lines[4].startswith("  model passes: lower: ~") and lines[5].startswith(
        "  model passes: pac (5 per text): ~"
    )
    lower, pac = (int(line.split("~")[1].split(" tokens")[0].replace(",", "")) for line in lines[4:6])
    assert pac == 5 * lower > 0
    assert chars > 0 and not out.exists()


@pytest.mark.slow
def test_dry_run_refuses_what_the_run_refuses(sets, tiny_gpt2):
    """The same folder as members and non-members: the dry run stops with the run's own error and status."""
    args = ("evaluate", "--members", sets["mem"], "--nonmembers", sets["mem"], "--folds", "2", "--model", tiny_gpt2)
    args += ("--context", "16", "--no-meta", "--methods", "loss")
    dry, real = docaudit(*args, "--dry-run"), docaudit(*args, "-q")
    assert real.returncode == 3 and "both in the members and the non-members" in real.stderr
    assert (dry.returncode, dry.stderr, dry.stdout) == (real.returncode, real.stderr, "")


@pytest.mark.slow
def test_estimates_use_the_rates_measured_here(sets, tiny_gpt2, tmp_path):
    """A real run records its load time and query rate in the cache; a dry run of the same model uses them."""
    from docaudit.config.rules import QUERY_TOKENS_PER_SECOND
    from docaudit.query import rates

    config = ModelConfig(model=str(tiny_gpt2))
    doc = sorted(sets["mem"].glob("*.txt"))[0]
    done = docaudit("score", doc, "--model", tiny_gpt2, "--context", "16", "--methods", "loss", "-q")
    assert done.returncode == 0, done.stderr
    key = rates.model_key(config)
    assert rates.measured(key, "load_s") > 0
    rates.record_query(config, 123_456, 2.0)  # as a query of 123,456 tokens in 2 s would
    assert rates.measured(key, "tokens_per_s") == 123_456 / 2.0 != QUERY_TOKENS_PER_SECOND["transformers"]
    dry = docaudit("score", doc, "--model", tiny_gpt2, "--context", "16", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "(61728 tok/s, measured on this machine)" in dry.stdout.splitlines()[0]
    assert "measured on this machine by earlier runs (docaudit's cache): query, load" in dry.stdout


def test_dry_run_of_predict_uses_the_card_query(tmp_path):
    docs = []
    for book in corpus_ids("members", 4):
        docs.append(tmp_path / f"{book}.txt")
        docs[-1].write_text(corpus_text("members", book, n_chars=4000))  # ~1,000 tokens each
    result = docaudit("predict", *docs, "--dry-run")
    assert result.returncode == 0, result.stderr
    # the shipped classifier's card queries at most 512 tokens of each document
    assert result.stdout.startswith("dry run: querying 4 documents, ~2,048 tokens")


@pytest.mark.parametrize("backend", ["transformers", pytest.param("llamacpp", marks=pytest.mark.slow)])
def test_quiet_run_prints_only_warnings_and_errors(sets, tiny_gguf, tmp_path, backend):
    """A GGUF model converted at first use (transformers) or read by llama.cpp, queried: with -q (and with a
    non-terminal stderr alone) stderr holds nothing but warning and error lines."""
    env = {"DOCAUDIT_CACHE": str(tmp_path / "cache")}
    doc = sorted(sets["mem"].glob("*.txt"))[0]
    args = ("score", doc, "--model", tiny_gguf, "--backend", backend, "--methods", "loss", "--context", "16")
    args += ("--format", "json")
    quiet = docaudit(*args, "-q", env=env)
    assert quiet.returncode == 0, quiet.stderr
    assert only_warnings_and_errors(quiet.stderr) == []
    assert json.loads(quiet.stdout)["rows"][0]["loss"] < 0
    piped = docaudit(*args, env={"DOCAUDIT_CACHE": str(tmp_path / "cache2")})
    assert piped.returncode == 0 and only_warnings_and_errors(piped.stderr) == []


def test_api_without_progress_prints_nothing(sets, tiny_gguf, capfd):
    doc = sorted(sets["mem"].glob("*.txt"))[0]
    models, detectors = ModelSpec(ModelConfig(model=str(tiny_gguf))), DetectorSpec("loss")
    rows = api.score(api.ScoreRequest([doc], models, QueryConfig(context=16), detectors)).rows
    assert rows[0]["loss"] < 0
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


def test_api_with_progress_shows_the_loading_step_and_the_conversion(sets, tiny_gguf, capfd):
    doc = sorted(sets["mem"].glob("*.txt"))[0]
    models, detectors = ModelSpec(ModelConfig(model=str(tiny_gguf))), DetectorSpec("loss")
    api.score(api.ScoreRequest([doc], models, QueryConfig(context=16), detectors, run=RunContext(progress=True)))
    err = capfd.readouterr().err
    assert f"loading model {tiny_gguf} ..." in err
    assert f"loaded model {tiny_gguf} in " in err
    assert "first use of tiny.gguf: converting to safetensors (once)" in err and "writing safetensors" in err


@pytest.mark.slow
def test_every_long_step_reports_with_progress_and_none_without(tiny_gpt2, tmp_path, capfd):
    """``evaluate`` with every step: loading, the query, the sequences' extra passes, the meta-classifier's fits (its
    inner search counted), the blind baselines and the beyond-blind refits each show a bar; without progress,
    nothing at all is printed."""
    from docaudit.config import MetaConfig, ScalingConfig

    sets = document_sets(tmp_path, n=6, n_chars=600)
    meta = MetaConfig(n_estimators=10, select_trees=10, bins=10, features="hist", n_jobs=1)
    request = api.EvaluateRequest(
        [sets["mem"]],
        [sets["non"]],
        models=ModelSpec(ModelConfig(model=str(tiny_gpt2))),
        query=QueryConfig(context=16),
        detectors=DetectorSpec("loss,lowercase"),
        spec=EvaluationSpec(meta=meta, scaling=ScalingConfig(n_sequences=4), folds=2),
        run=RunContext(progress=True),
    )
    api.evaluate(request)
    err = capfd.readouterr().err
    steps = ("loading model", "querying", "scoring sequences", "meta-classifier folds", "blind baselines")
    for step in (*steps, "beyond-blind refits"):
        assert step in err, step
    fits = 2 * (1 + 5 * 3)  # two folds, each five normalizations x three inner folds and the chosen pair's fit
    assert f"{fits}/{fits}" in err
    api.evaluate(dataclasses.replace(request, run=RunContext()))
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


def test_trap_generation_counts_tokens(tiny_gpt2, capfd):
    from docaudit.config import TrapConfig
    from docaudit.query.generate import generate_sequences
    from docaudit.query.models import load_model

    lm = load_model(ModelConfig(model=str(tiny_gpt2)))
    config = TrapConfig(tokens=8, batch_size=4, max_perplexity=1e9)
    made = generate_sequences(lm, 3, config, 0, progress=True)
    err = capfd.readouterr().err
    assert len(made.sequences) == 3 and "generating traps" in err and "tok" in err and "traps=" in err
    generate_sequences(lm, 3, config, 0, progress=False)
    assert capfd.readouterr().err == ""


def test_query_bar_moves_within_one_document(gpt2):
    """One long document: the backend reports its scored tokens batch by batch, all of them in the end."""
    from docaudit.query.progress import counting
    from docaudit.query.querier import Querier

    querier = Querier(gpt2, QueryConfig(context=16, batch_size=2), cache=None)
    text = corpus_text("members", corpus_ids("members", 1)[0], n_chars=3000)
    ids = np.asarray(querier.token_ids(text, sha256_text(text)))
    steps: list[int] = []
    with counting(steps.append):
        querier.compute_many([ids])
    assert len(steps) > 1
    assert sum(steps) == len(ids) - 1


def test_api_evaluate_and_train_without_progress_print_nothing(sets, tiny_gpt2, tmp_path, capfd):
    from docaudit.config import MetaConfig, TrainConfig

    model = ModelConfig(model=str(tiny_gpt2))
    members, nonmembers = [sets["mem"]], [sets["non"]]
    meta = MetaConfig(norm="ratio_tf", features="hist", folds=2, n_estimators=5, bins=10)
    query = QueryConfig(context=16)
    spec = EvaluationSpec(meta=meta, folds=2)
    request = api.EvaluateRequest(
        members, nonmembers, models=ModelSpec(model), query=query, detectors=DetectorSpec("loss"), spec=spec
    )
    assert len(api.evaluate(request).evaluation.table)
    api.train(api.TrainRequest(members, nonmembers, TrainConfig(model=model, query=query, meta=meta), tmp_path / "c"))
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""
