"""Two ``scrapy crawl site`` processes share one crawl through Redis: scrapy-redis's scheduler and
dupefilter (one frontier, each request taken once) and ``SIMHASH_BACKEND=redis://`` (one near-duplicate
index), over the local test site with its mirror (``devsites/site_server.py``)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest_redis import REDIS_PASSWORD
from crawl_helpers import Crawl, local_site, scrapy_crawl, url_key

from devsites.redis_server import RedisServer
from devsites.site_server import GROUPS, INDEX_ERROR_PATH, MIRROR, OTHERS
from simhash_filter.config import DEFAULTS
from simhash_filter.index.backends import open_backend
from simhash_filter.index.tables import resolve_design

#: scrapy-redis 0.9.1 calls two things Scrapy 2.13+ deprecates: ``stats.inc_value(..., spider=spider)`` and
#: ``spider.log()`` ("Resuming crawl" when the shared queue is not empty).  ``ScrapyDeprecationWarning``
#: is not a ``DeprecationWarning`` (not fatal under ``PYTHONWARNINGS=error::DeprecationWarning``); these are a
#: crawl's only warnings.
SCRAPY_REDIS_WARNING = re.compile(
    r"scrapy_redis/scheduler\.py:\d+: ScrapyDeprecationWarning: (?:Passing a 'spider' argument to "
    r"StatsCollector\.inc_value\(\) is deprecated|Spider\.log\(\) is deprecated)"
)
#: The sketch of every page of the tests that decide by fingerprint alone (all equally similar).
SKETCH = bytes(DEFAULTS.fingerprint.sketch_bytes)
#: A response that reached the spider, or one the filter dropped before (logged with SIMHASH_DEBUG).
FETCHED = re.compile(r"DEBUG: (?:Crawled \(\d+\) <GET (\S+)>|simhash: dropped (\S+): near-duplicate of)")


def fetched(crawl: Crawl) -> list[str]:
    """URL keys of every response the crawl received (robots.txt aside)."""
    urls = [a or b for a, b in FETCHED.findall(crawl.log)]
    return [url_key(url) for url in urls if not url.endswith("/robots.txt")]


@pytest.mark.slow
@pytest.mark.parametrize("index", ["one server", "sharded over a cluster"])
def test_two_processes_share_the_frontier_and_the_index(
    index: str, redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    """Each page is fetched by one of the two processes only, and of each group of near-identical pages
    (across both hosts) exactly one is kept, whichever process met it: with the index on the frontier's Redis, and
    sharded over the three masters of a Redis Cluster."""
    run = f"crawl-{uuid.uuid4().hex[:8]}"
    index_uri = f"{redis_server.url}?prefix={run}"
    if index != "one server":
        index_uri = f"{request.getfixturevalue('redis_cluster').url}?cluster=1&shards=3&prefix={run}"
    queue = f"{run}:%(spider)s:requests"
    settings = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": "True",  # the first process to finish must not delete the shared queue
        "SCHEDULER_QUEUE_KEY": queue,
        "SCHEDULER_DUPEFILTER_KEY": f"{run}:%(spider)s:dupefilter",
        "REDIS_URL": redis_server.url,
        "SIMHASH_BACKEND": index_uri,
        "DOWNLOAD_FAIL_ON_DATALOSS": "False",
        "CONCURRENT_REQUESTS": "4",
        "LOG_LEVEL": "DEBUG",
        "SIMHASH_DEBUG": "True",
    }
    # each process holds the requests its pages led to until the other has received a response, and stays open
    # until it has received one (tests/crawl_gate.py): both take part, however the two are scheduled
    settings["DOWNLOADER_MIDDLEWARES"] = json.dumps({"crawl_gate.TakeTurns": 950})
    with local_site() as port, ThreadPoolExecutor(2) as pool:
        args = {"start_urls": f"http://127.0.0.1:{port}/,http://{MIRROR}:{port}/"}
        futures = []
        for me in (0, 1):
            turn = {"TURNS_MINE": f"{run}:turn:{me}", "TURNS_OTHER": f"{run}:turn:{1 - me}"}
            tmp = tmp_path_factory.mktemp(f"process{me}")
            futures.append(pool.submit(scrapy_crawl, "site", tmp, args=args, settings={**settings, **turn}))
        crawls = [future.result() for future in futures]

    # every page fetched once, by one process or the other; both took part
    counts = Counter(key for crawl in crawls for key in fetched(crawl))
    assert all(n == 1 for n in counts.values()), [key for key, n in counts.items() if n > 1]
    assert all(fetched(crawl) for crawl in crawls), "one process fetched nothing"
    groups = {name: list(keys) for name, keys in GROUPS.items()}
    groups["lighthouse"].append(f"127.0.0.1{INDEX_ERROR_PATH}")  # a copy of the lighthouse story
    pages = [key for keys in groups.values() for key in keys] + OTHERS
    assert set(pages) <= set(counts)

    # one page of each near-duplicate group kept, across both processes
    stored = [url_key(item["url"]) for crawl in crawls for item in crawl.items]
    assert len(stored) == len(set(stored))
    for group, keys in groups.items():
        assert len([key for key in keys if key in stored]) == 1, (group, sorted(stored))
    assert set(OTHERS) <= set(stored)
    kept = sum(crawl.stats.get("simhash/kept", 0) for crawl in crawls)
    assert kept == len(groups) + len(OTHERS)
    dropped = sum(crawl.stats.get("simhash/dropped", 0) for crawl in crawls)
    assert dropped == sum(len(k) - 1 for k in groups.values())
    k = DEFAULTS.max_distance
    design = resolve_design(DEFAULTS.tables, 1_000_000)
    with open_backend(index_uri, k=k, design=design) as stored_index:
        # every kept page is stored, a dropped one unless every table already held enough near-duplicates of it
        assert kept <= len(stored_index) <= kept + dropped

    # no errors; the only warnings are scrapy-redis's deprecated stats calls
    for crawl in crawls:
        assert "ERROR" not in crawl.log and "Traceback" not in crawl.log
        for line in crawl.log.splitlines():
            if "WARNING" in line or "Deprecat" in line:
                assert SCRAPY_REDIS_WARNING.search(line), line


def test_redis_backend_setting_reaches_the_filter(redis_server: RedisServer, redis_prefix: str) -> None:
    """``SIMHASH_BACKEND = "redis://..."`` opens the Redis backend with the crawl's model as metadata."""
    from scrapy.utils.test import get_crawler

    from simhash_filter.crawl.crawlfilter import CrawlFilter
    from simhash_filter.crawl.settings import SIMHASH_MAX_DISTANCE, FilterOptions
    from simhash_filter.index.backends.redis import RedisBackend

    crawler = get_crawler(settings_dict={"SIMHASH_BACKEND": f"{redis_server.url}?prefix={redis_prefix}"})
    crawl_filter = CrawlFilter(FilterOptions.from_settings(crawler.settings), crawler.stats)
    try:
        assert isinstance(crawl_filter.index.backend, RedisBackend)
        assert crawl_filter.index.k == SIMHASH_MAX_DISTANCE
        assert crawl_filter.index.metadata == crawl_filter.options.config.index_metadata()
        assert crawl_filter.decide("https://a.example/", 0xFFFF, SKETCH).duplicate_of is None
        assert crawl_filter.decide("https://b.example/", 0xFFFE, SKETCH).duplicate_of == "https://a.example/"
    finally:
        crawl_filter.index.close()


def test_filter_lets_pages_through_while_redis_is_down(own_redis_server: RedisServer, redis_prefix: str) -> None:
    """With Redis down the crawl's filter lets pages through unchecked (``simhash/skipped/index_error``);
    when Redis is back it checks again, against what was stored before."""
    from scrapy.utils.test import get_crawler

    from simhash_filter.crawl.crawlfilter import CrawlFilter
    from simhash_filter.crawl.decision import SkipReason
    from simhash_filter.crawl.settings import FilterOptions

    uri = f"{own_redis_server.url}?prefix={redis_prefix}&retries=1&retry_backoff=0.05"
    crawler = get_crawler(settings_dict={"SIMHASH_BACKEND": uri})
    crawl_filter = CrawlFilter(FilterOptions.from_settings(crawler.settings), crawler.stats)
    try:
        assert crawl_filter.decide("https://a.example/", 0xF0F0, SKETCH).status == "ok"
        own_redis_server.stop()
        start = time.monotonic()
        assert crawl_filter.decide("https://b.example/", 0xF0F1, SKETCH).status == SkipReason.INDEX_ERROR
        assert time.monotonic() - start < 15  # failed fast, not hung (a bound far above any load)
        own_redis_server.start()
        decision = crawl_filter.decide("https://c.example/", 0xF0F3, SKETCH)
        assert decision.status == "ok" and decision.duplicate_of == "https://a.example/"
        assert crawler.stats.get_value(f"simhash/skipped/{SkipReason.INDEX_ERROR}") == 1
    finally:
        crawl_filter.index.close()


def _full_redis_crawl(tmp_path: Path, on_index_error: str) -> Crawl:
    """A crawl of the test site whose index is in a Redis at its ``maxmemory`` (``noeviction``)."""
    from devsites.redis_server import temporary_server

    args = ["--maxmemory-policy", "noeviction"]
    with temporary_server(tmp_path / "redis", args=args) as server, local_site() as port:
        uri = f"{server.url}?prefix=full"
        k = DEFAULTS.max_distance
        design = resolve_design(DEFAULTS.tables, 1_000_000)
        open_backend(uri, k=k, design=design, metadata=DEFAULTS.index_metadata()).close()  # its metadata fits
        client = server.client()
        client.config_set("maxmemory", client.info("memory")["used_memory"] + 30_000)
        settings = {"SIMHASH_BACKEND": uri, "SIMHASH_PROCESSES": "0", "SIMHASH_ON_INDEX_ERROR": on_index_error}
        args = {"start_urls": f"http://127.0.0.1:{port}/"}
        return scrapy_crawl("site", tmp_path, args=args, settings=settings, check=on_index_error != "stop")


@pytest.mark.slow
def test_a_full_redis_is_said_plainly_at_the_first_page_and_in_the_summary(tmp_path: Path) -> None:
    """Redis at maxmemory (noeviction): one ERROR line says "Redis is full" and what to do, without a
    traceback; the summary says how many pages went unchecked; the crawl goes on (SIMHASH_ON_INDEX_ERROR
    'pass')."""
    crawl = _full_redis_crawl(tmp_path, "pass")
    unchecked = crawl.stats["simhash/index_full"]
    assert unchecked > 1 and crawl.stats["finish_reason"] == "finished"
    errors = [line for line in crawl.log.splitlines() if "simhash" in line and " ERROR: " in line]
    assert len(errors) == 1 and "Redis is full (command not allowed when used memory" in errors[0], errors
    assert "raise maxmemory" in errors[0] and "SIMHASH_ON_INDEX_ERROR = 'stop'" in errors[0]
    assert "OutOfMemoryError" not in crawl.log and "simhash_filter/" not in crawl.log, crawl.log[-4000:]  # no traceback
    assert f"; Redis is full: {unchecked} pages went unchecked; raise maxmemory" in crawl.log


@pytest.mark.slow
def test_on_index_error_stop_closes_the_crawl_when_redis_is_full(tmp_path: Path) -> None:
    """SIMHASH_ON_INDEX_ERROR = 'stop': the first page the full Redis cannot check closes the spider (finish
    reason simhash_index_error, exit status 1), so the crawl does not run on unfiltered."""
    passed = _full_redis_crawl(tmp_path / "pass", "pass")
    stopped = _full_redis_crawl(tmp_path / "stop", "stop")
    assert stopped.stats["finish_reason"] == "simhash_index_error" and stopped.returncode == 1
    assert "SIMHASH_ON_INDEX_ERROR is 'stop': the crawl stops" in stopped.log
    assert stopped.stats["response_received_count"] < passed.stats["response_received_count"]


#: A log line's time: ``2026-01-31 12:00:00 [scrapy.core.engine] INFO: ...``.
LOG_TIME = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \[[^]]+\] \w+: "


def _logged_at(log: str, message: str) -> float:
    """When the first log line ending in *message* was written (seconds since the epoch)."""
    found = re.search(LOG_TIME + re.escape(message) + "$", log, re.MULTILINE)
    assert found, f"no log line {message!r}:\n{log[-4000:]}"
    return time.mktime(time.strptime(found.group(1), "%Y-%m-%d %H:%M:%S"))


@pytest.mark.slow
def test_on_index_error_stop_with_a_hung_redis_closes_in_seconds_and_exits_1(
    own_redis_server: RedisServer, redis_prefix: str, tmp_path: Path
) -> None:
    """Redis hangs (``CLIENT PAUSE``) after the front page, with eight pages fetched at a time, each check waiting out
    the client's 2 s timeout three times: the first failed check stops the crawl, the pages queued behind it go
    through without calling the index (``simhash/skipped/after_stop``), the index's size is not read at the end,
    and the spider closes in seconds, ``scrapy crawl`` exiting 1.  (Each queued page waited out the timeout, and
    then two reads of the size: a minute; and the process exited 0.)"""
    uri = f"{own_redis_server.url}?prefix={redis_prefix}"
    settings = {
        "SIMHASH_BACKEND": uri,
        "SIMHASH_ON_INDEX_ERROR": "stop",
        "SIMHASH_PROCESSES": "0",
        "CONCURRENT_REQUESTS": "8",
        "EXTENSIONS": json.dumps({"crawl_helpers.StatsToJson": 0, "crawl_helpers.RedisHangsAfterFrontPage": 0}),
        "REDIS_HANGS_AFTER_FRONT_PAGE": own_redis_server.url,
    }
    with local_site() as port:
        args = {"start_urls": f"http://127.0.0.1:{port}/"}
        crawl = scrapy_crawl("site", tmp_path, args=args, settings=settings, check=False)
    log = crawl.log
    assert crawl.returncode == 1, log[-4000:]
    assert crawl.stats["finish_reason"] == "simhash_index_error"
    assert crawl.stats.get("simhash/skipped/after_stop", 0) >= 1, crawl.stats
    closing = _logged_at(log, "Closing spider (simhash_index_error)")
    closed = _logged_at(log, "Spider closed (simhash_index_error)")
    print(f"closed {closed - closing:.0f} s after the stop; {crawl.stats['simhash/skipped/after_stop']} pages after it")
    assert closed - closing < 25, f"closed {closed - closing:.0f} s after the stop"  # a hang took 60 s and more
    assert "index size unknown: " in log and "did not answer at the last page" in log, log[-4000:]
    assert "Error caught on signal handler" not in log and "cannot read the index size" not in log


@pytest.mark.slow
def test_a_redis_gone_at_the_end_of_the_crawl_leaves_the_summary_line_without_a_traceback(
    tmp_path_factory: pytest.TempPathFactory, redis_prefix: str, tmp_path: Path
) -> None:
    """Redis (with a password) shut down as the spider closes: the summary line is written all the same, its
    index size unknown because Redis did not answer; no traceback, no password.  (It was an ERROR with a
    traceback, then "Error caught on signal handler" and no summary.)"""
    with RedisServer(tmp_path_factory.mktemp("redis-gone"), password=REDIS_PASSWORD) as server, local_site() as port:
        settings = {
            "SIMHASH_BACKEND": f"{server.url}?prefix={redis_prefix}",
            "SIMHASH_PROCESSES": "0",
            "DOWNLOAD_FAIL_ON_DATALOSS": "False",  # the site's /truncated page is no error
            "EXTENSIONS": json.dumps({"crawl_helpers.StatsToJson": 0, "crawl_helpers.RedisGoneAtClose": 0}),
            "REDIS_GONE_AT_CLOSE": server.url,
        }
        crawl = scrapy_crawl("site", tmp_path, args={"start_urls": f"http://127.0.0.1:{port}/"}, settings=settings)
        assert server.process is not None and server.process.wait(timeout=10) == 0
    log = crawl.log
    summary = [line for line in log.splitlines() if "pages checked: " in line]
    assert len(summary) == 1, log[-4000:]
    assert crawl.stats["simhash/checked"] > 10 and crawl.stats["finish_reason"] == "finished"
    assert f"index size unknown: redis://:***@127.0.0.1:{server.port}/0?prefix={redis_prefix} did not answer" in (
        summary[0]
    ), summary[0]
    assert "Traceback" not in log and "Error caught on signal handler" not in log, log[-4000:]
    assert " ERROR: " not in log, log[-4000:]
    assert REDIS_PASSWORD not in log
