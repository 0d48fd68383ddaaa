"""The typed run objects: the API's requests hold them with their defaults, the run context's seed reaches the
audit, and the command line travels in the run context to where provenance is written."""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import corpus_ids, corpus_text

from docaudit import api
from docaudit.audit.specs import EvaluationSpec, ReportSpec
from docaudit.cli import main
from docaudit.config import ContaminationConfig, ModelConfig
from docaudit.outputs import provenance
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec, RunContext


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """Six member and six non-member slices of real books, one file each."""
    root = tmp_path_factory.mktemp("sets")
    for group in ("members", "nonmembers"):
        (root / group).mkdir()
        for b in corpus_ids(group, 6):
            (root / group / f"{b}.txt").write_text(corpus_text(group, b, 20000, 1500), encoding="utf-8")
    return str(root / "members"), str(root / "nonmembers")


def test_a_request_holds_the_typed_groups_with_their_own_defaults():
    request = api.ScoreRequest(["book.txt"])
    assert request.models == ModelSpec() and request.models.model == ModelConfig()
    assert request.detectors == DetectorSpec() and request.reading == DocumentSpec() and request.run == RunContext()
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.documents = ["other.txt"]


def test_run_context_keeps_its_command_as_strings():
    assert RunContext(command=["docaudit", Path("a b")]).command == ("docaudit", "a b")


def _same(a, b):
    drop = {"wall_seconds"}
    assert a.table.equals(b.table) and a.per_fold.equals(b.per_fold) and a.documents.equals(b.documents)
    assert {k: v for k, v in a.info.items() if k not in drop} == {k: v for k, v in b.info.items() if k not in drop}


def test_evaluate_is_seeded_by_its_run_context(sets):
    members, nonmembers = sets

    def evaluate(seed: int):
        request = api.EvaluateRequest(
            [members],
            [nonmembers],
            detectors=DetectorSpec("blind"),
            spec=EvaluationSpec(folds=3),
            reading=DocumentSpec(raw=True),
            run=RunContext(seed=seed),
        )
        return api.evaluate(request).evaluation

    first, again, other_seed = evaluate(2), evaluate(2), evaluate(7)
    _same(first, again)
    assert other_seed.info["seed"] == 7 and first.info["seed"] == 2
    assert other_seed.info["fold_test_documents"] != first.info["fold_test_documents"]


def test_data_check_takes_its_folds_and_seed_from_its_request(sets):
    members, nonmembers = sets
    result = api.data_check(api.DataCheckRequest(members, nonmembers, 3, DocumentSpec(raw=True), RunContext(seed=1)))
    assert (result.check["n_a"], result.check["n_b"], result.check["folds"], result.check["seed"]) == (6, 6, 3, 1)
    assert [row["set"] for row in result.rows] == [members, nonmembers]


def test_a_command_line_does_not_outlive_its_command():
    """Provenance names the command line the run context carries; a command that ran before in the same process
    leaves nothing behind for later API calls (a module global did)."""
    assert CliRunner().invoke(main, ["score", "--help"]).exit_code == 0
    assert provenance()["command"] == shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])
    assert provenance(command=("docaudit", "report", "my books"))["command"] == "docaudit report 'my books'"


def test_report_writes_the_command_line_of_its_run_context(sets, tiny_gpt2, tmp_path):
    members, nonmembers = sets
    books = sorted(Path(members).glob("*.txt"))[:2]
    request = api.ReportRequest(
        books,
        sorted(Path(members).glob("*.txt"))[2:],
        [nonmembers],
        tmp_path / "report",
        models=ModelSpec(ModelConfig(model=str(tiny_gpt2))),
        spec=ReportSpec(ContaminationConfig(snippets=2, snippet_words=20, book_bootstrap=20)),
        run=RunContext(command=("docaudit", "report", "my books")),
    )
    api.report(request)
    info = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))["info"]
    assert info["provenance"]["command"] == "docaudit report 'my books'"
