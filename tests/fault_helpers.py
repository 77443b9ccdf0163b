"""Helpers of the fault-injection suite (``tests/test_fault_injection.py``): a process's children (from
``/proc``), a small tmpfs mounted for one test, a JSON Lines input of small seeded pages, and a Scrapy extension
that records the crawl process's peak memory in its stats (the site of hostile pages is ``devsites/hostile.py``)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scrapy import signals

#: Why the small-filesystem tests cannot run here, or None if they can (root, and ``mount -t tmpfs`` works).
_TMPFS_PROBLEM: list[str | None] = []


def children(pid: int) -> list[int]:
    """The pids of the live children of process *pid* (read from ``/proc/*/stat``: this kernel may lack
    ``/proc/PID/task/*/children``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return sorted(found)


def cmdline(pid: int) -> str:
    """The command line of process *pid* ("" if it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def tmpfs_problem() -> str | None:
    """Why a tmpfs cannot be mounted here (not root, no ``mount``, or the kernel refuses), or None; probed
    once per session."""
    if not _TMPFS_PROBLEM:
        _TMPFS_PROBLEM.append(_probe_tmpfs())
    return _TMPFS_PROBLEM[0]


def _probe_tmpfs() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "no mount/umount command"
    import tempfile

    with tempfile.TemporaryDirectory() as probe:
        try:
            with small_filesystem(Path(probe), 64 * 1024):
                pass
        except (OSError, subprocess.SubprocessError) as exc:
            return f"mount -t tmpfs failed: {exc}"
    return None


@contextlib.contextmanager
def small_filesystem(path: Path, size: int) -> Iterator[Path]:
    """A tmpfs of *size* bytes mounted on *path* (created) for the block; unmounted on exit, whatever happens."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if mounted.returncode != 0:
        raise OSError(f"mount: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)  # busy: detach it


def fill(directory: Path, leave: int) -> Path:
    """Write a file in *directory* until its filesystem has at most *leave* bytes free; the file's path."""
    filler = directory / "filler"
    with open(filler, "wb") as f:
        while True:
            stat = os.statvfs(directory)
            free = stat.f_bavail * stat.f_frsize
            if free <= leave:
                break
            try:
                f.write(bytes(min(free - leave, 1 << 20)))
                f.flush()
            except OSError:
                break
    return filler


def page_lines(n: int, seed: int) -> list[bytes]:
    """*n* JSON Lines of small pages (``{"url", "html"}``, ~0.6 kB of made-up words each), about a third of
    them near-duplicates (one word changed) of an earlier one, seeded."""
    rng = random.Random(seed)
    syllables = "ka lo mi ne ru ta so vi de po gu ba fe zi cho wa".split()
    vocabulary = ["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(5000)]
    originals: list[list[str]] = []
    lines = []
    for i in range(n):
        if originals and rng.random() < 0.3:
            words = list(rng.choice(originals))
            words[rng.randrange(len(words))] = rng.choice(vocabulary)
        else:
            words = [rng.choice(vocabulary) for _ in range(rng.randint(60, 150))]
            originals.append(words)
        page = f"<html><body><article><h1>{words[0]}</h1><p>{' '.join(words)}</p></article></body></html>"
        lines.append(json.dumps({"url": f"https://s.example/{i}", "html": page}).encode() + b"\n")
    return lines


class PeakMemory:
    """Sets the stat ``fault/peak_rss_mb`` (this process's peak resident memory) when the spider closes
    (enabled in tests only, before ``crawl_helpers.StatsToJson`` writes the stats)."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> PeakMemory:
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_closed(self, spider: Any) -> None:
        peak_kb = _peak_kb()
        self.crawler.stats.set_value("fault/peak_rss_mb", round(peak_kb / 1024, 1))


def _peak_kb() -> int:
    """This process's own peak resident memory, in kilobytes: ``VmHWM`` (reset by exec) where Linux has it, since
    ``ru_maxrss`` keeps the peak of the process it was forked from (a crawl started late in the suite reported the
    pytest process's 1.1-1.4 GB, alone its own 0.47 GB)."""
    with contextlib.suppress(OSError, StopIteration), open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
