"""``scrapy crawl site`` (the project's generic spider, ``crawler/``) in a subprocess: its stats, its items and
what it used."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from . import ROOT
from .measure import timed_run


def crawl_site(
    workdir: Path, starts: list[str], settings: dict[str, str], extension: str = "BenchStats"
) -> dict[str, Any]:
    """One ``scrapy crawl site`` of ``starts`` (``-s NAME=VALUE`` for each of ``settings``), its log, stats and
    items in ``workdir``.  Returns its stats, with those of :mod:`benchlib.scrapy_stats` (``extension``: one
    of its classes), the feed's items in ``bench/items``, and what the crawl used: the process's CPU time
    (user + sys, start-up and the worker processes it waited for included) in ``bench/process_cpu_seconds``,
    start to exit in ``bench/wall_seconds``, this process's CPU time meanwhile (the local site's server threads)
    in ``bench/server_cpu_seconds``, the machine's other processes' in ``bench/other_cpu_seconds``."""
    stats_file, feed, log = workdir / "stats.json", workdir / "items.jsonl", workdir / "crawl.log"
    for path in (stats_file, log):
        path.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "scrapy.cmdline",
        "crawl",
        "site",
        "-a",
        f"start_urls={','.join(starts)}",
        "-O",
        f"{feed}:jsonlines",
        "-s",
        f"BENCH_STATS={stats_file}",
        "-s",
        f"LOG_FILE={log}",
        "-s",
        f'EXTENSIONS={{"benchmarks.benchlib.scrapy_stats.{extension}": 0}}',
    ]
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    path = [str(ROOT), os.environ.get("PYTHONPATH")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    proc, used = timed_run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not stats_file.exists():
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        raise SystemExit(f"the crawl failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}{text[-3000:]}")
    stats = json.loads(stats_file.read_text())
    stats["bench/process_cpu_seconds"] = used.cpu
    stats["bench/wall_seconds"] = used.wall
    stats["bench/server_cpu_seconds"] = used.own_cpu
    # what the rest of the machine used meanwhile (other jobs on a shared machine: a noisy run)
    stats["bench/other_cpu_seconds"] = max(0.0, used.busy - used.cpu - used.own_cpu)
    stats["bench/items"] = [json.loads(line) for line in feed.read_text(encoding="utf-8").splitlines() if line]
    return stats


def html_pages(stats: dict[str, Any]) -> int:
    """HTML pages fetched (status 200, robots.txt excluded)."""
    ok = stats.get("downloader/response_status_count/200", 0)
    return ok - stats.get("robotstxt/response_status_count/200", 0)
