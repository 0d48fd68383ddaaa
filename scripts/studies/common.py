"""Atomic JSON/CSV writes and per-stage time records shared by the study's modules."""

from __future__ import annotations

import json
import os
import pathlib
import resource
import time
from contextlib import contextmanager

import pandas as pd

from docaudit.io import atomic_write_text


def write_json(path: pathlib.Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1, default=float))


def read_json(path: pathlib.Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_csv(path: pathlib.Path, frame: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, frame.to_csv(index=False))


def cpu_seconds() -> float:
    """User + system CPU time of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@contextmanager
def timed(out: pathlib.Path, stage: str):
    """Record the wall and CPU seconds of ``stage`` in ``out/timings.json`` when it finishes (a rerun that redoes
    part of a stage adds a second segment)."""
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    yield
    path = out / "timings.json"
    record = read_json(path) or {}
    record.setdefault(stage, []).append(
        {
            "wall_s": round(time.perf_counter() - wall0, 1),
            "cpu_s": round(cpu_seconds() - cpu0, 1),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "pid": os.getpid(),
        }
    )
    write_json(path, record)
