"""One convention across commands: --format, --config, --quiet, required options, docaudit_version, the cache."""

import json

import click
import pytest
from conftest import corpus_ids, corpus_text, results_of
from test_cli import assert_clean_error, make_sets, run

from docaudit import __version__, api
from docaudit.cli import FORMATS, main
from docaudit.config import ModelConfig, QueryConfig


@pytest.fixture()
def sets(tmp_path):
    return make_sets(tmp_path)


def all_commands(group=main, path=()):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from all_commands(command, (*path, name))
        else:
            yield (*path, name), command


def test_every_command_has_the_same_format_config_and_quiet_options():
    seen = 0
    for path, command in all_commands():
        params = {p.name: p for p in command.params}
        assert "quiet" in params, path
        assert any("--config" in p.opts for p in command.params), path
        if "fmt" in params:
            seen += 1
            assert tuple(params["fmt"].type.choices) == FORMATS and params["fmt"].default == "table", path
    assert seen >= 9  # train, predict, lab, dataset-test, data check, evaluate, score, report, config show, cache info


def test_option_names_mean_one_thing():
    lab = main.commands["lab"]
    lab_opts = {o for p in lab.params for o in p.opts}
    assert {"--train-batch-size", "--extra-dtypes", "--extra-quantize", "--positions"} <= lab_opts
    assert not {"--batch-size", "--dtype", "--quantize", "--context"} & lab_opts  # these mean the query elsewhere
    report = main.commands["report"]
    shown = {o for p in report.params if not getattr(p, "hidden", False) for o in p.opts}
    assert "--methods" in shown and "--method" not in shown
    required = {p.name for p in report.params if p.required}
    assert {"books", "calibrate_members", "calibrate_nonmembers", "out"} <= required
    assert "[required]" in run("report", "--help").stdout


def _config(tmp_path, sets, suffix, folds=2):
    if suffix == ".toml":
        text = f'[data.check]\nset-a = "{sets["mem"]}"\nset_b = "{sets["non"]}"\nfolds = {folds}\nformat = "json"\n'
    else:
        text = f"data:\n  check:\n    set-a: {sets['mem']}\n    set-b: {sets['non']}\n    folds: {folds}\n"
        text += "    format: json\n    quiet: true\n"
    path = tmp_path / f"audit{suffix}"
    path.write_text(text)
    return path


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_config_file_gives_every_option_and_the_command_line_wins(sets, tmp_path, suffix):
    direct = run("data", "check", sets["mem"], sets["non"], "--folds", "2", "--format", "json")
    assert direct.exit_code == 0, direct.output
    config = _config(tmp_path, sets, suffix)
    from_file = run("data", "check", "--config", config)
    assert from_file.exit_code == 0, from_file.output
    assert results_of(from_file.stdout) == results_of(direct.stdout)
    assert json.loads(from_file.stdout)["docaudit_version"] == __version__
    table = run("data", "check", "--config", config, "--format", "table")  # the command line wins
    assert table.exit_code == 0 and not table.stdout.startswith("{")

    shown = run("config", "show", "data", "check", "--config", config)
    assert shown.exit_code == 0, shown.output
    assert "[data.check]" in shown.stdout and "folds = 2" in shown.stdout and f'set-a = "{sets["mem"]}"' in shown.stdout
    saved = tmp_path / "shown.toml"  # what config show prints is a config file that gives the same run
    saved.write_text(shown.stdout)
    again = run("data", "check", "--config", saved, "--format", "json")
    assert again.exit_code == 0, again.output
    assert results_of(again.stdout) == results_of(direct.stdout)


def test_bad_config_files_are_one_line_errors(sets, tmp_path):
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[data.check]\nfodls = 2\n")
    assert_clean_error(
        run("data", "check", "--config", unknown), "has no option 'fodls' (options: drop-duplicates, folds, format"
    )
    broken = tmp_path / "broken.toml"
    broken.write_text("[data.check\n")
    assert_clean_error(run("data", "check", "--config", broken), "not valid TOML")
    other = tmp_path / "other.toml"
    other.write_text("[report]\nsnippets = 3\n")
    assert_clean_error(run("data", "check", "--config", other), "no [data.check] section")
    assert_clean_error(run("data", "check", "--config", tmp_path / "x.json"), "use a .toml, .yaml or .yml file")
    assert_clean_error(run("data", "check", "--config", tmp_path / "missing.toml"), "cannot read it")


def test_format_csv_and_json_versions(sets, tmp_path):
    csv = run("data", "check", sets["mem"], sets["non"], "--folds", "2", "--format", "csv")
    assert csv.exit_code == 0, csv.output
    assert csv.stdout.splitlines()[0].startswith("set,") and len(csv.stdout.splitlines()) == 3
    legacy = run("data", "check", sets["mem"], sets["non"], "--folds", "2", "--format", "text")
    assert (
        legacy.exit_code == 0 and legacy.stdout == run("data", "check", sets["mem"], sets["non"], "--folds", "2").stdout
    )


def test_no_progress_bars_off_a_terminal_nor_from_the_api(sets, tiny_gpt2, capfd):
    result = run("score", "--model", tiny_gpt2, "--context", "32", "--methods", "loss", "--format", "json", sets["mem"])
    assert result.exit_code == 0, result.output
    assert "%|" not in result.stderr and json.loads(result.stdout)["docaudit_version"] == __version__
    capfd.readouterr()
    models, detectors = api.ModelSpec(ModelConfig(model=str(tiny_gpt2))), api.DetectorSpec("loss")
    rows = api.score(api.ScoreRequest([sets["non"]], models, QueryConfig(context=32), detectors)).rows
    assert len(rows) == 4 and "%|" not in capfd.readouterr().err


def test_cache_info_and_clear_touch_only_docaudit_entries(sets, tiny_gpt2, tmp_path):
    assert run("score", "--model", tiny_gpt2, "--context", "32", "--methods", "loss", sets["mem"]).exit_code == 0
    info = run("cache", "info", "--format", "json")
    assert info.exit_code == 0, info.output
    summary = json.loads(info.stdout)
    entries = list((tmp_path / "cache" / "stats").rglob("*.npz"))
    stats = summary["kinds"]["stats"]
    assert stats["entries"] == len(entries) == 4 and stats["bytes"] == sum(p.stat().st_size for p in entries)
    # and the memo of the model folder's weights hash, and the throughput this run measured
    assert summary["entries"] == 7 and summary["kinds"]["rates"]["entries"] == 2  # the querier's rate, score's rest
    ((model, row),) = summary["models"].items()
    assert model.startswith("local@") and row["entries"] == 4
    assert "7 entries" in run("cache", "info").stdout
    stats = tmp_path / "cache" / "stats"
    foreign = [stats / "notes.txt", stats / "ab" / "mine.npz", stats / "ab" / ("c" * 64 + ".npz")]
    for f in foreign:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("not docaudit's")
    assert_clean_error(run("cache", "clear", "--model", "nope", "--yes"), "no cache entries of model 'nope'")
    cleared = run("cache", "clear", "--model", model, "--yes")
    assert cleared.exit_code == 0 and "removed 4 entries" in cleared.stdout
    assert all(f.read_text() == "not docaudit's" for f in foreign)
    assert json.loads(run("cache", "info", "--format", "json").stdout)["kinds"]["stats"]["entries"] == 0
    refused = run("cache", "clear")  # asks first; no answer: nothing removed
    assert refused.exit_code == 0 and "removed 0" in refused.stdout


def test_cache_clear_asks_before_deleting(sets, tiny_gpt2):
    assert run("score", "--model", tiny_gpt2, "--context", "32", "--methods", "loss", sets["mem"]).exit_code == 0
    no = run("cache", "clear")
    assert no.exit_code != 0 and json.loads(run("cache", "info", "--format", "json").stdout)["entries"] == 7


@pytest.fixture()
def one_doc(tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text(corpus_text("members", corpus_ids("members", 1)[0], n_chars=800))
    return doc


def test_quiet_is_accepted_everywhere(one_doc, tiny_gpt2):
    result = run("score", "--quiet", "--model", tiny_gpt2, "--context", "32", "--methods", "loss", one_doc)
    assert result.exit_code == 0, result.output
    assert "loss" in result.stdout.splitlines()[0]  # the default format is the table
