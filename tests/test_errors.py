"""Expected failures are one line, not a traceback: the command line (real subprocesses) and a crawl that
cannot start (a real ``scrapy crawl``).

The command line's rule: an expected failure (a store that is unreachable, locked, damaged or holds another
model's fingerprints, a bad URI, an input that cannot be read, an output that cannot be written) is one
line on stderr naming what failed and where, exit status 1.  ``dedup`` adds its summary line when it had
started reading pages (a failure part way), not when it could not start.  A bug (any other exception)
still shows its traceback.

A crawl whose filter cannot start logs one ERROR line naming SIMHASH_BACKEND, the URI (its password
masked) and the reason, and stops before it fetches anything.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest_redis import REDIS_PASSWORD
from crawl_helpers import CRAWL_TIMEOUT, ROOT, env, start_urls
from test_cli import run_cli

from devsites.redis_server import RedisServer
from simhash_filter.cli import index as cli_index
from simhash_filter.cli.main import main
from simhash_filter.index.backends.file import FileBackend
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import TableDesign

DESIGN = TableDesign.parse("4x16/k3")
PASSWORD = REDIS_PASSWORD
DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1: connection refused at once


@pytest.fixture
def locked_index(tmp_path: Path) -> Iterator[Path]:
    """An on-disk index held open for writing by this (the test) process."""
    path = tmp_path / "locked-idx"
    with FileBackend(path, k=3, design=DESIGN, metadata={"model": "m1", "sketch_bytes": 8}):
        yield path


def other_model_index(tmp_path: Path) -> Path:
    """An on-disk index of fingerprints of another model."""
    path = tmp_path / "other-idx"
    if not path.exists():
        FileBackend(path, k=3, design=DESIGN, metadata={"model": "another-model", "sketch_bytes": 8}).close()
    return path


def empty_directory(tmp_path: Path) -> Path:
    """A directory holding a file that is no input (a directory's JSON Lines and WARC files are read)."""
    path = tmp_path / "empty"
    path.mkdir(exist_ok=True)
    (path / "notes.txt").write_text("not an input\n")
    return path


def damaged_index(tmp_path: Path) -> Path:
    path = tmp_path / "damaged-idx"
    if not path.exists():
        FileBackend(path, k=3, design=DESIGN, metadata={"model": "m1", "sketch_bytes": 8}).close()
        (path / "CURRENT").write_text("garbage\n")
    return path


def assert_one_line(run: subprocess.CompletedProcess[str], *needles: str, summary: bool = False) -> None:
    """Exit status 1, no traceback, one line on stderr holding every needle (and dedup's summary if asked)."""
    lines = run.stderr.splitlines()
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 1, run.stderr
    assert len(lines) == (2 if summary else 1), run.stderr
    assert lines[0].startswith("simhash-filter: "), run.stderr
    for needle in needles:
        assert needle in lines[0], run.stderr
    if summary:
        assert lines[1].startswith("dedup: "), run.stderr


INDEX_COMMANDS = [
    ["index", "stats", "{index}"],
    ["index", "query", "{index}", "0123456789abcdef"],
    ["index", "export", "{index}"],
    ["index", "delete", "{index}", "https://a.example/x"],
    ["index", "compact", "{index}"],
    ["dedup", "{pages}", "--index", "{index}", "--no-progress"],
]
IDS = ["stats", "query", "export", "delete", "compact", "dedup"]


def fill(command: list[str], **values: object) -> list[str]:
    return [arg.format(**values) for arg in command]


@pytest.mark.parametrize("command", INDEX_COMMANDS, ids=IDS)
def test_unreachable_redis_is_one_line(command: list[str], pages_file: Path) -> None:
    """A Redis index on a closed port: one line naming the URI and the refused connection, exit status 1."""
    run = run_cli(*fill(command, index=DOWN, pages=pages_file))
    assert_one_line(run, DOWN, "127.0.0.1:1", "refused")


@pytest.mark.parametrize("command", INDEX_COMMANDS, ids=IDS)
def test_wrong_redis_password_is_one_line(
    command: list[str], pages_file: Path, password_redis_server: RedisServer
) -> None:
    """A Redis index with a wrong password: one line naming the URI (password masked), exit status 1."""
    uri = f"redis://default:wrong-{PASSWORD}@127.0.0.1:{password_redis_server.port}/0"
    run = run_cli(*fill(command, index=uri, pages=pages_file))
    assert_one_line(run, f"redis://default:***@127.0.0.1:{password_redis_server.port}/0")
    assert PASSWORD not in run.stderr + run.stdout


@pytest.mark.parametrize("command", [INDEX_COMMANDS[3], INDEX_COMMANDS[4], INDEX_COMMANDS[5]], ids=IDS[3:])
def test_locked_index_is_one_line(command: list[str], pages_file: Path, locked_index: Path) -> None:
    """An on-disk index another process holds open for writing: one line naming it, exit status 1."""
    run = run_cli(*fill(command, index=locked_index, pages=pages_file))
    assert_one_line(run, str(locked_index), "open for writing in another process")


CASES: dict[str, Callable[[Path, Path], tuple[list[str], list[str], bool]]] = {
    # name: (tmp_path, pages) -> (arguments, what the line names, whether dedup's summary follows)
    "dedup-damaged-index": lambda tmp, pages: (
        ["dedup", str(pages), "--index", str(damaged_index(tmp)), "--no-progress"],
        [str(damaged_index(tmp)), "damaged"],
        False,
    ),
    "stats-damaged-index": lambda tmp, pages: (
        ["index", "stats", str(damaged_index(tmp))],
        [str(damaged_index(tmp)), "damaged"],
        False,
    ),
    "dedup-other-model": lambda tmp, pages: (
        ["dedup", str(pages), "--index", str(other_model_index(tmp)), "--no-progress"],
        [str(other_model_index(tmp)), "another model"],
        False,
    ),
    "dedup-bad-uri-option": lambda tmp, pages: (
        ["dedup", str(pages), "--index", f"{DOWN}?bogus=1", "--no-progress"],
        [f"{DOWN}?bogus=1", "unknown Redis backend option 'bogus'"],
        False,
    ),
    "stats-bad-file-option": lambda tmp, pages: (
        ["index", "stats", f"file://{tmp}/idx?bogus=1"],
        ["unknown file backend option 'bogus'"],
        False,
    ),
    "dedup-missing-input": lambda tmp, pages: (
        ["dedup", str(tmp / "missing.jsonl"), "--no-progress"],
        [str(tmp / "missing.jsonl"), "No such file"],
        False,
    ),
    "dedup-input-is-a-directory-without-inputs": lambda tmp, pages: (
        ["dedup", str(empty_directory(tmp)), "--no-progress"],
        [str(tmp / "empty"), "no .jsonl or .warc files in this directory"],
        False,
    ),
    "dedup-truncated-gzip": lambda tmp, pages: (
        ["dedup", str(truncated_gzip(tmp, pages)), "--no-progress"],
        [str(tmp / "cut.jsonl.gz"), "read error"],
        True,
    ),
    "dedup-unwritable-output": lambda tmp, pages: (
        ["dedup", str(pages), "-o", str(tmp / "no-dir" / "out.jsonl"), "--no-progress"],
        [str(tmp / "no-dir" / "out.jsonl"), "cannot write"],
        False,
    ),
    "export-unwritable-output": lambda tmp, pages: (
        ["index", "export", str(filled_index(tmp, pages)), "-o", str(tmp / "no-dir" / "out.jsonl")],
        [str(tmp / "no-dir" / "out.jsonl"), "cannot write"],
        False,
    ),
}


def truncated_gzip(tmp: Path, pages: Path) -> Path:
    data = gzip.compress(pages.read_bytes() * 50)
    path = tmp / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    return path


def filled_index(tmp: Path, pages: Path) -> Path:
    path = tmp / "filled-idx"
    if not path.exists():
        assert main(["dedup", str(pages), "--index", str(path), "--no-progress", "-o", str(tmp / "first.jsonl")]) == 0
    return path


@pytest.mark.parametrize("case", CASES)
def test_expected_failures_are_one_line(case: str, tmp_path: Path, pages_file: Path) -> None:
    """Damaged index, other model, bad URI, unreadable input, unwritable output: one line naming what and where."""
    args, needles, summary = CASES[case](tmp_path, pages_file)
    assert_one_line(run_cli(*args), *needles, summary=summary)


def test_dedup_index_failing_part_way_is_one_line_and_the_summary(
    monkeypatch: pytest.MonkeyPatch, pages_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An index that fails after the first page (a Redis server gone): one line naming it, then the summary."""
    real = NearDuplicateIndex.check_and_add
    calls = []

    def failing(self: NearDuplicateIndex, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:
            raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(NearDuplicateIndex, "check_and_add", failing)
    out = tmp_path / "out.jsonl"
    assert main(["dedup", str(pages_file), "--no-progress", "-o", str(out)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and lines[1].startswith("dedup: 1 pages"), lines
    assert lines[0].startswith("simhash-filter: index 'memory://' failed after 1 lines: Error 111"), lines
    assert "refused" in lines[0] and not out.exists()


def test_a_bug_in_an_index_command_still_shows_its_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An unexpected exception type (a bug) is not turned into a one-line error: it propagates."""

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli_index, "open_backend", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["index", "stats", str(tmp_path / "idx")])


# -- a crawl that cannot start ------------------------------------------------------------------------


def crawl_log(tmp_path: Path, port: int, backend: str, **settings: str) -> str:
    """The log of ``scrapy crawl site`` of the local site with ``SIMHASH_BACKEND=backend`` (and its stderr)."""
    return crawl_run(tmp_path, port, backend, **settings)[0]


def crawl_run(tmp_path: Path, port: int, backend: str, **settings: str) -> tuple[str, int]:
    """The log (and stderr) and exit status of ``scrapy crawl site`` of the local site with
    ``SIMHASH_BACKEND=backend``."""
    log = tmp_path / "crawl.log"
    merged = {"LOG_FILE": str(log), "LOG_LEVEL": "INFO", "SIMHASH_BACKEND": backend, **settings}
    cmd = [sys.executable, "-m", "scrapy.cmdline", "crawl", "site", "-a", f"start_urls={start_urls(port)}"]
    cmd += ["-O", f"{tmp_path / 'items.jsonl'}:jsonlines"]
    for name, value in merged.items():
        cmd += ["-s", f"{name}={value}"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=CRAWL_TIMEOUT)
    return (log.read_text(encoding="utf-8") if log.exists() else "") + proc.stderr, proc.returncode


def assert_stopped_at_start(log: str, *needles: str) -> None:
    """One ERROR line naming SIMHASH_BACKEND and the needles; no traceback; closed before fetching anything."""
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, log
    assert "SIMHASH_BACKEND" in errors[0], log
    for needle in needles:
        assert needle in errors[0], log
    assert "Traceback" not in log and "Task exception was never retrieved" not in log, log
    assert "Closing spider (simhash_start_failed)" in log, log
    assert "downloader/request_count" not in log and "item_scraped_count" not in log, log  # the stats dump


REACTORS = {"asyncio": {}, "select-reactor": {"TWISTED_REACTOR": "twisted.internet.selectreactor.SelectReactor"}}


@pytest.mark.parametrize("reactor", REACTORS)
def test_crawl_with_a_locked_index_stops_at_start(
    tmp_path: Path, site_port: int, locked_index: Path, reactor: str
) -> None:
    """An on-disk index held by another process: the crawl stops at start with one line, no traceback (under
    asyncio's reactor and another)."""
    log = crawl_log(tmp_path, site_port, str(locked_index), **REACTORS[reactor])
    assert_stopped_at_start(log, str(locked_index), "open for writing in another process")


def test_crawl_with_an_index_of_another_model_stops_at_start(tmp_path: Path, site_port: int) -> None:
    """An on-disk index of another model: the crawl stops at start with one line, no traceback."""
    index = other_model_index(tmp_path)
    log = crawl_log(tmp_path, site_port, str(index))
    assert_stopped_at_start(log, str(index), "another model")


def test_crawl_with_redis_down_stops_at_start(tmp_path: Path, site_port: int) -> None:
    """Redis on a closed port: one line with the URI, its password masked, and the reason; no traceback."""
    log = crawl_log(tmp_path, site_port, f"redis://default:{PASSWORD}@127.0.0.1:1/0?prefix=site")
    assert_stopped_at_start(log, "SIMHASH_BACKEND=redis://default:***@127.0.0.1:1/0?prefix=site", "refused")
    assert PASSWORD not in log


def test_crawl_with_a_wrong_redis_password_stops_at_start(
    tmp_path: Path, site_port: int, password_redis_server: RedisServer
) -> None:
    """Redis refusing the password: one line with the URI, password masked; no traceback."""
    uri = f"redis://default:wrong-{PASSWORD}@127.0.0.1:{password_redis_server.port}/0"
    log = crawl_log(tmp_path, site_port, uri)
    assert_stopped_at_start(log, f"redis://default:***@127.0.0.1:{password_redis_server.port}/0")
    assert PASSWORD not in log


def test_crawl_whose_filter_cannot_start_exits_1(
    tmp_path: Path, site_port: int, password_redis_server: RedisServer
) -> None:
    """``scrapy crawl`` whose filter cannot start (a wrong Redis password) exits with status 1, as for a crawl
    that fails to start, so that scripts and cron jobs see the failure."""
    uri = f"redis://default:wrong-{PASSWORD}@127.0.0.1:{password_redis_server.port}/0"
    log, status = crawl_run(tmp_path, site_port, uri)
    assert "Closing spider (simhash_start_failed)" in log and status == 1, (status, log)


def test_a_crawl_that_starts_exits_0(tmp_path: Path, site_port: int) -> None:
    """A crawl whose filter starts and runs to its end exits with status 0 (the exit status tells them apart)."""
    log, status = crawl_run(tmp_path, site_port, str(tmp_path / "index"), SIMHASH_PROCESSES="0")
    assert "Closing spider (finished)" in log and status == 0, (status, log)


def test_a_redis_uri_without_the_password_redis_asks_for_is_said_plainly(
    password_redis_server: RedisServer, pages_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Redis URI without a password, to a Redis that asks for one: one plain line saying where the password
    goes, not redis-py's "HELLO must be called ..."."""
    uri = f"redis://127.0.0.1:{password_redis_server.port}/0"
    assert main(["dedup", str(pages_file), "--no-progress", "--index", uri]) == 1
    err = capsys.readouterr().err
    assert f"cannot open index '{uri}': Redis asks for a password and the URI gives none" in err, err
    assert "HELLO" not in err and len(err.splitlines()) == 1
