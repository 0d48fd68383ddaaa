"""The CPUs this process may actually run on: its affinity (``taskset``, a container's cpuset) and, where it can
be read, its cgroup's CPU quota (``cpu.max``: a container limited to 2 CPUs on a 64-core host may run 2). An engine
that spins its threads while waiting (llama.cpp) loses most of its speed when it runs more threads than it has
cores, so an engine's threads are chosen from here, never from the host's core count."""

from __future__ import annotations

import math
import os
from pathlib import Path

from docaudit.untrusted import read_untrusted

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "<quota> <period>" or "max <period>"


def cgroup_quota(path: Path = CGROUP_CPU_MAX) -> int | None:
    """Whole CPUs the cgroup's quota allows (rounded up), or None where there is no quota or it cannot be read."""
    try:
        quota, period = read_untrusted(path, "cpu list").decode("ascii").split()[:2]
        if quota == "max":
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError, ZeroDivisionError):
        return None


def available_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The CPUs this process may run on: its affinity, bounded by its cgroup's quota when there is one."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_quota(cpu_max)
    return max(1, min(cpus, quota) if quota is not None else cpus)


def engine_threads(asked: int | None = None, cpu_max: Path = CGROUP_CPU_MAX, load: float | None = None) -> int:
    """The threads an engine runs on: one per available CPU (:func:`available_cpus`) that other work leaves idle
    (the CPUs less the 1-minute load average, ``load`` or the system's, rounded; at least one), fewer when
    ``asked`` (e.g. torch's thread count, which a user or a test may have lowered). On a machine busier than its
    cores a spinning thread pool waits on descheduled threads: one thread then did a book's ``controls`` in 0.56x
    the CPU time of two (docs/benchmarks.md, "llama.cpp rows side by side")."""
    cpus = available_cpus(cpu_max)
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    idle = max(1, min(cpus, round(cpus - load)))
    return max(1, min(idle, asked) if asked else idle)
