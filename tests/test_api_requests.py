"""The API's requests and results: a result's JSON and frame are what the command line prints, its files what it
writes; a Python user gets the reports of several methods and the dry-run estimate from the API."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import document_sets

from docaudit import api
from docaudit.audit.specs import EvaluationSpec, ReportSpec
from docaudit.cli import main
from docaudit.config import ContaminationConfig, ModelConfig, QueryConfig
from docaudit.errors import DocauditError
from docaudit.io import json_text
from docaudit.run import DetectorSpec, ModelSpec, RunContext

TIMES = {"created", "wall_seconds"}


def cli(*args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def without_times(value):
    """``value`` (parsed JSON) without the keys that hold a time or a duration, at any depth."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def as_printed(result) -> dict:
    return without_times(json.loads(json_text(result.to_json())))


def command(*args, seed: int = 0) -> RunContext:
    """The run context of ``docaudit ARGS``, as the command line makes it."""
    return RunContext(seed=seed, command=("docaudit", *map(str, args)))


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict[str, Path]:
    return document_sets(tmp_path_factory.mktemp("sets"), n=6, n_chars=1500)


def test_score_gives_the_rows_the_command_line_prints_skipped_documents_included(sets, tiny_gpt2, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for f in sorted(sets["mem"].glob("*.txt"))[:2]:
        (docs / f.name).write_text(f.read_text())
    (docs / "empty.txt").write_text("")
    args = ("score", docs, "--model", tiny_gpt2, "--context", "16", "--methods", "loss,zlib")
    printed = json.loads(cli(*args, "--format", "json"))
    models, detectors = ModelSpec(ModelConfig(model=str(tiny_gpt2))), DetectorSpec("loss,zlib")
    run = command(*args, "--format", "json")
    result = api.score(api.ScoreRequest([docs], models, QueryConfig(context=16), detectors, run=run))
    assert as_printed(result) == without_times(printed)
    assert [r["skipped"] for r in result.rows if "skipped" in r] == [s["reason"] for s in result.skipped]
    assert len(result.skipped) == 1 and result.rows[-1]["file"].endswith("empty.txt")
    assert result.to_frame().to_csv(index=False) == cli(*args, "--format", "csv")


@pytest.mark.slow
def test_data_check_gives_the_json_and_csv_the_command_line_prints(sets):
    args = ("data", "check", sets["mem"], sets["non"], "--folds", "3", "--seed", "4")
    result = api.data_check(
        api.DataCheckRequest(sets["mem"], sets["non"], 3, run=command(*args, "--format", "json", seed=4))
    )
    assert as_printed(result) == without_times(json.loads(cli(*args, "--format", "json")))
    assert result.to_frame().to_csv(index=False) == cli(*args, "--format", "csv")


@pytest.mark.slow
def test_evaluate_writes_what_its_result_holds(sets, tmp_path):
    """A model-free evaluation: its JSON is what the command line prints and what ``evaluation.json`` holds."""
    args = ("evaluate", "--members", sets["mem"], "--nonmembers", sets["non"], "--methods", "blind", "--folds", "3")
    request = api.EvaluateRequest(
        [sets["mem"]],
        [sets["non"]],
        tmp_path / "ev",
        detectors=DetectorSpec("blind"),
        spec=EvaluationSpec(folds=3),
        run=command(*args, "--format", "json"),
    )
    result = api.evaluate(request)
    assert as_printed(result) == without_times(json.loads(cli(*args, "--format", "json")))
    written = json.loads((tmp_path / "ev" / "evaluation.json").read_text(encoding="utf-8"))
    assert without_times(written)["methods"] == as_printed(result)["methods"]
    assert result.to_frame().to_csv(index=False) == cli(*args, "--format", "csv")


@pytest.mark.slow
def test_a_python_user_gets_one_report_per_method_in_its_folder(sets, tiny_gpt2, tmp_path):
    members = sorted(sets["mem"].glob("*.txt"))
    books, calibration = members[:2], members[2:]
    settings = ContaminationConfig(snippets=2, snippet_words=20, book_bootstrap=20)
    request = api.ReportRequest(
        books,
        calibration,
        [sets["non"]],
        tmp_path / "reports",
        methods="loss,zlib,loss",
        models=ModelSpec(ModelConfig(model=str(tiny_gpt2))),
        spec=ReportSpec(settings, alpha=0.1),
    )
    assert request.folders() == {m: tmp_path / "reports" / m for m in ("loss", "zlib")}
    [first, second] = api.estimate(request)  # the dry run: one estimate per method, nothing written
    assert first.plan().tokens == second.plan().tokens > 0 and not (tmp_path / "reports").exists()
    result = api.report(request)
    assert list(result.reports) == ["loss", "zlib"]
    for method, one in result.reports.items():
        assert one.out == tmp_path / "reports" / method
        written = json.loads((one.out / "report.json").read_text(encoding="utf-8"))
        assert written == one.to_json()
        info = one.report.info
        assert info["method"] == method and info["verdicts"]["n_methods"] == 2
        assert math.isclose(info["verdicts"]["alpha_per_method"], 0.1 / 2)
        assert (one.out / "report.csv").read_text() == one.to_frame().to_csv(index=False)
    frame = result.to_frame()
    assert list(frame.columns[:1]) == ["method"] and frame["method"].tolist() == ["loss", "loss", "zlib", "zlib"]
    with pytest.raises(DocauditError, match="several methods"):
        result.to_json()
    args = ("report", *books, "--calibrate-members", calibration[0], "--calibrate-members", calibration[1])
    args += ("--calibrate-members", calibration[2], "--calibrate-members", calibration[3])
    args += ("--calibrate-nonmembers", sets["non"], "--model", tiny_gpt2, "--methods", "loss,zlib", "--alpha", "0.1")
    args += ("--snippets", "2", "--snippet-words", "20", "--resamples", "20", "--out", tmp_path / "by-cli")
    printed = cli(*args)
    for method in ("loss", "zlib"):
        assert f"== {method}: {tmp_path / 'by-cli' / method} ==" in printed
        by_cli = (tmp_path / "by-cli" / method / "report.csv").read_text()
        assert by_cli == (tmp_path / "reports" / method / "report.csv").read_text()


def test_a_python_user_gets_the_dry_run_estimate(sets, tiny_gpt2, tmp_path):
    args = ("evaluate", "--members", sets["mem"], "--nonmembers", sets["non"], "--model", tiny_gpt2)
    args += ("--methods", "loss", "--no-meta", "--folds", "2", "--context", "64", "--out", tmp_path / "ev")
    request = api.EvaluateRequest(
        [sets["mem"]],
        [sets["non"]],
        tmp_path / "ev",
        models=ModelSpec(ModelConfig(model=str(tiny_gpt2))),
        query=QueryConfig(context=64),
        detectors=DetectorSpec("loss"),
        spec=EvaluationSpec(meta=None, folds=2),
    )
    [estimate] = api.estimate(request)
    plan = estimate.plan()
    assert len(estimate.files) == len(estimate.sizes) == plan.documents == 12
    lines = cli(*args, "--dry-run").splitlines()
    assert lines[0].startswith(f"dry run: querying 12 documents, ~{plan.tokens:,} tokens")
    assert lines[1].startswith(f"  {plan.windows:,} model passes (windows of 64 tokens)")
    assert not (tmp_path / "ev").exists()
    with pytest.raises(DocauditError, match="too few documents for 7 folds"):
        api.check(api.EvaluateRequest([sets["mem"]], [sets["non"]], spec=EvaluationSpec(folds=7)))


@pytest.mark.parametrize(
    "model, card",
    [
        (None, True),
        (ModelConfig(), True),
        (ModelConfig(device="cpu"), True),  # the user's device alone: the card's model, run here on the CPU
        (ModelConfig(model="gpt2"), False),
        (ModelConfig(backend="openai", api_base="http://127.0.0.1:9/v1", api_model="m"), False),
    ],
)
def test_predict_queries_the_card_model_unless_a_model_or_backend_is_named(model, card):
    from docaudit.api.classifier import card_or_user_model

    assert (card_or_user_model(model) is None) is card


def _python_blocks(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]


@pytest.mark.parametrize("doc", ["docs/python.md", "docs/scaling.md"])
def test_the_python_examples_build_the_requests_of_the_functions_they_call(doc, monkeypatch):
    """Every call of ``api.NAME(...)`` in the documentation's Python examples gets the request ``api.NAME`` is
    annotated with, built with real field names (the functions themselves are stood in for: no model is here)."""
    from typing import get_type_hints
    from unittest import mock

    called = []

    def stand_in(name):
        expected = get_type_hints(getattr(api, name))["request"]

        def function(request):
            assert isinstance(request, expected), (name, request)
            called.append(name)
            return [mock.MagicMock()] if name == "estimate" else mock.MagicMock()

        return function

    for name in ("train", "predict", "score", "evaluate", "report", "sequence", "estimate", "plan_audit", "audit"):
        monkeypatch.setattr(api, name, stand_in(name))
    root = Path(__file__).resolve().parents[1]
    blocks = [b for b in _python_blocks(root / doc) if "api." in b]
    assert blocks
    for block in blocks:
        exec(compile(block, doc, "exec"), {"model_config": ModelConfig(), "print": lambda *a: None})
    assert called
