"""Scrapy's inspection commands leave the crawl's index alone: ``scrapy parse``, ``fetch``, ``shell`` and ``check``
run in a subprocess in a project of their own (a fresh ``.scrapy``) against the local test site.  They create no
index and change none, flag a near-duplicate instead of dropping the page asked for, do not fail on the lock a
running crawl holds, and the next crawl returns what it would have returned without them."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from crawl_helpers import CRAWL_TIMEOUT, env, scrapy_crawl, start_urls, url_key
from filter_crawler import filter_crawler

from devsites.site_server import GROUPS, MIRROR
from simhash_filter.crawl.inspection import INSPECTION_COMMANDS, inspection, readonly_uri, running_command

pytestmark = pytest.mark.slow

#: The spider of ``scrapy check``: the project's ``site`` spider (its index, its name) with two contracts, on a page
#: and on its mirror's copy: near-duplicates of each other.
CONTRACTS = '''
from crawler.spiders.site import SiteSpider


class ContractSpider(SiteSpider):
    name = "site"

    def parse(self, response, **kwargs):
        """@url http://127.0.0.1:{port}/news/rainwater
        @returns items 1 1
        """
        yield from super().parse(response, **kwargs)

    def parse_mirror(self, response, **kwargs):
        """@url http://{mirror}:{port}/news/rainwater
        @returns items 1 1
        """
        yield from super().parse(response, **kwargs)
'''


def project(tmp_path: Path, name: str, port: int) -> Path:
    """A copy of the project: its ``scrapy.cfg`` in a directory of its own, so that its ``.scrapy`` is fresh."""
    path = tmp_path / name
    path.mkdir()
    (path / "scrapy.cfg").write_text("[settings]\ndefault = crawler.settings\n", encoding="utf-8")
    (path / "contract_spiders.py").write_text(CONTRACTS.format(port=port, mirror=MIRROR), encoding="utf-8")
    return path


def index_dir(project_dir: Path) -> Path:
    return project_dir / ".scrapy" / "simhash" / "simhash-crawler" / "site"


def snapshot(path: Path) -> dict[str, tuple[str, float]]:
    """Every file under *path* with the digest of its bytes and its modification time."""
    return {
        str(f.relative_to(path)): (hashlib.sha256(f.read_bytes()).hexdigest(), f.stat().st_mtime)
        for f in sorted(path.rglob("*"))
        if f.is_file()
    }


def scrapy(cwd: Path, *args: str, stats: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m scrapy.cmdline ARGS`` in *cwd*, at INFO, its stats written to *stats* (as JSON) if given."""
    settings = {"LOG_LEVEL": "INFO", "SIMHASH_PROCESSES": "0"}
    if stats is not None:
        settings |= {"EXTENSIONS": json.dumps({"crawl_helpers.StatsToJson": 0}), "STATS_JSON": str(stats)}
    cmd = [sys.executable, "-m", "scrapy.cmdline", *args]
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    return subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=CRAWL_TIMEOUT)


def parse(cwd: Path, port: int, url: str, stats: Path | None = None) -> subprocess.CompletedProcess[str]:
    return scrapy(cwd, "parse", "--spider", "site", "-a", f"start_urls={start_urls(port)}", url, stats=stats)


def check(cwd: Path, port: int) -> subprocess.CompletedProcess[str]:
    """``scrapy check site`` with the contracts spider (``-L INFO`` turns its logging on)."""
    return scrapy(cwd, "check", "-L", "INFO", "-s", "SPIDER_MODULES=contract_spiders", "-a",
                  f"start_urls={start_urls(port)}", "site")  # fmt: skip


def page(port: int, host: str = "127.0.0.1") -> str:
    return f"http://{host}:{port}/news/rainwater"


def stored_pages(crawl_items: list[dict[str, Any]]) -> list[str]:
    """The pages a crawl stored, a page of a group of near-duplicates by its group's name (which one of the group
    is kept depends on which arrives first)."""
    group_of = {key: group for group, keys in GROUPS.items() for key in keys}
    return sorted(group_of.get(url_key(item["url"]), url_key(item["url"])) for item in crawl_items)


def test_inspections_create_no_index_and_drop_nothing(site_port: int, tmp_path: Path) -> None:
    """With no index yet: ``parse`` of a page and then of its mirror's copy both answer with the page (the first
    one stored nothing), ``fetch`` prints the page, ``check`` passes its two contracts on the first run, no index is
    created, and the next crawl returns the items of a crawl in a project never inspected."""
    inspected = project(tmp_path, "inspected", site_port)
    first = parse(inspected, site_port, page(site_port))
    mirror = parse(inspected, site_port, page(site_port, MIRROR), stats=tmp_path / "mirror.json")
    fetched = scrapy(inspected, "fetch", page(site_port, MIRROR))
    checked = check(inspected, site_port)

    for run in (first, mirror, fetched):
        assert run.returncode == 0, run.stderr[-3000:]
        assert "No response downloaded" not in run.stderr
    assert "simhash: scrapy parse: the index is read, never written; responses are flagged, not dropped" in first.stderr
    assert "simhash: scrapy fetch: the index is read, never written" in fetched.stderr
    assert f"'url': 'http://{MIRROR}:{site_port}/news/rainwater'" in mirror.stdout
    assert json.loads((tmp_path / "mirror.json").read_text())["simhash/kept"] == 1
    assert "Collecting rainwater" in fetched.stdout
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "Ran 2 contracts" in checked.stderr and "OK" in checked.stderr
    assert not list((inspected / ".scrapy").rglob("CURRENT"))  # no index: the site spider's, fetch's default one

    reference = project(tmp_path, "reference", site_port)
    common = {"args": {"start_urls": start_urls(site_port)}, "settings": {"SIMHASH_BACKEND": ""}}
    after = scrapy_crawl("site", tmp_path / "inspected", cwd=inspected, **common)
    alone = scrapy_crawl("site", tmp_path / "reference", cwd=reference, **common)
    assert stored_pages(after.items) == stored_pages(alone.items) and after.items
    assert after.stats["simhash/kept"] == alone.stats["simhash/kept"] and after.stats["simhash/unchanged"] == 0


def test_inspections_leave_a_crawled_index_unchanged(site_port: int, tmp_path: Path) -> None:
    """After a crawl: ``parse`` and ``shell`` of the mirror's copy of a stored page show the page flagged as its
    near-duplicate (and a ``shell`` after another has its response), ``fetch`` and ``check`` pass, a ``parse`` while
    a crawl holds the index's lock reads it all the same, and the index's files are what the crawl left, byte for
    byte."""
    crawled = project(tmp_path, "crawled", site_port)
    crawl = scrapy_crawl("site", tmp_path, cwd=crawled, args={"start_urls": start_urls(site_port)},
                         settings={"SIMHASH_BACKEND": ""})  # fmt: skip
    before = snapshot(index_dir(crawled))

    mirror = parse(crawled, site_port, page(site_port, MIRROR), stats=tmp_path / "mirror.json")
    assert mirror.returncode == 0, mirror.stderr[-3000:]
    assert f"'url': 'http://{MIRROR}:{site_port}/news/rainwater'" in mirror.stdout
    stats = json.loads((tmp_path / "mirror.json").read_text())
    assert stats["simhash/flagged"] == 1 and stats["simhash/dropped"] == 0
    assert stats["simhash/index_size"] == crawl.stats["simhash/index_size"] > 0

    code = "(response.status, response.meta['simhash']['duplicate_of'])"
    for url in (page(site_port), page(site_port, MIRROR)):  # the shell's spider's own index: the first stored nothing
        shell = scrapy(crawled, "shell", url, "-c", code)
        assert shell.returncode == 0 and shell.stdout.strip() == "(200, None)", shell.stderr[-3000:]
    shell = scrapy(crawled, "shell", page(site_port, MIRROR), "-c", code, "-s", f"SIMHASH_BACKEND={index_dir(crawled)}")
    assert shell.returncode == 0, shell.stderr[-3000:]
    # the crawl stored the page, its counter variant and its copy (a dropped near-duplicate is stored too): the copy is
    # a near-duplicate of each; which one the index names is the crawl order's (ties go to the earlier page)
    group = (page(site_port), page(site_port) + "?sid=9f3a7c21", page(site_port, MIRROR))
    assert shell.stdout.strip() in {repr((200, url)) for url in group}
    fetched = scrapy(crawled, "fetch", page(site_port, MIRROR))
    assert fetched.returncode == 0 and "Collecting rainwater" in fetched.stdout
    checked = check(crawled, site_port)
    assert checked.returncode == 0 and "Ran 2 contracts" in checked.stderr, checked.stderr[-3000:]

    fd = os.open(index_dir(crawled) / "LOCK", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running crawl holds it
        locked = parse(crawled, site_port, page(site_port, MIRROR))
    finally:
        os.close(fd)
    assert locked.returncode == 0, locked.stderr[-3000:]
    assert "IndexLockedError" not in locked.stderr and "cannot start" not in locked.stderr
    assert f"'url': 'http://{MIRROR}:{site_port}/news/rainwater'" in locked.stdout
    assert snapshot(index_dir(crawled)) == before


def test_simhash_inspect_crawl_restores_the_crawl_behaviour(site_port: int, tmp_path: Path) -> None:
    """``-s SIMHASH_INSPECT=crawl``: ``scrapy parse`` writes the index as a crawl does (the behaviour before); and
    ``skip`` checks nothing, said in one line."""
    inspected = project(tmp_path, "inspected", site_port)
    skipped = scrapy(inspected, "parse", "--spider", "site", "-a", f"start_urls={start_urls(site_port)}",
                     "-s", "SIMHASH_INSPECT=skip", page(site_port))  # fmt: skip
    assert skipped.returncode == 0
    assert "simhash: scrapy parse: the index is neither read nor written; responses are not checked" in skipped.stderr
    assert not index_dir(inspected).exists()
    written = scrapy(inspected, "parse", "--spider", "site", "-a", f"start_urls={start_urls(site_port)}",
                     "-s", "SIMHASH_INSPECT=crawl", page(site_port))  # fmt: skip
    assert written.returncode == 0 and (index_dir(inspected) / "CURRENT").is_file()


# --- in-process: the parts ------------------------------------------------------------------------------------


def test_no_command_outside_scrapy_cmdline() -> None:
    """A test (or a script) is not run by ``scrapy.cmdline.execute``: no command, so not an inspection."""
    from scrapy.settings import Settings

    assert running_command() is None
    assert inspection(Settings({"SIMHASH_INSPECT": "auto"})) is None
    assert inspection(Settings({"SIMHASH_INSPECT": "read"})).mode == "read"  # type: ignore[union-attr]
    assert {"bench", "check", "fetch", "parse", "shell", "view"} == INSPECTION_COMMANDS


def test_command_found_on_the_stack() -> None:
    """``execute``'s ``cmd`` names the command by its class: Scrapy's, or a project's subclass of it."""
    from scrapy.commands.parse import Command as Parse
    from scrapy.commands.view import Command as View

    class ProjectParse(Parse):
        pass

    def execute(cmd: object) -> str | None:  # the name and local of scrapy.cmdline.execute
        assert cmd is not None
        return running_command()

    assert execute(ProjectParse()) == "parse"
    assert execute(View()) == "view"


def test_bad_simhash_inspect_names_the_setting() -> None:
    from scrapy.settings import Settings

    with pytest.raises(ValueError, match="SIMHASH_INSPECT must be one of 'auto', 'read', 'skip', 'crawl'"):
        inspection(Settings({"SIMHASH_INSPECT": "maybe"}))


def test_readonly_uri() -> None:
    assert readonly_uri("/data/index") == "file:///data/index?readonly=1"
    assert readonly_uri("file:///data/index?sync=always") == "file:///data/index?sync=always&readonly=1"
    assert readonly_uri("memory://") == "memory://"
    assert readonly_uri("redis://localhost:6379/0") is None


def _middleware(**settings: Any) -> Any:

    from simhash_filter import SimhashDownloaderMiddleware

    return SimhashDownloaderMiddleware.from_crawler(
        filter_crawler({"SIMHASH_PROCESSES": 0, **settings})
    )


def _respond(mw: Any, url: str, body: bytes) -> Any:
    import asyncio

    from scrapy import Request
    from scrapy.http import HtmlResponse

    request = Request(url)
    response = HtmlResponse(url, body=body, headers={"Content-Type": "text/html; charset=utf-8"}, request=request)
    asyncio.run(mw.process_response(request, response))
    return request.meta["simhash"]


def test_read_mode_flags_a_copy_and_writes_nothing_under_a_writers_lock(tmp_path: Path) -> None:
    """``SIMHASH_INSPECT = "read"`` against an on-disk index that another process holds open for writing: the copy
    of a stored page is flagged (not dropped), nothing is stored, and the index's files are left as they were."""
    from devsites import pages as p
    from simhash_filter import open_index
    from simhash_filter.config import DEFAULTS
    from simhash_filter.model.fingerprint import fingerprint

    article = p.gazette(p.RAINWATER).encode("utf-8")
    writer = open_index(DEFAULTS, str(tmp_path / "index"))  # holds the lock, as a running crawl does
    try:
        fp = fingerprint(article)
        assert fp.value is not None
        writer.check_and_add(fp.value, "http://a.test/rain", fp.sketch)
        before = snapshot(tmp_path / "index")
        mw = _middleware(SIMHASH_INSPECT="read", SIMHASH_BACKEND=str(tmp_path / "index"))
        assert mw.filter.options.action == "flag" and mw.filter.options.readonly
        meta = _respond(mw, "http://b.test/copy", p.ledger(p.RAINWATER).encode("utf-8"))
        assert meta["duplicate_of"] == "http://a.test/rain"
        assert _respond(mw, "http://c.test/other", p.gazette(p.LIGHTHOUSE).encode("utf-8"))["duplicate_of"] is None
        stats = mw.filter.stats.get_stats()
        assert (
            stats["simhash/flagged"] == 1 and stats.get("simhash/dropped", 0) == 0 and stats["simhash/index_size"] == 1
        )
        assert len(mw.filter.index) == 1
        mw.filter.spider_closed(spider=None, reason="finished")
        assert snapshot(tmp_path / "index") == before
    finally:
        writer.close()


def test_read_mode_creates_no_index(tmp_path: Path) -> None:
    """A missing on-disk index is not created: the pages are checked against an empty one."""
    mw = _middleware(SIMHASH_INSPECT="read", SIMHASH_BACKEND=str(tmp_path / "none"))
    assert mw.filter.options.backend == "memory://" and not (tmp_path / "none").exists()


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"SIMHASH_INSPECT": "skip"}, ""),
        ({"SIMHASH_INSPECT": "read", "SIMHASH_BACKEND": "redis://127.0.0.1:1/0"},
         " (a redis:// index cannot be opened read-only)"),
    ],
)  # fmt: skip
def test_an_inspection_that_checks_nothing_says_so_once(
    settings: dict[str, str], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The components step aside (a silent ``NotConfigured``), and one INFO line says why: no Redis is called."""
    from scrapy.exceptions import NotConfigured

    from simhash_filter import SimhashDownloaderMiddleware, SimhashPipeline

    with caplog.at_level("INFO", logger="simhash_filter"):
        crawler = filter_crawler(settings)
        for component in (SimhashDownloaderMiddleware, SimhashPipeline):
            with pytest.raises(NotConfigured) as raised:
                component.from_crawler(crawler)
            assert raised.value.args == ()
    lines = [r.getMessage() for r in caplog.records if "responses are not checked" in r.getMessage()]
    expected = "simhash: SIMHASH_INSPECT={mode!r}: the index is neither read nor written; responses are not checked"
    assert lines == [expected.format(mode=settings["SIMHASH_INSPECT"]) + why]


def test_a_read_only_check_of_a_redis_index_leaves_its_size_as_it_was(redis_server, redis_prefix: str) -> None:
    """A read-only filter (an inspection's) over a Redis index, whose size the stats follow by the pages each check
    stores: a kept page and a near-duplicate checked, nothing stored, ``simhash/index_size`` as the index was."""
    import asyncio

    from scrapy import Request, Spider
    from scrapy.http import HtmlResponse
    from scrapy.utils.test import get_crawler

    from devsites import pages as p
    from simhash_filter.crawl.crawlfilter import CrawlFilter
    from simhash_filter.crawl.settings import FilterOptions

    uri = f"{redis_server.url}?prefix={redis_prefix}"
    crawler = get_crawler(Spider, settings_dict={"SIMHASH_BACKEND": uri, "SIMHASH_PROCESSES": 0})
    options = FilterOptions.from_settings(crawler.settings)
    writer = CrawlFilter(options, crawler.stats)
    reader = CrawlFilter(options.read_only(options.backend), crawler.stats)

    def check(crawl_filter: CrawlFilter, url: str, html: str) -> Any:
        response = HtmlResponse(url, body=html.encode(), headers={"Content-Type": "text/html; charset=utf-8"})
        return asyncio.run(crawl_filter.check_response(Request(url), response))

    try:
        assert not check(writer, "http://a.example/rain", p.gazette(p.RAINWATER)).near_duplicate
        crawler.stats.set_value("simhash/index_size", len(writer.index))
        kept = check(reader, "http://b.example/lighthouse", p.gazette(p.LIGHTHOUSE))
        copy = check(reader, "http://b.example/rain", p.ledger(p.RAINWATER))
        assert not kept.near_duplicate and copy.duplicate_of == "http://a.example/rain"
        assert crawler.stats.get_value("simhash/index_size") == len(reader.index) == 1
    finally:
        writer.spider_closed(None, "finished")
        reader.spider_closed(None, "finished")
