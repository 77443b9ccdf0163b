"""Helpers of the crawl tests: the local site in a subprocess, ``scrapy crawl`` in a subprocess, an
extension that writes the crawl's stats to a JSON file, and an index backend that fails on purpose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrapy import signals

from simhash_filter.index.backends import Candidate
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.bound import DEFAULT_BOUND, CheckBound

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CRAWL_TIMEOUT = 120


class FlakyBackend(MemoryBackend):
    """A memory backend that fails the first ``add_and_candidates`` of a key containing ``index-error`` (a
    server that dropped the call); the page is added late, when the index answers the next page."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._failed_once: set[str] = set()

    def add_and_candidates(
        self, fingerprint: int, key: str, sketch: bytes, k: int, bound: CheckBound = DEFAULT_BOUND
    ) -> list[Candidate]:
        if "index-error" in key and key not in self._failed_once:
            self._failed_once.add(key)
            raise ConnectionError(f"the test backend refuses {key}")
        return super().add_and_candidates(fingerprint, key, sketch, k, bound)


class RedisGoneAtClose:
    """Shuts down the Redis at ``REDIS_GONE_AT_CLOSE`` (a URL) when the spider closes, before the filter's own
    ``spider_closed`` handler runs (extensions connect theirs first): the index is gone at the end of the crawl."""

    def __init__(self, crawler: Any) -> None:
        self.url = crawler.settings["REDIS_GONE_AT_CLOSE"]

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisGoneAtClose:
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_closed(self) -> None:
        import redis

        client = redis.Redis.from_url(self.url, socket_timeout=5)
        try:
            client.shutdown(nosave=True)
        except redis.ConnectionError:
            pass  # the server closed the connection as it went
        finally:
            client.close()


class RedisHangsAfterFrontPage:
    """Pauses every client of the Redis at ``REDIS_HANGS_AFTER_FRONT_PAGE`` (a URL) for a minute (``CLIENT PAUSE``)
    once the front page (a URL ending in ``/``) has been checked: Redis hangs for the pages it links to."""

    PAUSE_MS = 60_000

    def __init__(self, crawler: Any) -> None:
        self.url = crawler.settings["REDIS_HANGS_AFTER_FRONT_PAGE"]
        self.paused = False

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisHangsAfterFrontPage:
        ext = cls(crawler)
        crawler.signals.connect(ext.response_received, signal=signals.response_received)
        return ext

    def response_received(self, response: Any) -> None:
        if self.paused or not response.url.endswith("/"):
            return
        import redis

        self.paused = True
        with redis.Redis.from_url(self.url, socket_timeout=5) as client:
            client.client_pause(self.PAUSE_MS, all=True)


class StatsToJson:
    """Writes the crawl's stats to ``STATS_JSON`` when the engine stops (enabled in tests only)."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.path = crawler.settings["STATS_JSON"]

    @classmethod
    def from_crawler(cls, crawler: Any) -> StatsToJson:
        ext = cls(crawler)
        crawler.signals.connect(ext.engine_stopped, signal=signals.engine_stopped)
        return ext

    def engine_stopped(self) -> None:
        with open(self.path, "w", encoding="utf-8") as f:
            json.dump(self.crawler.stats.get_stats(), f, default=str)


@dataclass
class Crawl:
    """What a finished ``scrapy crawl`` left: items of the feed, stats, the log, the exit status."""

    items: list[dict[str, Any]]
    stats: dict[str, Any]
    log: str
    returncode: int

    def by_key(self) -> dict[str, dict[str, Any]]:
        """Items by host + path, the keys of ``site_server.GROUPS``."""
        return {url_key(item["url"]): item for item in self.items}


def url_key(url: str) -> str:
    """``http://127.0.0.1:8000/a?b`` → ``127.0.0.1/a?b``."""
    rest = url.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    return f"{hostport.split(':')[0]}/{path}"


def env() -> dict[str, str]:
    """The environment of a subprocess: tests/ importable, deprecation warnings fatal."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), str(ROOT), os.environ.get("PYTHONPATH")]))
    out["PYTHONWARNINGS"] = "error::DeprecationWarning,error::PendingDeprecationWarning"
    return out


@contextmanager
def local_site() -> Iterator[int]:
    """Serve ``site_server.site()`` on 127.0.0.1 and 127.0.0.2 in a subprocess; yield the port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "devsites.site_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"the test site did not start: {line!r}")
        yield int(line)
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        proc.stdout.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_urls(port: int) -> str:
    """The test site's two hosts as the ``site`` spider's start URLs."""
    from devsites.site_server import MIRROR

    return f"http://127.0.0.1:{port}/,http://{MIRROR}:{port}/"


def scrapy_crawl(
    spider: str,
    tmp_path: Path,
    *,
    cwd: Path = ROOT,
    args: Mapping[str, str] | None = None,
    settings: Mapping[str, Any] | None = None,
    feed: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    check: bool = True,
) -> Crawl:
    """``python -m scrapy.cmdline crawl SPIDER`` in ``cwd``, stats to JSON.

    Items go to a feed given with ``-O`` (or, with ``feed``, are read from that path: the project's
    own default feed).  A crawl that exits with another status than 0 is an error, unless not *check*.
    """
    out = feed or tmp_path / "items.jsonl"
    stats = tmp_path / "stats.json"
    log = tmp_path / "crawl.log"
    merged: dict[str, Any] = {
        "EXTENSIONS": json.dumps({"crawl_helpers.StatsToJson": 0}),
        "STATS_JSON": str(stats),
        "LOG_FILE": str(log),
        "LOG_LEVEL": "INFO",
        "SIMHASH_BACKEND": str(tmp_path / "simhash-index"),  # each test its own on-disk index ("": the default)
        **(settings or {}),
    }
    cmd = [sys.executable, "-m", "scrapy.cmdline", "crawl", spider]
    if feed is None:
        cmd += ["-O", f"{out}:jsonlines"]
    for name, value in (args or {}).items():
        cmd += ["-a", f"{name}={value}"]
    for name, value in merged.items():
        cmd += ["-s", f"{name}={value}"]
    proc = subprocess.run(
        cmd, cwd=cwd, env={**env(), **(extra_env or {})}, capture_output=True, text=True, timeout=CRAWL_TIMEOUT
    )
    text = log.read_text(encoding="utf-8") if log.exists() else ""
    text += proc.stderr
    if (check and proc.returncode != 0) or not stats.exists():
        raise AssertionError(f"crawl failed ({proc.returncode}):\n{text[-6000:]}")
    items = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    return Crawl(items, json.loads(stats.read_text(encoding="utf-8")), text, proc.returncode)


def flag_crawl_into_default_feed(port: int, tmp: Path, settings: Mapping[str, Any] | None = None) -> tuple[Crawl, Path]:
    """A flag-mode crawl of the test site storing text and HTML, run in ``tmp`` so that the project's default feed
    lands in ``tmp/out/pages.jsonl``; the crawl and the feed's path."""
    feed = tmp / "out" / "pages.jsonl"
    crawl = scrapy_crawl(
        "site",
        tmp,
        cwd=tmp,
        args={"start_urls": start_urls(port), "store": "both"},
        settings={"SIMHASH_ACTION": "flag", **(settings or {})},
        feed=feed,
        extra_env={"SCRAPY_SETTINGS_MODULE": "crawler.settings"},
    )
    return crawl, feed
