"""The exit status says what kind of failure it was (docaudit/errors.py, the table in docs/commands.md), in
real processes:
0 success, 2 a command line click cannot parse, 3 bad input, 4 a model or backend that cannot be loaded or
reached, 70 a failure of docaudit itself (one line saying where to report it; ``--debug`` shows the traceback),
74 the machine refusing a file or folder (a full disk, a read-only file system).
And TOML config files are read on a Python without ``tomllib`` (3.10), through ``tomli``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from docaudit import errors

# the command line as installed: ``docaudit ARGS`` is ``python -c <this> ARGS``; PRELUDE runs before it
LAUNCH = "import sys; {prelude}\nfrom docaudit.cli import main\nsys.argv[0] = 'docaudit'\nmain()"


def docaudit(*args, prelude: str = "", cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", LAUNCH.format(prelude=prelude), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)},
    )


def one_error_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_the_statuses_are_distinct_and_documented():
    codes = [errors.USAGE, errors.BAD_INPUT, errors.MODEL_UNAVAILABLE, errors.INTERNAL, errors.INTERRUPTED]
    codes += [errors.BROKEN_PIPE, errors.MACHINE]
    assert len(set(codes)) == len(codes) and 0 not in codes and 1 not in codes
    assert errors.DocauditError.exit_code == errors.InputError.exit_code == errors.BAD_INPUT
    assert errors.ModelError.exit_code == errors.MODEL_UNAVAILABLE and issubclass(
        errors.ModelError, errors.DocauditError
    )
    assert errors.MachineError.exit_code == errors.MACHINE and issubclass(errors.MachineError, errors.DocauditError)
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "docs" / "commands.md").read_text(encoding="utf-8")
    for code in (0, *codes):
        assert f"| {code} |" in readme, code


def test_success_and_usage_errors(tmp_path):
    assert docaudit("cache", "info").returncode == 0
    assert docaudit("--help").returncode == 0
    for args in (("score", "--no-such-option", "x.txt"), ("evaluate", "--folds", "many"), ("no-such-command",)):
        done = docaudit(*args)
        assert done.returncode == errors.USAGE, (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_bad_input_is_status_3(tmp_path):
    done = docaudit("data", "check", tmp_path / "missing_a", tmp_path / "missing_b")
    assert done.returncode == errors.BAD_INPUT and "missing_a" in one_error_line(done)
    empty = tmp_path / "empty.txt"
    empty.write_text("   \n")
    done = docaudit("predict", "--classifier", tmp_path / "no_classifier", empty)
    assert done.returncode == errors.BAD_INPUT, done.stderr
    one_error_line(done)


def test_a_model_or_server_that_cannot_be_loaded_or_reached_is_status_4(tmp_path, tiny_gpt2):
    doc = tmp_path / "doc.txt"
    doc.write_text("Some text to score, long enough for a few tokens. " * 5)
    for model in (tmp_path / "missing.gguf", tmp_path / "no_such_model_dir/"):
        done = docaudit("score", doc, "--model", model, "--methods", "loss")
        assert done.returncode == errors.MODEL_UNAVAILABLE, done.stderr
        assert str(model.name) in one_error_line(done)
    not_a_model = tmp_path / "folder"
    not_a_model.mkdir()
    done = docaudit("score", doc, "--model", not_a_model, "--methods", "loss")
    assert done.returncode == errors.MODEL_UNAVAILABLE and "not a Hugging Face model" in one_error_line(done)
    # a server that is not there: a port just closed on this machine
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = docaudit(
        "score", doc, "--backend", "openai", "--api-base", f"http://127.0.0.1:{port}/v1", "--api-model", "m",
        "--api-tokenizer", tiny_gpt2, "--api-retries", "0", "--api-timeout", "5", "--methods", "loss",
    )  # fmt: skip
    assert done.returncode == errors.MODEL_UNAVAILABLE, done.stderr
    assert f"127.0.0.1:{port}" in one_error_line(done)


# a failure inside docaudit (not a refused input): the cache's summary breaks
BREAK_CACHE = (
    "import docaudit.query.cache as c\n"
    "def broken(self):\n    raise ZeroDivisionError('division by zero in the summary')\n"
    "c.StatsCache.summary = broken"
)


def test_an_internal_error_is_status_70_with_one_line_and_the_traceback_on_request():
    done = docaudit("cache", "info", prelude=BREAK_CACHE)
    assert done.returncode == errors.INTERNAL, done.stderr
    line = one_error_line(done)
    assert "internal error" in line and "ZeroDivisionError: division by zero in the summary" in line
    assert "report it to" in line and "--debug" in line
    debug = docaudit("--debug", "cache", "info", prelude=BREAK_CACHE)
    assert debug.returncode == errors.INTERNAL
    assert "Traceback (most recent call last)" in debug.stderr and "in broken" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1].startswith("error: internal error")
    # an input error stays one line with --debug too
    assert "Traceback" not in docaudit("--debug", "data", "check", "/nonexistent/a", "/nonexistent/b").stderr


@pytest.mark.parametrize("python310", [False, True])
def test_toml_config_files_are_read_with_and_without_tomllib(tmp_path, python310):
    """Python 3.10 has no ``tomllib``: docaudit reads TOML through ``tomli`` (the same parser)."""
    pytest.importorskip("tomli")
    config = tmp_path / "docaudit.toml"
    config.write_text('[report]\nsnippets = 7\nmethods = "zlib"\n', encoding="utf-8")
    prelude = "sys.modules['tomllib'] = None" if python310 else ""
    done = docaudit("config", "show", "report", "--config", config, prelude=prelude)
    assert done.returncode == 0, done.stderr
    assert "snippets = 7" in done.stdout and 'methods = "zlib"' in done.stdout
    if python310:  # the fallback really ran: tomllib cannot be imported there
        probe = docaudit("--version", prelude=prelude + "\nimport docaudit.io as io; print(io.tomllib.__name__)")
        assert probe.stdout.splitlines()[0] == "tomli"
    bad = tmp_path / "bad.toml"
    bad.write_text("[report\n", encoding="utf-8")
    done = docaudit("config", "show", "report", "--config", bad, prelude=prelude)
    assert done.returncode == errors.USAGE and "not valid TOML" in done.stderr
