"""The command line's guard against crashes in native code. A native engine (llama.cpp, PyTorch, a BLAS library)
that crashes kills its process with a signal instead of raising, so no error handler of the command can run. The
``docaudit`` command therefore runs each command in a child process and watches it: a crash still ends in one line
that names the engine, the signal and what to do, with exit status 4 (a model or backend that cannot be run).

The child writes Python's fault-handler dump (the Python stack of each thread at the crash) into a file the guard
made; the guard reads it to name the engine, and removes it (``--debug`` prints it first). Everything else passes
through unchanged: the child's standard streams are the guard's own, its exit status is the guard's, an interrupt
from the terminal reaches both and is the child's to handle, a termination sent to the guard is passed on.

This module imports the standard library only until a crash (``docaudit.cli`` loads its commands on first use), so
the guard costs a process start, not docaudit's imports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile

CRASH_LOG_ENV = "DOCAUDIT_CRASH_LOG"  # where the child writes its fault-handler dump
PROG_ENV = "DOCAUDIT_PROG_NAME"  # the name the child's usage lines give the command
MODEL_UNAVAILABLE = 4  # errors.MODEL_UNAVAILABLE, without importing what errors.py needs
CRASHES = {
    signal.SIGSEGV: "a segmentation fault",
    signal.SIGBUS: "a bus error",
    signal.SIGILL: "an illegal instruction",
    signal.SIGFPE: "an arithmetic fault",
    signal.SIGABRT: "an abort",
}
# (package seen in the crashing thread's Python stack, the engine's name, what to do)
ENGINES = (
    (
        "llama_cpp",
        "llama.cpp",
        "on a CPU with AMX, run with --llama-repack off (auto does so where the CPU lists AMX), or query the same "
        "file with --backend transformers",
    ),
    ("torch", "PyTorch", "try --device cpu or --dtype float32, or another --backend"),
    ("ray", "Ray", "run without --ray-address"),
)
FORWARDED = (signal.SIGTERM, signal.SIGHUP)


def engine_of(dump: str) -> tuple[str, str]:
    """The native engine a fault-handler ``dump`` shows the crashing thread in, and what to do; a generic pair
    when no known package is on its stack."""
    current = dump.split("Current thread", 1)[-1].split("\n\n", 1)[0]
    for package, name, advice in ENGINES:
        if f"{os.sep}{package}{os.sep}" in current:
            return name, advice
    return "native code", "run it again with --backend transformers, or with docaudit --debug to see where it stopped"


def crash_message(sig: int, dump: str) -> str:
    """The one line a crash by signal ``sig`` ends in; llama.cpp's illegal instruction on a CPU with AMX (its
    repacked AMX kernels, which ``--llama-repack auto`` leaves off there) says so."""
    engine, advice = engine_of(dump)
    if engine == "llama.cpp" and sig == signal.SIGILL and _cpu_has_amx():
        advice = "--llama-repack auto (the default) avoids it on this CPU, which has AMX: run without --llama-repack on"
    return (
        f"error: {engine} crashed with {CRASHES[sig]} ({signal.Signals(sig).name}) in its native code, which "
        f"stopped the command; {advice}"
    )


def _cpu_has_amx() -> bool:
    """Whether this CPU lists AMX (read only after a crash, so only then is the backend's module imported)."""
    from docaudit.query.backends.llamacpp import cpu_has_amx

    return cpu_has_amx()


def _read_dump(path: str) -> str:
    """The child's fault-handler dump (only read after a crash, so only then is the checked reader imported)."""
    from pathlib import Path

    from docaudit.untrusted import read_untrusted

    try:
        return read_untrusted(Path(path), "crash dump").decode("utf-8", "replace")
    except OSError:
        return ""


def exit_status(returncode: int, dump: str, debug: bool, stream=None) -> int:
    """The guard's exit status for the child's ``returncode`` (negative: killed by that signal), printing the line
    a crash ends in."""
    stream = sys.stderr if stream is None else stream
    if returncode >= 0:
        return returncode
    sig = -returncode
    if sig in CRASHES:
        if debug and dump:
            print(dump, file=stream)
        print(crash_message(sig, dump), file=stream)
        return MODEL_UNAVAILABLE
    if sig == signal.SIGKILL:
        print(
            "error: the command was killed (SIGKILL), most often by the system when memory runs out; "
            "try a smaller --batch-size or --max-tokens",
            file=stream,
        )
    return 128 + sig


def run_watched(args: list[str], prog_name: str) -> int:
    """Run ``docaudit ARGS`` in a child process and return its exit status (see the module's docstring)."""
    fd, log = tempfile.mkstemp(prefix="docaudit-crash-", suffix=".txt")
    os.close(fd)
    env = dict(os.environ, **{CRASH_LOG_ENV: log, PROG_ENV: prog_name})
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, *FORWARDED)}
    try:
        child = subprocess.Popen([sys.executable, "-m", "docaudit.cli", *args], env=env)
        signal.signal(signal.SIGINT, lambda *_: None)  # the terminal sends it to the child too; the child decides
        for s in FORWARDED:
            signal.signal(s, lambda sig, _frame: child.send_signal(sig))
        returncode = child.wait()
        return exit_status(returncode, _read_dump(log) if returncode < 0 else "", "--debug" in args)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        os.unlink(log)


def watch_me() -> None:
    """In the child: write the fault-handler dump where the guard reads it (nothing when run without a guard)."""
    path = os.environ.pop(CRASH_LOG_ENV, None)
    if path:
        import faulthandler

        faulthandler.enable(open(path, "w"), all_threads=True)  # noqa: SIM115 (open for the life of the process)


def prog_name(default: str) -> str:
    """The command's name in usage lines: the one the guard was started by, else ``default``."""
    return os.environ.pop(PROG_ENV, None) or default


def main(name: str | None = None) -> None:
    """The ``docaudit`` console script (and ``python -m docaudit``, as ``name``): the command line, watched (run
    in this process where processes cannot be watched so)."""
    name = name or os.path.basename(sys.argv[0]) or "docaudit"
    if os.name != "posix":
        from docaudit.cli.root import main as group

        group(prog_name=name)
        return
    sys.exit(run_watched(sys.argv[1:], name))
