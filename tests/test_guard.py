"""The command line's guard: a crash in native code (a real segmentation fault in the child process) ends in one
line naming the engine and what to do, with exit status 4; every other outcome passes through unchanged."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from docaudit.cli.guard import crash_message, engine_of, exit_status
from docaudit.errors import BAD_INPUT, MODEL_UNAVAILABLE

ROOT = Path(__file__).resolve().parents[1]


def docaudit(*args, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "docaudit", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=dict(os.environ, **(env or {})),
    )


def crashing_package(root: Path, name: str) -> Path:
    """A package ``name`` whose import dereferences a null pointer: a real SIGSEGV in native code (ctypes)."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("import ctypes\n\nctypes.string_at(0)\n")
    return root


def test_a_segfault_in_llama_cpp_is_one_line_and_status_4(tmp_path, doc):
    fake = crashing_package(tmp_path / "site", "llama_cpp")
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    done = docaudit("score", doc, "--model", model, "--backend", "llamacpp", env={"PYTHONPATH": str(fake)})
    assert done.returncode == MODEL_UNAVAILABLE, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: llama.cpp crashed with a segmentation fault (SIGSEGV)")
    assert "--llama-repack off" in lines[0] and "--backend transformers" in lines[0]
    assert "Fatal Python error" not in done.stderr and not list(tmp_path.glob("docaudit-crash-*"))


def test_debug_shows_where_it_crashed(tmp_path, doc):
    fake = crashing_package(tmp_path / "site", "llama_cpp")
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    done = docaudit("--debug", "score", doc, "--model", model, "--backend", "llamacpp", env={"PYTHONPATH": str(fake)})
    assert done.returncode == MODEL_UNAVAILABLE
    assert "Segmentation fault" in done.stderr and f"{os.sep}llama_cpp{os.sep}__init__.py" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: llama.cpp crashed")


def test_other_outcomes_pass_through(tmp_path):
    version = docaudit("--version")
    assert version.returncode == 0 and version.stdout.startswith("python -m docaudit, version") and not version.stderr
    missing = docaudit("predict", tmp_path / "absent.txt")
    assert missing.returncode == BAD_INPUT and missing.stderr.strip().startswith("error:")
    usage = docaudit("predict", "--no-such-option")
    assert usage.returncode == 2 and usage.stderr.strip() == (
        "error: No such option '--no-such-option'. (see docaudit predict --help)"
    )


def test_engine_named_from_the_crashing_thread_only():
    dump = (
        'Fatal Python error: Segmentation fault\n\nThread 0x1 (most recent call first):\n  File "/x/torch/a.py", '
        'line 1 in f\n\nCurrent thread 0x2 (most recent call first):\n  File "/x/llama_cpp/_internals.py", line 9 '
        "in decode\n\nExtension modules: numpy\n"
    )
    assert engine_of(dump)[0] == "llama.cpp"
    assert engine_of(dump.replace("llama_cpp", "mylib"))[0] == "native code"
    assert "SIGBUS" in crash_message(signal.SIGBUS, dump)


@pytest.mark.parametrize(
    "returncode,status", [(0, 0), (3, 3), (-signal.SIGSEGV, 4), (-signal.SIGINT, 130), (-signal.SIGKILL, 137)]
)
def test_exit_status(returncode, status, capsys):
    assert exit_status(returncode, "", debug=False) == status
    printed = capsys.readouterr().err
    assert bool(printed) == (returncode in (-signal.SIGSEGV, -signal.SIGKILL))


@pytest.mark.parametrize("amx", [True, False])
def test_llama_cpp_illegal_instruction_names_the_repack_default_where_the_cpu_has_amx(monkeypatch, amx):
    """``--llama-repack on`` on a CPU with AMX dies by SIGILL; there the line says that ``auto`` avoids it."""
    from docaudit.cli import guard

    monkeypatch.setattr(guard, "_cpu_has_amx", lambda: amx)
    dump = 'Current thread 0x2 (most recent call first):\n  File "/x/llama_cpp/_internals.py", line 9 in decode\n'
    line = crash_message(signal.SIGILL, dump)
    assert line.startswith("error: llama.cpp crashed with an illegal instruction (SIGILL)")
    assert ("--llama-repack auto (the default) avoids it on this CPU" in line) is amx
    assert "--llama-repack auto (the default)" not in crash_message(signal.SIGSEGV, dump)
