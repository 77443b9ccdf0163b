"""The filter in someone else's project: ``scrapy startproject``, the lines from the README, a crawl."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from crawl_helpers import ROOT, env, local_site, scrapy_crawl

from devsites.site_server import GROUPS, SKIPPED

DOCS = ROOT / "README.md"

SPIDER = '''
import scrapy
from scrapy.http import HtmlResponse


class PagesSpider(scrapy.Spider):
    """A plain spider that yields dict items and follows every link."""

    name = "pages"

    def __init__(self, port, also="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [f"http://127.0.0.1:{port}/", f"http://127.0.0.2:{port}/"]
        self.start_urls += [f"http://127.0.0.1:{port}{path}" for path in also.split(",") if path]

    def parse(self, response):
        if isinstance(response, HtmlResponse):
            yield {"url": response.url, "title": response.css("title::text").get()}
            yield from response.follow_all(css="a")
'''


def documented_lines() -> str:
    """The first Python block of the docs' "Plug the filter into any Scrapy project" section."""
    section = DOCS.read_text(encoding="utf-8").split("### Plug the filter into any Scrapy project", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def new_project(tmp_path: Path) -> Path:
    """``scrapy startproject newsbot`` with the documented lines and the plain spider ``pages``."""
    lines = documented_lines()
    assert lines.strip() == 'ADDONS = {"simhash_filter.SimhashAddon": 0}'
    subprocess.run(
        [sys.executable, "-m", "scrapy.cmdline", "startproject", "newsbot", str(tmp_path / "newsbot")],
        check=True,
        capture_output=True,
        env=env(),
    )
    project = tmp_path / "newsbot"
    settings = project / "newsbot" / "settings.py"
    settings.write_text(settings.read_text(encoding="utf-8") + "\n" + lines, encoding="utf-8")
    (project / "newsbot" / "spiders" / "pages.py").write_text(SPIDER, encoding="utf-8")
    return project


@pytest.mark.slow
def test_documented_lines_enable_the_filter_in_a_new_project(tmp_path: Path):
    """A fresh `scrapy startproject` plus the documented settings lines drops near-duplicates of any spider."""
    project = new_project(tmp_path)
    with local_site() as port:
        crawl = scrapy_crawl(
            "pages",
            tmp_path,
            cwd=project,
            args={"port": str(port)},
            settings={"DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": 8},
        )
    stored = crawl.by_key()
    groups = {**GROUPS, "lighthouse": [*GROUPS["lighthouse"], *SKIPPED["index_error"]]}  # a copy, here
    for group, keys in groups.items():
        assert len([k for k in keys if k in stored]) == 1, group
    assert all(re.fullmatch(r"[0-9a-f]{16}", i["fingerprint"]) for i in crawl.items if "fingerprint" in i)
    assert crawl.stats["simhash/dropped"] >= sum(len(keys) - 1 for keys in GROUPS.values())
    assert "simhash_filter.crawl.addon.SimhashAddon" in crawl.log and "simhash: " in crawl.log
    assert "Deprecat" not in crawl.log


@pytest.mark.slow
def test_a_page_fetched_twice_in_one_crawl_is_not_unchanged_since_an_earlier_one(tmp_path: Path):
    """A start URL (``dont_filter``, Scrapy's default) that a page links to again is fetched twice: the second
    fetch is counted in ``simhash/refetched``, not as unchanged since an earlier crawl (there was none)."""
    project = new_project(tmp_path)
    with local_site() as port:
        crawl = scrapy_crawl(
            "pages",
            tmp_path,
            cwd=project,
            args={"port": str(port), "also": "/news/lighthouse"},  # also linked from the start page
            settings={"DOWNLOAD_DELAY": 0},
        )
    assert crawl.stats.get("simhash/unchanged", 0) == 0
    assert crawl.stats["simhash/refetched"] >= 1
    assert "unchanged since an earlier crawl" not in crawl.log
    assert f"{crawl.stats['simhash/refetched']} fetched again in this crawl" in crawl.log
