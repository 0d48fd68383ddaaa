"""One spelling per option across commands (the former spellings still read, hidden from the help), `report
--methods` with several methods, and counts that name what they count."""

import json

import click
import pytest
from test_cli import assert_clean_error, make_sets, run
from test_evaluate_report import make_books, report_args

from docaudit.cli import main
from docaudit.cli.evaluate import sequence_count

# (command path, new spelling, former spelling, parameter, a value)
RENAMES = [
    (("sequence",), "--resamples", "--n-boot", "resamples", "7"),
    (("sequence",), "--folds", "--blind-folds", "folds", "3"),
    (("report",), "--resamples", "--book-bootstrap", "resamples", "7"),
    (("traps", "detect"), "--ref-model", "--reference-model", "ref_model", "base"),
    (("traps", "make"), "--trap-tokens", "--tokens", "trap_tokens", "7"),
    (("traps", "make"), "--trap-copies", "--copies", "trap_copies", "7"),
]


def _command(path):
    command = main
    for name in path:
        command = command.commands[name]
    return command


def _parsed(path, args):
    """The parameters a command parses from ``args`` (its required inputs given), without running it."""
    command = _command(path)
    required = {
        ("sequence",): ["--members", "m", "--nonmembers", "n"],
        ("report",): ["b", "--calibrate-members", "m", "--calibrate-nonmembers", "n", "--out", "o"],
        ("traps", "detect"): ["--registry", "r"],
        ("traps", "make"): ["d", "--out", "o", "--registry", "r"],
    }[path]
    parent = main.make_context("docaudit", list(path), resilient_parsing=True)
    return command.make_context(path[-1], [*required, *args], parent=parent).params


@pytest.mark.parametrize("path,new,old,param,value", RENAMES)
def test_former_spellings_still_work_and_are_hidden(path, new, old, param, value, tmp_path):
    expected = int(value) if value.isdigit() else value
    assert _parsed(path, [new, value])[param] == expected
    assert _parsed(path, [old, value])[param] == expected
    default = _parsed(path, [])[param]
    assert default != expected
    helped = run(*path, "--help")
    assert helped.exit_code == 0 and new in helped.stdout and f" {old} " not in helped.stdout
    shown = run("config", "show", *path)
    assert new.lstrip("-") + " =" in shown.stdout or f"# {new.lstrip('-')} =" in shown.stdout
    assert not any(line.lstrip("# ").startswith(old.lstrip("-") + " =") for line in shown.stdout.splitlines())
    # a config file may still use the former key (a file without sections gives every command's options)
    config = tmp_path / "former.toml"
    config.write_text(f"{old.lstrip('-').replace('-', '_')} = {json.dumps(expected)}\n")
    assert _parsed(path, ["--config", str(config)])[param] == expected


def test_one_spelling_per_idea_across_commands():
    def shown(command):
        return {o for p in command.params if isinstance(p, click.Option) and not p.hidden for o in p.opts}

    commands = {" ".join(p): shown(_command(p)) for p in (("sequence",), ("report",), ("traps", "make"))}
    commands |= {"traps detect": shown(_command(("traps", "detect"))), "lab": shown(main.commands["lab"])}
    every = set().union(*commands.values())
    assert not {"--n-boot", "--book-bootstrap", "--reference-model", "--tokens", "--copies", "--blind-folds"} & every
    assert "--resamples" in commands["sequence"] and "--resamples" in commands["report"]
    assert {"--trap-tokens", "--trap-copies", "--traps-per-doc"} <= commands["traps make"] & commands["lab"]
    assert "--ref-model" in commands["traps detect"] and "--ref-model" in commands["report"]


def test_sequence_count_names_its_unit():
    assert sequence_count([10, 10, 10, 10], 128, 40) == (
        "40 sequences (windows of 128 tokens) from 4 documents, 10 per document (at most 40 sampled from each)"
    )
    assert sequence_count([3, 40], 64, 40).startswith("43 sequences (windows of 64 tokens) from 2 documents, 3-40 ")


def test_evaluate_counts_sequences_and_documents(tmp_path, tiny_gpt2):
    sets = make_sets(tmp_path)
    args = ["evaluate", "--members", sets["mem"], "--nonmembers", sets["non"], "--model", tiny_gpt2]
    args += ["--context", "32", "--methods", "loss", "--no-meta", "--no-blind", "--folds", "2"]
    done = run(*args)
    assert done.exit_code == 0, done.output
    evaluation = json.loads(run(*args, "--format", "json").stdout)
    per_document = evaluation["info"]["sequences_per_document"]
    assert len(per_document) == 8 and sum(per_document) > 0
    assert f"{sum(per_document)} sequences (windows of 32 tokens) from 8 documents" in done.stdout
    # 4 non-members, 2 per fold: the document rows cannot estimate TPR at 10% FPR (the sequence row can: its column
    # stays, "n/a" where it is not defined); no row can at 1% FPR, and the note above the table says why
    assert "TPR@10%FPR" in done.stdout and "n/a (needs ≥ 10 non-members per fold)" in done.stdout
    assert "TPR at 1% FPR not shown: needs ≥ 100 non-members per fold" in done.stdout and "TPR@1%" not in done.stdout
    assert all(row["tpr_at_1fpr_mean"] is None for row in evaluation["methods"])


def test_report_takes_several_methods(tiny_gpt2, tmp_path):
    books = make_books(tmp_path, n_chars=900)
    out = tmp_path / "rep"
    both = run(*report_args(books, tiny_gpt2, out, "--methods", "loss,minkpp"))
    assert both.exit_code == 0, both.output
    assert f"== loss: {out / 'loss'} ==" in both.stdout and f"== minkpp: {out / 'minkpp'} ==" in both.stdout
    for method in ("loss", "minkpp"):
        written = json.loads((out / method / "report.json").read_text())
        assert written["info"]["method"] == method
        alone = run(*report_args(books, tiny_gpt2, tmp_path / f"alone-{method}", "--methods", method))
        assert alone.exit_code == 0, alone.output
        again = json.loads((tmp_path / f"alone-{method}" / "report.json").read_text())
        decided = ("verdict", "reason", "q_value")  # alone at alpha, beside another method at alpha / 2
        assert [{k: v for k, v in b.items() if k not in decided} for b in again["books"]] == [
            {k: v for k, v in b.items() if k not in decided} for b in written["books"]
        ]
        assert written["info"]["verdicts"]["alpha_per_method"] == 0.025 and again["info"]["verdicts"]["n_methods"] == 1
    assert not (out / "report.json").exists()
    refused = run(*report_args(books, tiny_gpt2, tmp_path / "r2", "--methods", "loss,minkpp", "--format", "json"))
    assert_clean_error(refused, "--format json prints one report")
    assert_clean_error(run(*report_args(books, tiny_gpt2, tmp_path / "r3", "--methods", "loss,nope")), "nope")
    assert not (tmp_path / "r2").exists() and not (tmp_path / "r3").exists()


def test_data_check_counts_crlf_in_the_files(tmp_path):
    sets = make_sets(tmp_path)
    for path in sets["mem"].iterdir():  # every member file with Windows line ends
        path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    done = run("data", "check", sets["mem"], sets["non"], "--folds", "2", "--format", "json")
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert (result["a"]["docs_with_crlf"], result["b"]["docs_with_crlf"]) == (1.0, 0.0)
    table = run("data", "check", sets["mem"], sets["non"], "--folds", "2").stdout
    (line,) = [row for row in table.splitlines() if "CRLF" in row]
    assert line.startswith("files with CRLF line ends") and line.split()[-2:] == ["100.0%", "0.0%"]
    # 4 + 4 documents, 2 folds: 2 non-members per fold cannot estimate TPR at 10% or 1% FPR
    assert "TPR@10%FPR n/a (needs ≥ 10 non-members per fold)" in table


def test_dataset_test_takes_the_suspect_documents_as_arguments(tmp_path, tiny_gpt2):
    # the documents under test are arguments, as in predict, score and report; --suspect is the former spelling
    sets = make_sets(tmp_path)
    common = ["--nonmembers", sets["non"], "--model", tiny_gpt2, "--context", "32", "--methods", "loss,zlib"]
    common += ["--splits", "2", "--format", "json"]
    new = run("dataset-test", sets["mem"], *common)
    old = run("dataset-test", "--suspect", sets["mem"], *common)
    assert new.exit_code == 0 and old.exit_code == 0, new.output + old.output
    assert json.loads(new.stdout)["p_value"] == json.loads(old.stdout)["p_value"]
    assert json.loads(new.stdout)["n_suspect"] == 4
    helped = run("dataset-test", "--help").stdout
    assert "[SUSPECT]..." in helped and "--suspect" not in helped
    assert_clean_error(run("dataset-test", *common), "give the suspect documents")


def test_grid_table_says_why_a_tpr_is_missing():
    import pandas as pd

    from docaudit.report.tables import format_grid

    table = pd.DataFrame(
        [{"context": 32, "auc_mean": 0.5, "tpr_at_10fpr_mean": 0.25, "tpr_at_1fpr_mean": None, "tpr_at_1fpr_std": None}]
    )
    line = format_grid(table).splitlines()[1]
    assert "0.250" in line and line.count("n/a (needs ≥ 100 non-members per fold)") == 2


def test_sequence_counts_texts_and_says_why_a_tpr_is_missing(tmp_path, tiny_gpt2):
    sets = make_sets(tmp_path)
    args = ["sequence", "--members", sets["mem"], "--nonmembers", sets["non"], "--model", tiny_gpt2]
    done = run(*args, "--methods", "loss", "--resamples", "20", "--folds", "2", "--max-context", "64")
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("4 member and 4 non-member texts; ")
    # 4 non-members in all: TPR at 10% and 1% FPR cannot be estimated, and the table says why
    assert "n/a (needs ≥ 10 non-members)" in done.stdout and "n/a (needs ≥ 100 non-members)" in done.stdout
