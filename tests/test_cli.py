import configparser
import dataclasses
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import corpus_ids, corpus_text

from docaudit import __version__
from docaudit.cli import guard, main
from docaudit.cli.command import SECTION_TITLES, ConfigCommand
from docaudit.cli.options import config_from, field_options
from docaudit.config import SECTIONS, ModelConfig, setting
from docaudit.inference.verdicts import VERDICTS

FAST = ["--context", "16", "--trees", "20", "--bins", "20", "--norm", "max_tf", "--features", "hist", "--folds", "2"]


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
        "blind_folds.skops",
        "conformal.skops",
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
    new = tmp_path / "new.txt"  # not a training document
    new.write_text(sorted(sets["non"].iterdir())[0].read_text()[::-1])
    result = run("predict", "--classifier", out, "--model", tiny_gpt2, "--format", "json", book, sets["non"], new)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    rows = payload["rows"]
    assert len(rows) == 6 and payload["model"]["id"] == str(tiny_gpt2)
    for row in rows:
        assert 0 <= row["membership_score"] <= 1 and row["n_tokens"] > 1
        assert row["verdict"] in VERDICTS and "prediction" not in row
        assert 1 / 5 <= row["p_value_blind"] <= 1 and row["smallest_p"] == 1 / 5
    # the classifier's own training documents: fit as members or non-members, so no p-value means anything
    for row in rows[:5]:
        assert row["verdict"] == "inconclusive" and row["reason_codes"][0] == "training_document"
        assert set(row["reason_codes"][1:]) <= {"classifier_at_chance", "distribution_shift"}  # the card's own
        assert row["p_value"] is None and row["q_value"] is None
    # four known non-members: the smallest p-value, 1/5, can never reach 0.05
    assert 1 / 5 <= rows[5]["p_value"] <= 1 and rows[5]["reason_codes"][-1] == "too_few_nonmembers"
    assert rows[5]["verdict"] == "inconclusive" and "too few known non-members" in rows[5]["reason"]
    text = run("predict", "--classifier", out, "--model", tiny_gpt2, new, book).output
    assert "next step: give at least the number named of known non-members (docaudit train --members DIR" in text
    assert "next step: this document trained the classifier itself" in text
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
    book = sorted(trained.parent.parent.glob("trained-sets*/mem/*.txt"))[0]
    old = tmp_path / "old"
    shutil.copytree(trained, old)
    (old / "folds.skops").unlink()
    (old / "blind_folds.skops").unlink()
    (old / "card.json").write_text(json.dumps({k: v for k, v in card.items() if k != "conformal"}))
    result = run("predict", "--classifier", old, "--model", tiny_gpt2, "--format", "json", book)
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["rows"][0]
    assert row["verdict"] == "inconclusive" and "train it again" in row["reason"] and row["p_value"] is None
    assert row["reason_codes"] == ["training_document", "retrain"]
    # a classifier saved before the full-conformal p-value (fold models, no conformal.skops): asked to retrain
    older = tmp_path / "older"
    shutil.copytree(trained, older)
    (older / "conformal.skops").unlink()
    new = tmp_path / "new.txt"
    new.write_text(book.read_text()[::-1])
    result = run("predict", "--classifier", older, "--model", tiny_gpt2, "--format", "json", new)
    row = json.loads(result.stdout)["rows"][0]
    assert row["reason_codes"][0] == "retrain" and row["p_value"] is None and row["p_value_blind"] is not None

    bad = tmp_path / "bad"
    shutil.copytree(trained, bad)
    (bad / "blind_folds.skops").write_bytes(sio.dumps([FunctionTransformer(np.exp)] * 2))
    assert_clean_error(run("predict", "--classifier", bad, "--model", tiny_gpt2, book), "untrusted types")
    tampered = tmp_path / "tampered"
    shutil.copytree(trained, tampered)
    (tampered / "conformal.skops").write_bytes(sio.dumps({"pipeline": FunctionTransformer(np.exp)}))
    assert_clean_error(run("predict", "--classifier", tampered, "--model", tiny_gpt2, new), "untrusted types")


def test_predict_refuses_an_alpha_outside_0_1(trained):
    book = sorted(trained.parent.parent.glob("trained-sets*/mem/*.txt"))[0]
    assert_clean_error(run("predict", "--classifier", trained, "--alpha", "0", book), "--alpha must be in (0, 1)")


ROOT = Path(__file__).resolve().parents[1]


def all_commands(group=main, path=()):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from all_commands(command, (*path, name))
        else:
            yield (*path, name), command


@pytest.mark.parametrize("module", ["docaudit", "docaudit.cli"])
def test_python_dash_m_runs_the_command_line(module):
    def python_m(*args):
        return subprocess.run(
            [sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=ROOT, timeout=120
        )

    shown = python_m("--help")
    assert shown.returncode == 0, shown.stderr
    assert all(f"  {name} " in shown.stdout for name in main.commands), shown.stdout
    assert __version__ in python_m("--version").stdout
    wrong = python_m("score", "--no-such-option")
    assert wrong.returncode == 2 and wrong.stderr.strip().startswith("error: No such option")


def help_sections(text: str) -> dict[str, list[str]]:
    """The long options listed under each section title of a command's help, in the order shown."""
    sections, current = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = sections.setdefault(line[:-1], [])
        elif current is not None and line.startswith("  -"):
            first_column = line.strip().split("  ")[0]
            current += [word.strip(",") for word in first_column.split() if word.startswith("--")]
    return sections


@pytest.mark.parametrize("path", [p for p, _ in all_commands()], ids=" ".join)
def test_each_commands_help_lists_its_options_by_section(path):
    command = dict(all_commands())[path]
    sections = help_sections(run(*path, "--help").stdout)
    assert list(sections) == [t for t in SECTION_TITLES.values() if t in sections]  # in the one order
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            title = SECTION_TITLES[getattr(param, "section", None)]
            assert next(o for o in param.opts if o.startswith("--")) in sections[title], (param.opts, title)
    if "api_base" in {p.name for p in command.params}:  # the backend's own options apart from the others
        openai = sections["OpenAI-compatible backend (--backend openai)"]
        assert "--api-base" in openai and "--api-timeout" in openai and "--model" not in openai
        assert not any(o.startswith("--api-") for t, opts in sections.items() for o in opts if "openai" not in t)


def test_the_sections_of_the_querying_commands():
    expected = [
        "Inputs",
        "Model",
        "Query",
        "Method",
        "Output",
        "Options",
        "OpenAI-compatible backend (--backend openai)",
    ]
    assert list(help_sections(run("evaluate", "--help").stdout)) == expected
    shown = run("data", "check", "--help").stdout
    assert list(help_sections(shown)) == ["Inputs", "Method", "Output", "Options"]
    assert shown.count("SET_A") == 1  # the arguments are in the usage line only
    lab = help_sections(run("lab", "--help").stdout)
    assert "--positions" in lab["Target model"] and "--trap-copies" in lab["Traps"]


@dataclasses.dataclass(frozen=True)
class Toy:
    size: int = setting(3, "How many.", "method")
    ratio: float | None = setting(None, "A share.", "query", flag="--share")
    mode: str = setting("a", "Which mode.", "inputs", choices=("a", "b"))
    names: tuple[str, ...] = setting(("x", "y"), "Names.", "method")
    loud: bool = setting(False, "Be loud.", "output")
    kept: int = 7


@click.command(cls=ConfigCommand)
@field_options(Toy, "size", "ratio", "mode", "names", "loud")
def toy(**kw):
    click.echo(repr(config_from(Toy, kw, skip=("names",))) + f" names={kw['names']}")


def test_an_option_is_built_from_its_field():
    assert set(SECTION_TITLES) == {*SECTIONS, None}  # every section has a title in the help
    with pytest.raises(ValueError, match="unknown help section"):
        setting(1, "A number.", "misc")
    runner = CliRunner()
    assert runner.invoke(toy, []).stdout.strip() == repr(Toy()) + " names=x,y"
    given = runner.invoke(toy, ["--size", "5", "--share", "0.5", "--mode", "b", "--loud", "--names", "z"])
    assert given.stdout.strip() == repr(Toy(size=5, ratio=0.5, mode="b", loud=True)) + " names=z"
    assert runner.invoke(toy, ["--mode", "c"]).exit_code == 2
    assert runner.invoke(toy, ["--size", "many"]).exit_code == 2
    assert runner.invoke(toy, ["--ratio", "0.5"]).exit_code == 2  # the field names its flag --share
    sections = help_sections(runner.invoke(toy, ["--help"]).stdout)
    assert sections["Method"] == ["--size", "--names"] and sections["Query"] == ["--share"]
    assert sections["Inputs"] == ["--mode"] and sections["Output"] == ["--loud"]
    shown = " ".join(runner.invoke(toy, ["--help"]).stdout.split())
    assert "--size INTEGER How many. [default: 3]" in shown and "--mode [a|b] Which mode. [default: a]" in shown


def test_every_querying_command_declares_the_model_options_of_the_config():
    fields = {f.name: f for f in dataclasses.fields(ModelConfig)}
    for path, command in all_commands():
        params = {p.name: p for p in command.params}
        if "api_base" not in params:
            continue
        # every command that queries a server; ``probe`` only asks it to write, so has no --backend or --kv-cache
        scoring = ("backend", "kv_cache") if path != ("probe",) else ()
        for name in ("model", "dtype", "api_base", "api_timeout", "api_retries", *scoring):
            assert params[name].default == fields[name].default, (path, name)
            assert params[name].help == fields[name].metadata["help"], (path, name)
            assert params[name].section == fields[name].metadata["section"], (path, name)


URL = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    "name, text",
    [
        ("flat.toml", f'[score]\nbackend = "openai"\napi-base = "{URL}"\napi-timeout = 5.0\n'),
        ("nested.toml", f'[score]\nbackend = "openai"\n[score.openai]\napi-base = "{URL}"\napi_timeout = 5.0\n'),
        ("shared.toml", f'[openai]\napi-base = "{URL}"\napi-timeout = 5.0\n[score]\nbackend = "openai"\n'),
        ("sectionless.toml", f'backend = "openai"\n[openai]\napi-base = "{URL}"\napi-timeout = 5.0\n'),
        ("nested.yaml", f"score:\n  backend: openai\n  openai:\n    api-base: {URL}\n    api-timeout: 5.0\n"),
        ("shared.yml", f"openai:\n  api-base: {URL}\n  api-timeout: 5.0\nscore:\n  backend: openai\n"),
    ],
)
def test_the_openai_options_may_have_their_own_config_section(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    shown = run("config", "show", "score", "--config", path, "--format", "json")
    assert shown.exit_code == 0, shown.output
    values = json.loads(shown.stdout)["score"]
    assert (values["backend"], values["api-base"], values["api-timeout"], values["context"]) == (
        "openai",
        URL,
        5.0,
        128,
    )


def test_openai_config_sections_precedence_and_errors(tmp_path):
    def config(text):
        path = tmp_path / "c.toml"
        path.write_text(text)
        return path

    own_wins = config("[openai]\napi-timeout = 5.0\napi-retries = 1\n[score]\napi-timeout = 7.0\n")
    values = json.loads(run("config", "show", "score", "--config", own_wins, "--format", "json").stdout)["score"]
    assert (values["api-timeout"], values["api-retries"]) == (7.0, 1)
    other = config("[openai]\napi-timeout = 5.0\n[data.check]\nfolds = 3\n")  # a command without them ignores it
    values = json.loads(run("config", "show", "data", "check", "--config", other, "--format", "json").stdout)
    assert values["data.check"]["folds"] == 3
    for text, message in [
        ("[score.openai]\ncontext = 64\n", "[score.openai] has no option 'context' (options: api-base,"),
        ("[openai]\ncontext = 64\n[score]\n", "[openai] has no option 'context'"),
        ("[score]\napi-timeout = 5.0\n[score.openai]\napi-timeout = 6.0\n", "is also given in [score.openai]"),
        ("[data.check.openai]\napi-timeout = 5.0\n", "[data.check.openai] has no option 'api-timeout'"),
        ("[score.openai]\napi-timeout = inf\n", "not a finite number"),
        ("[report]\nsnippets = 3\n[openai]\napi-retries = 1\n", "no [score] section"),
    ]:
        path = config(text)
        command = ("data", "check") if "data.check" in text else ("score",)
        assert_clean_error(run(*command, "--config", path), message)


def test_the_package_is_typed_and_its_entry_point_is_the_guard_of_the_group():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert "py.typed" in cfg["options.package_data"]["docaudit"].split()
    assert (ROOT / "docaudit" / "py.typed").is_file()
    name, target = cfg["options.entry_points"]["console_scripts"].strip().split(" = ")
    module, attribute = target.split(":")
    assert name == "docaudit" and getattr(importlib.import_module(module), attribute) is guard.main


def test_no_command_line_module_is_long():
    lengths = {
        p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in (ROOT / "docaudit" / "cli").glob("*.py")
    }
    assert max(lengths.values()) <= 300, lengths
