"""The typed run objects: the API builds them from its keywords or takes them as given, and the command line
travels in the run context to where provenance is written."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import corpus_ids, corpus_text

from docaudit import api
from docaudit.cli import main
from docaudit.config import ModelConfig
from docaudit.outputs import provenance
from docaudit.run import DetectorSpec, DocumentSpec, ModelSpec, RunContext, take


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """Six member and six non-member slices of real books, one file each."""
    root = tmp_path_factory.mktemp("sets")
    for group in ("members", "nonmembers"):
        (root / group).mkdir()
        for b in corpus_ids(group, 6):
            (root / group / f"{b}.txt").write_text(corpus_text(group, b, 20000, 1500), encoding="utf-8")
    return str(root / "members"), str(root / "nonmembers")


def test_take_replaces_the_given_fields_and_removes_their_keywords():
    options = {"raw": True, "seed": 3}
    assert take(DocumentSpec, options, DocumentSpec(normalize_chars=True)) == DocumentSpec(True, True)
    assert options == {"seed": 3}
    assert take(RunContext, options) == RunContext(seed=3) and options == {}
    assert take(DetectorSpec, {"methods": "loss"}).methods == "loss"
    assert ModelSpec().model == ModelConfig()


def test_run_context_keeps_its_command_as_strings():
    assert RunContext(command=["docaudit", Path("a b")]).command == ("docaudit", "a b")


def _same(a, b):
    drop = {"wall_seconds"}
    assert a.table.equals(b.table) and a.per_fold.equals(b.per_fold) and a.documents.equals(b.documents)
    assert {k: v for k, v in a.info.items() if k not in drop} == {k: v for k, v in b.info.items() if k not in drop}


def test_evaluate_takes_objects_and_keywords_alike(sets):
    members, nonmembers = sets
    by_keywords = api.evaluate([members], [nonmembers], methods="blind", folds=3, seed=2, raw=True)
    by_objects = api.evaluate(
        [members], [nonmembers], methods="blind", folds=3, reading=DocumentSpec(raw=True), run=RunContext(seed=2)
    )
    replaced = api.evaluate(
        [members], [nonmembers], methods="blind", folds=3, raw=True, reading=DocumentSpec(), run=RunContext(seed=2)
    )
    _same(by_keywords, by_objects)
    _same(by_keywords, replaced)
    other_seed = api.evaluate([members], [nonmembers], methods="blind", folds=3, raw=True, run=RunContext(seed=7))
    assert other_seed.info["seed"] == 7 and by_objects.info["seed"] == 2
    assert other_seed.info["fold_test_documents"] != by_objects.info["fold_test_documents"]


def test_positional_arguments_keep_their_order_and_wrong_calls_are_refused(sets):
    members, nonmembers = sets
    by_position = api.data_check(members, nonmembers, True, False, 3, 1, False)
    assert by_position == api.data_check(members, nonmembers, raw=True, folds=3, seed=1)
    with pytest.raises(TypeError, match="at most 7"):
        api.data_check(members, nonmembers, True, False, 3, 1, False, None, False, "one too many")
    with pytest.raises(TypeError, match="multiple values for raw"):
        api.data_check(members, nonmembers, True, raw=False)
    with pytest.raises(TypeError, match="unexpected keyword arguments: bogus"):
        api.evaluate([members], [nonmembers], methods="blind", bogus=1)


def test_a_command_line_does_not_outlive_its_command():
    """Provenance names the command line the run context carries; a command that ran before in the same process
    leaves nothing behind for later API calls (a module global did)."""
    assert CliRunner().invoke(main, ["score", "--help"]).exit_code == 0
    assert provenance()["command"] == shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])
    assert provenance(command=("docaudit", "report", "my books"))["command"] == "docaudit report 'my books'"


def test_report_writes_the_command_line_of_its_run_context(sets, tiny_gpt2, tmp_path):
    members, nonmembers = sets
    books = sorted(Path(members).glob("*.txt"))[:2]
    api.report(
        books,
        sorted(Path(members).glob("*.txt"))[2:],
        [nonmembers],
        tmp_path / "report",
        model=ModelConfig(model=str(tiny_gpt2)),
        snippets=2,
        snippet_words=20,
        book_bootstrap_samples=20,
        run=RunContext(command=("docaudit", "report", "my books")),
    )
    info = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))["info"]
    assert info["provenance"]["command"] == "docaudit report 'my books'"
