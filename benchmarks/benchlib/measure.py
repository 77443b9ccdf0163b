"""Measuring: a command's elapsed time and the CPU time of its process tree, of this process and of the machine;
resident memory; medians and percentiles of runs."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def system_busy_seconds() -> float:
    """CPU seconds every process of the machine has used since boot (Linux; 0 elsewhere)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def rss_bytes() -> int:
    """Resident set size of this process (Linux), or 0 where unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def _cpu(before: resource.struct_rusage, after: resource.struct_rusage) -> float:
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@dataclass(frozen=True)
class Usage:
    """What a command used while it ran."""

    wall: float  # seconds from its start to its exit
    cpu: float  # CPU seconds (user + sys) of the command and the processes it waited for
    own_cpu: float  # CPU seconds of this process meanwhile (its threads: a local site's server, say)
    busy: float  # CPU seconds of every process of the machine meanwhile (Linux; 0 elsewhere)


def timed_run(cmd: list[str], **kwargs: Any) -> tuple[subprocess.CompletedProcess[Any], Usage]:
    """``subprocess.run(cmd, **kwargs)``, and what it used (the clocks are read outside the elapsed time)."""
    children, own = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    busy = system_busy_seconds()
    start = time.perf_counter()
    proc = subprocess.run(cmd, **kwargs)
    wall = time.perf_counter() - start
    children_after, own_after = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    busy = system_busy_seconds() - busy
    return proc, Usage(wall, _cpu(children, children_after), _cpu(own, own_after), busy)


def median_by(runs: Iterable[T], get: Callable[[T], float]) -> float:
    """The median of ``get`` over the runs."""
    return statistics.median(get(r) for r in runs)


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the runs (the first run's keys); a value that is not a number (a name, a
    flag) is the first run's."""
    out: dict[str, Any] = {}
    for name in runs[0]:
        values = [r[name] for r in runs if name in r]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out[name] = statistics.median(values)
        else:
            out[name] = values[0]
    return out


def percentile(values: list[float], q: float) -> float:
    """The value at rank ``int(q * n)`` of the sorted values (``q`` from 0 to 1): no interpolation."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
