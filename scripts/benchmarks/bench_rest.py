#!/usr/bin/env python
"""The share of a command's wall time that lies outside its model passes, and its estimate against its actual
time: one docaudit command line run in this process, from the start of the interpreter (imports included) to its
end, with its model passes timed where they are made (``query.decode.Decoder.sample``: a decoding loop of
generation; ``query.conditional.bits_per_byte``: scoring suffixes; the transformers backend's ``compute_many``:
the querier's passes). Before it runs, the command is given ``--dry-run`` in a process of its own, and the time its
first line estimates is read back (``estimate_s``). The wall time starts when this process has parsed its
arguments, before docaudit is imported.

``--root`` runs the code of another tree (e.g. an earlier commit checked out elsewhere), so that before and after
are measured by the same script. Prints one JSON line: ``wall_s``, ``passes_s``, ``rest_share`` (1 − passes /
wall), the same in CPU seconds of the process (``cpu_s`` from its start, ``passes_cpu_s``, ``rest_cpu_share``: less
moved by other jobs on a shared machine), ``estimate_s``, ``estimate_over_actual`` and the load average before and
after.

Example::

    OMP_NUM_THREADS=1 nice -n 10 python scripts/benchmarks/bench_rest.py -- controls BOOK --preset fast
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

STARTED = time.perf_counter()

ROOT = Path(__file__).resolve().parents[2]


def timed_passes(spent: dict) -> None:
    """Wrap the functions that run model passes so that their wall time adds up in ``spent["passes"]`` (an outer
    call only: a pass inside another is not counted twice)."""
    import docaudit.audit.synthetic_controls as sc
    import docaudit.query.conditional as conditional
    from docaudit.query.backends.transformers import TransformersBackend
    from docaudit.query.decode import Decoder

    depth = [0]

    def wrap(fn):
        def timed(*args, **kwargs):
            depth[0] += 1
            began, cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    spent["passes"] += time.perf_counter() - began
                    spent["passes_cpu"] += time.process_time() - cpu

        return timed

    Decoder.sample = wrap(Decoder.sample)
    TransformersBackend.compute_many = wrap(TransformersBackend.compute_many)
    conditional.bits_per_byte = sc.bits_per_byte = wrap(conditional.bits_per_byte)


def estimate_seconds(root: Path, args: list[str]) -> float | None:
    """The time the command's ``--dry-run`` estimates (its first line's ``~N s``, ``~N min`` or ``~N h``), run in a
    process of its own so that this one starts cold."""
    env = dict(os.environ, PYTHONPATH=str(root))
    dry = [sys.executable, "-m", "docaudit.cli", *args, "--dry-run"]
    out = subprocess.run(dry, capture_output=True, text=True, env=env, cwd=root).stdout
    found = re.search(r"~([\d.]+) (s|min|h) in all", out)
    if found is None:
        return None
    return float(found.group(1)) * {"s": 1, "min": 60, "h": 3600}[found.group(2)]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="the tree whose docaudit to run (default: this one)")
    ap.add_argument("--no-estimate", action="store_true", help="do not run --dry-run first")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the docaudit command line, after --")
    args = ap.parse_args(argv)
    command = [a for a in args.command if a != "--"]
    estimate = None if args.no_estimate else estimate_seconds(args.root, command)
    global STARTED
    STARTED = time.perf_counter()
    sys.path.insert(0, str(args.root))
    load_before = os.getloadavg()[0]
    from docaudit.cli.root import main as cli

    spent = {"passes": 0.0, "passes_cpu": 0.0}
    timed_passes(spent)
    with contextlib.redirect_stdout(io.StringIO()):
        cli(command, standalone_mode=False)
    wall = time.perf_counter() - STARTED
    row = {
        "command": " ".join(command),
        "root": str(args.root),
        "wall_s": round(wall, 1),
        "passes_s": round(spent["passes"], 1),
        "rest_share": round(1 - spent["passes"] / wall, 3),
        "estimate_s": estimate,
        "estimate_over_actual": None if estimate is None else round(estimate / wall, 2),
        "cpu_s": round(time.process_time(), 1),
        "passes_cpu_s": round(spent["passes_cpu"], 1),
        "rest_cpu_share": round(1 - spent["passes_cpu"] / time.process_time(), 3),
        "load_average": [load_before, os.getloadavg()[0]],
    }
    print(json.dumps(row), flush=True)
    return row


if __name__ == "__main__":
    main()
