"""Duplicate floods (issue 24): does a check stay cheap when the same page comes again and again?

The flood streams of ``devsites/floods.py`` (``changing``: one documentation page with a line that changes per
page; ``bag``: 300 words drawn from 19; ``template``: one shop template with a different 40-word product text,
not near-duplicates) and its ``distinct`` pages (generated articles) are written as JSON Lines, then:

1. **dedup, in memory.**  ``simhash-filter dedup --workers 1`` over ``--pages`` pages of each kind and over the
   public stream (``../shared/datasets/neardup-public/pages.jsonl.gz``, gunzipped first; skipped, and said so,
   when the directory is absent), the kinds alternated, ``--repeat`` rounds, medians: pages per CPU second of the
   child (user + sys, ``os.wait4``) and its ratio to the public stream's (target >= 0.8), peak RSS of the child
   (``ru_maxrss``) and its ratio to the run over as many distinct pages (target <= 1.2).
2. **dedup, on disk.**  The same with ``--index file://DIR`` (a new index directory per run).
3. **Redis.**  A real ``redis-server`` (``devsites/redis_server.py``), ``--redis-pages`` pages of each kind through
   ``dedup --index redis://...`` (one prefix per run), every command logged (``slowlog-log-slower-than 0``,
   ``slowlog-max-len`` 100 entries per page): the server's time per ``EVALSHA`` (one check) p50, p99 and max
   (targets p99 <= 1 ms, max <= 5 ms; of the calls still in the log, as the commands a script calls are logged
   too), its mean over every call (``INFO commandstats``), and pages per CPU second of the client.
4. **Spark.**  ``python -m simhash_filter.batch.spark --master local[2]`` over ``--spark-pages`` pages of each
   flood kind and of distinct pages: wall seconds, the flood's over the distinct pages' (target <= 2), and
   whether its decisions (``url``, ``duplicate_of``, ``distance`` of every line) equal ``dedup``'s.
5. ``--before PATH``: ``dedup`` over ``--before-pages`` (1000,2000,4000) pages of the ``changing`` kind with
   another checkout (``PYTHONPATH=PATH``: ``git worktree add /work/wt-before 753773d``, its compiled core
   built or copied in) beside this one: the "before" table.
6. ``--crawl``: the crawler trap of ``floods.CalendarTrap`` (an infinite calendar) served on loopback and
   crawled with ``scrapy crawl site`` (this project's spider): with ``SIMHASH_ACTION=flag`` and
   ``CLOSESPIDER_PAGECOUNT=--crawl-pages``, responses per second over the last 1,000 responses over the first
   1,000's (target >= 0.8; a timestamp per response from a small extension, ``benchlib.scrapy_stats``); then
   in drop mode (the default action) the pages crawled: the trap closes itself, for a dropped page's links
   are not followed.

``--checkout PATH`` runs every command with another checkout's package (the Redis part of the "before", say).
A run that takes longer than ``--timeout`` seconds is stopped and reported as such (with the pages it wrote).
Output: a table on stdout, ``--json PATH`` the numbers.  The machine's other work shows in the figures (medians).

    python -m benchmarks.speed.bench_flood [--pages 100000] [--repeat 3] [--redis-pages 20000] [--spark-pages 2000]
                                     [--parts dedup,file,redis,spark] [--crawl [--crawl-backend memory://]]
                                     [--before /work/wt-before] [--checkout PATH] [--timeout 1800]
    python -m benchmarks.speed.bench_flood --pages 300 --repeat 1 --redis-pages 200 --spark-pages 100 --crawl \\
        --crawl-pages 300 --json out/bench_flood.json                        # a quick smoke run
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.benchlib import ROOT
from benchmarks.benchlib.data import PUBLIC_PAGES, PUBLIC_SET
from benchmarks.benchlib.measure import percentile
from benchmarks.benchlib.report import make_parser, write_json

# benchmarks/ (benchlib, floods) also when this file is loaded by its path, as tests/test_floods.py does
from devsites import floods

TARGET_RATE, TARGET_RSS, TARGET_P99_US, TARGET_MAX_US, TARGET_SPARK, TARGET_CRAWL = 0.8, 1.2, 1000, 5000, 2.0, 0.8
PARTS = ("dedup", "file", "redis", "spark")
#: SLOWLOG entries kept per page: the commands a script calls are logged too (an unbounded check's reads could
#: push its own EVALSHA out of the log; the table then says how many of the calls were logged).
SLOWLOG_PER_PAGE = 100
WINDOW = 1000  # responses at the start and at the end of a crawl


@dataclass
class Run:
    """One child process: what it used, and how it ended."""

    wall: float
    cpu: float  # user + sys seconds of the child (and the processes it waited for)
    rss_mb: float  # its peak resident set
    rc: int | None  # None: stopped at the timeout
    summary: str  # the last line of its stderr
    pages_out: int = 0  # lines of its output (a run stopped at the timeout: the pages it finished)


def run_child(cmd: list[str], *, env: dict[str, str] | None = None, timeout: float = 1800.0,
              output: Path | None = None, cwd: Path | None = None) -> Run:  # fmt: skip
    """``cmd`` in a new session, its stderr kept; its own rusage from ``os.wait4`` (not its siblings').  It runs
    in *cwd*, the checkout whose package it runs (``python -m`` puts the working directory before ``PYTHONPATH``;
    default: ``--checkout``, else this one)."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=cwd or CHECKOUT or ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)  # the session this call started
                pid, status, usage = os.wait4(proc.pid, 0)
                status = None
                break
            time.sleep(0.02)
        wall = time.perf_counter() - start
        proc.returncode = 0  # reaped here; keep Popen from waiting again
        err.seek(0)
        lines = err.read().decode("utf-8", "replace").strip().splitlines()
    rc = None if status is None else os.waitstatus_to_exitcode(status)
    done = 0
    if output is not None and output.exists():
        with output.open("rb") as f:
            done = sum(1 for _ in f)
    tail = lines[-1] if lines else ""
    if rc not in (0, None):
        tail = " | ".join(lines[-3:])
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, rc, tail, done)


#: ``--checkout``: the checkout whose package every command runs (None: this one, as installed).
CHECKOUT: Path | None = None


def python_env(pythonpath: Path | None = None) -> dict[str, str]:
    """This environment, with ``PYTHONPATH`` a checkout (another one's, ``--before``/``--checkout``) when given."""
    pythonpath = pythonpath or CHECKOUT
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), os.environ.get("PYTHONPATH")]))
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def dedup_cmd(source: Path, output: Path, index: str | None = None, extra: list[str] | None = None) -> list[str]:
    """``simhash-filter dedup --workers 1`` of ``source`` into ``output`` (with ``--index``, and *extra* options)."""
    cmd = [sys.executable, "-m", "simhash_filter", "dedup", str(source), "--workers", "1", "--no-progress",
           "--output", str(output), *(extra or [])]  # fmt: skip
    return cmd + (["--index", index] if index else [])


def median_run(runs: list[Run], pages: int) -> dict[str, Any]:
    """The medians of runs of one input: CPU and wall seconds, pages per CPU second, peak RSS; a run that
    failed or timed out is reported, not averaged."""
    good = [r for r in runs if r.rc == 0]
    if not good:
        bad = runs[0]
        what = "timed out" if bad.rc is None else f"failed (exit {bad.rc})"
        return {"pages": pages, "error": f"{what} after {bad.wall:.0f} s, {bad.pages_out} pages written: {bad.summary}"}
    cpu = statistics.median(r.cpu for r in good)
    return {
        "pages": pages,
        "cpu_s": cpu,
        "wall_s": statistics.median(r.wall for r in good),
        "pages_per_cpu_s": pages / cpu,
        "rss_mb": statistics.median(r.rss_mb for r in good),
        "runs": len(good),
        "summary": good[-1].summary,
    }


# --- the inputs ---------------------------------------------------------------------------------------------


def public_stream(workdir: Path) -> tuple[Path, int] | None:
    """The public stream gunzipped into ``workdir``, and its pages; None when the set is not on this machine."""
    if not PUBLIC_PAGES.exists():
        return None
    path = workdir / "public.jsonl"
    if not path.exists():
        with gzip.open(PUBLIC_PAGES, "rb") as src, path.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    with path.open("rb") as f:
        return path, sum(1 for line in f if line.strip())


def flood_file(workdir: Path, kind: str, n: int) -> Path:
    """``n`` pages of ``kind`` (floods.py) in ``workdir``, written once."""
    path = workdir / f"{kind}-{n}.jsonl"
    if not path.exists():
        floods.write(kind, n, path)
    return path


# --- 1, 2: dedup in memory and on disk ----------------------------------------------------------------------


def dedup_part(inputs: dict[str, tuple[Path, int]], repeat: int, workdir: Path, on_disk: bool,
               timeout: float) -> dict[str, Any]:  # fmt: skip
    """Each input through ``dedup`` ``repeat`` times, the inputs alternated (the order turned each round)."""
    names = list(inputs)
    runs: dict[str, list[Run]] = {name: [] for name in names}
    for r in range(repeat):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            source, pages = inputs[name]
            out = workdir / f"{name}.{'file' if on_disk else 'memory'}.out.jsonl"
            index = None
            if on_disk:
                directory = workdir / f"{name}.idx"
                shutil.rmtree(directory, ignore_errors=True)
                index = f"file://{directory}"
            run = run_child(dedup_cmd(source, out, index), env=python_env(), timeout=timeout, output=out)
            runs[name].append(run)
            shown = f"{run.cpu:.1f} s CPU, {run.rss_mb:.0f} MB" if run.rc == 0 else f"exit {run.rc}: {run.summary}"
            print(
                f"  dedup{' file://' if on_disk else ''} {name} ({pages} pages): {shown}", file=sys.stderr, flush=True
            )
            if on_disk:
                shutil.rmtree(workdir / f"{name}.idx", ignore_errors=True)
    table = {name: median_run(runs[name], inputs[name][1]) for name in names}
    return with_ratios(table)


def with_ratios(table: dict[str, Any]) -> dict[str, Any]:
    """Each flood's pages per CPU second over the public stream's and its peak RSS over the distinct pages'."""
    public, distinct = table.get("public", {}), table.get("distinct", {})
    for name, row in table.items():
        if name in floods.KINDS and "error" not in row:
            if "pages_per_cpu_s" in public:
                row["rate_vs_public"] = row["pages_per_cpu_s"] / public["pages_per_cpu_s"]
            if "pages_per_cpu_s" in distinct:
                row["rate_vs_distinct"] = row["pages_per_cpu_s"] / distinct["pages_per_cpu_s"]
            if "rss_mb" in distinct:
                row["rss_vs_distinct"] = row["rss_mb"] / distinct["rss_mb"]
    return table


# --- 3: Redis -----------------------------------------------------------------------------------------------


def redis_part(
    kinds: list[str],
    n: int,
    workdir: Path,
    timeout: float,
    sources: dict[str, Path] | None = None,
    extra: list[str] | None = None,
) -> dict[str, Any]:
    """Each kind through ``dedup --index redis://`` against one real server; the server's time per call.  A kind
    of *sources* is read from its file (bench_crowd.py's crowd), the others made by floods.py."""
    from devsites.redis_server import RedisServer, redis_server_binary

    if redis_server_binary() is None:
        return {"error": "redis-server is not installed (apt-get install redis-server)"}
    out: dict[str, Any] = {}
    with RedisServer(workdir / "redis") as server:
        for kind in kinds:
            source = (sources or {}).get(kind) or flood_file(workdir, kind, n)
            with server.client() as client:
                client.flushall()
                client.config_set("slowlog-max-len", SLOWLOG_PER_PAGE * n + 10_000)
                client.config_set("slowlog-log-slower-than", 0)
                client.slowlog_reset()
                client.config_resetstat()
            output = workdir / f"{kind}.redis.out.jsonl"
            uri = f"redis://127.0.0.1:{server.port}/0?prefix=flood-{kind}"
            run = run_child(dedup_cmd(source, output, uri, extra), env=python_env(), timeout=timeout, output=output)
            with server.client() as client:
                client.config_set("slowlog-log-slower-than", 10_000)
                entries = client.slowlog_get(SLOWLOG_PER_PAGE * n + 10_000)
                client.config_set("slowlog-max-len", 128)
                client.slowlog_reset()
                stats = client.info("commandstats")
                used = client.info("memory")["used_memory"]
            row = median_run([run], n)
            calls = [e["duration"] for e in entries if e["command"][:7].lower() == b"evalsha"]
            row["evalsha_logged"] = len(calls)
            evalsha = stats.get("cmdstat_evalsha", {})
            row["evalsha_calls"] = int(evalsha.get("calls", 0))
            row["server_mean_us"] = float(evalsha.get("usec_per_call", 0.0))
            if calls:
                row.update(server_p50_us=percentile(calls, 0.5), server_p99_us=percentile(calls, 0.99),
                           server_max_us=max(calls))  # fmt: skip
            row["commands"] = {name.removeprefix("cmdstat_"): {"calls": v["calls"], "usec_per_call": v["usec_per_call"]}
                               for name, v in stats.items()}  # fmt: skip
            row["used_memory_mb"] = used / 2**20
            out[kind] = row
            shown = f"p99 {row.get('server_p99_us', '-')} us" if run.rc == 0 else row.get("error", "")
            print(f"  dedup redis:// {kind} ({n} pages): {shown}", file=sys.stderr, flush=True)
    return out


# --- 4: Spark -----------------------------------------------------------------------------------------------


def decisions(path: Path) -> list[tuple[Any, Any, Any]]:
    """``(url, duplicate_of, distance)`` of every output line."""
    with path.open(encoding="utf-8") as f:
        return [(r["url"], r["duplicate_of"], r["distance"]) for r in map(json.loads, f) if r]


def spark_part(kinds: list[str], n: int, workdir: Path, timeout: float, repeat: int) -> dict[str, Any]:
    """Each flood kind and the distinct pages through the Spark job in ``local[2]``, alternated; its decisions
    beside ``dedup``'s."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return {"error": "pyspark is not installed (pip install simhash-filter[spark])"}
    names = [*kinds, "distinct"]
    runs: dict[str, list[Run]] = {name: [] for name in names}
    for r in range(repeat):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            source, output = flood_file(workdir, name, n), workdir / f"{name}-{n}.spark.out.jsonl"
            output.unlink(missing_ok=True)
            cmd = [sys.executable, "-m", "simhash_filter.batch.spark", str(source), "--output", str(output),
                   "--master", "local[2]"]  # fmt: skip
            runs[name].append(run_child(cmd, env=python_env(), timeout=timeout, output=output))
            run = runs[name][-1]
            print(f"  spark local[2] {name} ({n} pages): {run.wall:.1f} s (exit {run.rc})", file=sys.stderr, flush=True)
    out: dict[str, Any] = {}
    for name in names:
        row = median_run(runs[name], n)
        source, spark_out = flood_file(workdir, name, n), workdir / f"{name}-{n}.spark.out.jsonl"
        if "error" not in row:
            dedup_out = workdir / f"{name}-{n}.dedup.out.jsonl"
            check = run_child(dedup_cmd(source, dedup_out), env=python_env(), timeout=timeout)
            if check.rc == 0:
                ours, theirs = decisions(spark_out), decisions(dedup_out)
                row["same_as_dedup"] = ours == theirs
                # which pages are kept and which flagged, apart from the page a flagged one names
                row["same_kept_as_dedup"] = [d[1] is None for d in ours] == [d[1] is None for d in theirs]
                row["differing_lines"] = sum(a != b for a, b in zip(ours, theirs, strict=False)) + abs(
                    len(ours) - len(theirs)
                )
        out[name] = row
    base = out["distinct"].get("wall_s")
    for kind in kinds:
        if base and "wall_s" in out[kind]:
            out[kind]["wall_vs_distinct"] = out[kind]["wall_s"] / base
    return out


# --- 5: before and after ------------------------------------------------------------------------------------


def before_part(before: Path, sizes: list[int], kind: str, workdir: Path, timeout: float,
                repeat: int) -> dict[str, Any]:  # fmt: skip
    """``dedup`` over ``sizes`` pages of ``kind`` with the other checkout and with this one, alternated."""
    rows: dict[str, Any] = {}
    for n in sizes:
        source = flood_file(workdir, kind, n)
        runs: dict[str, list[Run]] = {"before": [], "after": []}
        for r in range(repeat):
            for name in ("before", "after") if r % 2 == 0 else ("after", "before"):
                out = workdir / f"{kind}-{n}.{name}.out.jsonl"
                checkout = before if name == "before" else ROOT
                env = python_env(checkout)
                runs[name].append(run_child(dedup_cmd(source, out), env=env, timeout=timeout, output=out, cwd=checkout))
                print(f"  {name}: {kind} {n} pages: {runs[name][-1].wall:.1f} s", file=sys.stderr, flush=True)
        rows[str(n)] = {name: median_run(v, n) for name, v in runs.items()}
    return {"checkout": str(before), "kind": kind, "sizes": rows}


# --- 6: the crawl trap --------------------------------------------------------------------------------------


def crawl_part(pages: int, workdir: Path, window: int = WINDOW, backend: str | None = None) -> dict[str, Any]:
    """The calendar trap crawled in flag mode (the rate over the first ``window`` responses against the last
    ``window``'s) and in drop mode, each with its own index (``SIMHASH_BACKEND``: *backend*, else a new on-disk index
    in its directory: the crawl's default would be the checkout's ``.scrapy/simhash/...``, shared by the two crawls
    and left for the user's next ``scrapy crawl site``)."""
    from benchmarks.benchlib.crawl import crawl_site, html_pages
    from devsites.localsite import LocalSite

    out: dict[str, Any] = {}
    for action in ("flag", "drop"):
        trap = floods.calendar_trap()
        settings = {"SIMHASH_ACTION": action, "CLOSESPIDER_PAGECOUNT": str(pages), "LOG_LEVEL": "INFO",
                    "CONCURRENT_REQUESTS": "16", "DOWNLOAD_DELAY": "0", "AUTOTHROTTLE_ENABLED": "False"}  # fmt: skip
        directory = workdir / f"crawl-{action}"
        directory.mkdir(parents=True, exist_ok=True)
        settings["SIMHASH_BACKEND"] = backend or str(directory / "index")
        with LocalSite({}, resolve=trap) as site:
            stats = crawl_site(directory, [site.url("/")], settings, extension="ResponseTimes")
        times = stats.get("bench/response_times", [])
        flagged = sum(1 for item in stats["bench/items"] if item.get("duplicate_of"))
        row: dict[str, Any] = {
            "pages": html_pages(stats),
            "days_served": trap.days_served,
            "items": len(stats["bench/items"]),
            "flagged": flagged,
            "finish_reason": stats.get("finish_reason"),
            "wall_s": stats["bench/wall_seconds"],
            "candidates_max": stats.get("simhash/candidates/max"),
        }
        size = min(window, len(times) // 2)
        if size >= 10:  # a crawl that stopped by itself after a few pages has no rate to compare
            first = (size - 1) / (times[size - 1] - times[0])
            last = (size - 1) / (times[-1] - times[-size])
            row.update(window=size, first_per_s=first, last_per_s=last, last_vs_first=last / first)
        out[action] = row
        print(f"  crawl {action}: {row['pages']} pages, {row['finish_reason']}", file=sys.stderr, flush=True)
    return out


# --- the table ----------------------------------------------------------------------------------------------


def _f(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def print_dedup(title: str, table: dict[str, Any]) -> None:
    print(f"\n## {title}")
    print("| input | pages | CPU s | pages / CPU s | vs public | vs distinct | peak RSS MB | RSS vs distinct |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, row in table.items():
        if "error" in row:
            print(f"| {name} | {row['pages']} | {row['error']} | | | | | |")
            continue
        print(f"| {name} | {row['pages']} | {row['cpu_s']:.1f} | {row['pages_per_cpu_s']:.0f} | "
              f"{_f(row.get('rate_vs_public'))} | {_f(row.get('rate_vs_distinct'))} | {row['rss_mb']:.0f} | "
              f"{_f(row.get('rss_vs_distinct'))} |")  # fmt: skip
    print(f"targets: flood pages/CPU s >= {TARGET_RATE} x the public stream's; peak RSS <= {TARGET_RSS} x distinct's")


def print_report(report: dict[str, Any]) -> None:
    print(f"# Duplicate floods: {report['pages']} pages per kind, median of {report['repeat']} ({report['checkout']})")
    if report.get("public_note"):
        print(report["public_note"])
    if "dedup" in report:
        print_dedup("dedup --workers 1, memory index", report["dedup"])
    if "file" in report:
        print_dedup("dedup --workers 1, --index file://", report["file"])
    if "redis" in report:
        print(f"\n## dedup --index redis://, {report['redis_pages']} pages per kind (server time per EVALSHA)")
        if "error" in report["redis"]:
            print(report["redis"]["error"])
        else:
            print("| input | pages / CPU s (client) | mean us | p50 us | p99 us | max us | calls logged | memory MB |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for name, row in report["redis"].items():
                if "error" in row:
                    print(f"| {name} | {row['error']} | | | | | | |")
                    continue
                print(f"| {name} | {row['pages_per_cpu_s']:.0f} | {row['server_mean_us']:.0f} | "
                      f"{row.get('server_p50_us', '-')} | {row.get('server_p99_us', '-')} | "
                      f"{row.get('server_max_us', '-')} | {row['evalsha_logged']} of {row['evalsha_calls']} | "
                      f"{row['used_memory_mb']:.1f} |")  # fmt: skip
            print(f"targets: p99 <= {TARGET_P99_US} us, max <= {TARGET_MAX_US} us")
    if "spark" in report:
        print(f"\n## Spark local[2], {report['spark_pages']} pages per kind")
        if "error" in report["spark"]:
            print(report["spark"]["error"])
        else:
            print("| input | wall s | CPU s (driver) | vs distinct | decisions = dedup's |")
            print("| --- | ---: | ---: | ---: | --- |")
            for name, row in report["spark"].items():
                if "error" in row:
                    print(f"| {name} | {row['error']} | | | |")
                    continue
                same = row.get("same_as_dedup")
                same_text = "-" if same is None else ("yes" if same else f"no ({row['differing_lines']} lines differ)")
                if same is False and row.get("same_kept_as_dedup"):
                    same_text += ", the same pages kept"
                print(f"| {name} | {row['wall_s']:.1f} | {row['cpu_s']:.1f} | {_f(row.get('wall_vs_distinct'))} | "
                      f"{same_text} |")  # fmt: skip
            print(f"target: a flood's wall time <= {TARGET_SPARK} x distinct pages'")
    if "before" in report:
        b = report["before"]
        print(f"\n## before ({b['checkout']}) and after (this checkout): dedup --workers 1, {b['kind']} pages")
        print("| pages | before wall s | before CPU s | after wall s | after CPU s |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for n, row in b["sizes"].items():
            cells = []
            for name in ("before", "after"):
                r = row[name]
                cells += [r["error"], ""] if "error" in r else [f"{r['wall_s']:.1f}", f"{r['cpu_s']:.1f}"]
            print(f"| {n} | {' | '.join(cells)} |")
    if "crawl" in report:
        print(f"\n## The crawler trap (an infinite calendar), CLOSESPIDER_PAGECOUNT={report['crawl_pages']}, "
              f"SIMHASH_BACKEND: {report['crawl_backend']}")  # fmt: skip
        print("| action | pages | days served | flagged | finish reason | first resp/s | last resp/s | last/first |"
              " candidates max |")  # fmt: skip
        print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
        for action, row in report["crawl"].items():
            most = "-" if row["candidates_max"] is None else row["candidates_max"]
            print(f"| {action} | {row['pages']} | {row['days_served']} | {row['flagged']} | {row['finish_reason']} | "
                  f"{_f(row.get('first_per_s'), '.0f')} | {_f(row.get('last_per_s'), '.0f')} | "
                  f"{_f(row.get('last_vs_first'))} | {most} |")  # fmt: skip
        print(f"target (flag): last/first >= {TARGET_CRAWL} (windows of {WINDOW} responses)")


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--pages", type=int, default=100_000, help="pages of each kind for dedup (default 100000)")
    parser.add_argument("--kinds", default=",".join(floods.KINDS), help="flood kinds (default: all three)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of alternated runs (default 3)")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"of {','.join(PARTS)} (default: all)")
    parser.add_argument("--redis-pages", type=int, default=20_000, help="pages of each kind through Redis")
    parser.add_argument("--spark-pages", type=int, default=2_000, help="pages of each kind through Spark")
    parser.add_argument("--spark-repeat", type=int, default=1, help="rounds of Spark runs (default 1)")
    parser.add_argument("--before", type=Path, help="another checkout (its compiled core built) for the before table")
    parser.add_argument("--before-pages", default="1000,2000,4000", help="sizes of the before table")
    parser.add_argument("--crawl", action="store_true", help="also crawl the trap site (flag and drop mode)")
    parser.add_argument("--crawl-pages", type=int, default=20_000, help="CLOSESPIDER_PAGECOUNT of the trap crawls")
    parser.add_argument("--crawl-backend", help="SIMHASH_BACKEND of the trap crawls (default: an on-disk index each)")
    parser.add_argument("--checkout", type=Path, help="run every command with this checkout's package (PYTHONPATH)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a run may take (default 1800)")
    parser.add_argument("--workdir", type=Path, help="where the inputs are written (default: a temporary dir)")
    parser.add_argument("--no-public", action="store_true", help="leave out the public stream (no flood/public ratio)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the numbers as JSON")
    args = parser.parse_args(argv)
    global CHECKOUT
    CHECKOUT = args.checkout.resolve() if args.checkout else None
    kinds = [k for k in args.kinds.split(",") if k]
    parts = [p for p in args.parts.split(",") if p]
    if bad := [k for k in kinds if k not in floods.KINDS] + [p for p in parts if p not in PARTS]:
        parser.error(f"unknown kind or part: {', '.join(bad)}")
    with tempfile.TemporaryDirectory(prefix="bench-flood-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        report: dict[str, Any] = {"pages": args.pages, "repeat": args.repeat, "kinds": kinds,
                                  "checkout": str(CHECKOUT or ROOT)}  # fmt: skip
        inputs = {kind: (flood_file(workdir, kind, args.pages), args.pages) for kind in [*kinds, "distinct"]}
        if {"dedup", "file"} & set(parts):
            public = None if args.no_public else public_stream(workdir)
            if args.no_public:
                report["public_note"] = "the public stream left out (--no-public): no flood/public ratio"
            elif public is None:
                report["public_note"] = (
                    f"the public stream ({PUBLIC_SET}) is not on this machine: no flood/public ratio"
                )
            else:
                report["public_note"] = f"public stream: {PUBLIC_PAGES} gunzipped, {public[1]} pages"
                inputs["public"] = public
            print(report["public_note"], file=sys.stderr)
        if "dedup" in parts:
            report["dedup"] = dedup_part(inputs, args.repeat, workdir, False, args.timeout)
        if "file" in parts:
            report["file"] = dedup_part(inputs, args.repeat, workdir, True, args.timeout)
        if "redis" in parts:
            report["redis_pages"] = args.redis_pages
            report["redis"] = redis_part([*kinds, "distinct"], args.redis_pages, workdir, args.timeout)
        if "spark" in parts:
            report["spark_pages"] = args.spark_pages
            report["spark"] = spark_part(kinds, args.spark_pages, workdir, args.timeout, args.spark_repeat)
        if args.before is not None:
            sizes = [int(x) for x in args.before_pages.split(",") if x]
            report["before"] = before_part(args.before.resolve(), sizes, "changing", workdir, args.timeout, args.repeat)
        if args.crawl:
            report["crawl_pages"] = args.crawl_pages
            report["crawl_backend"] = args.crawl_backend or "an on-disk index per crawl"
            report["crawl"] = crawl_part(args.crawl_pages, workdir, backend=args.crawl_backend)
    print_report(report)
    if args.json:
        write_json(args.json, report, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
