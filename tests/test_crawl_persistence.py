"""Real crawls with the default on-disk index: a second ``scrapy crawl site`` remembers the first, and a
crawl stopped and resumed with ``JOBDIR`` stores no near-duplicate twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from crawl_helpers import scrapy_crawl, start_urls

from devsites.site_server import GROUPS

pytestmark = pytest.mark.slow


def run_dir(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def test_second_crawl_remembers_the_first(site_port: int, tmp_path: Path) -> None:
    """With no SIMHASH_BACKEND the index lives in the project's .scrapy/simhash/<project>/<spider>: the second crawl
    stores none of the pages the first stored, yet follows their links (they reach the spider unchanged)."""
    project = run_dir(tmp_path, "project")
    (project / "scrapy.cfg").write_text("[settings]\ndefault = crawler.settings\n", encoding="utf-8")
    common = {"cwd": project, "args": {"start_urls": start_urls(site_port)}, "settings": {"SIMHASH_BACKEND": ""}}
    first = scrapy_crawl("site", run_dir(tmp_path, "first"), **common)
    second = scrapy_crawl("site", run_dir(tmp_path, "second"), **common)

    assert (project / ".scrapy" / "simhash" / "simhash-crawler" / "site" / "CURRENT").is_file()
    stored_first, stored_second = first.by_key(), second.by_key()
    for group, keys in GROUPS.items():
        assert len([k for k in keys if k in stored_first]) == 1, group
        assert not [k for k in keys if k in stored_second], group
    assert first.stats["simhash/kept"] >= len(GROUPS) + 2
    assert second.stats.get("simhash/kept", 0) == 0
    # Every checked page was stored.  A page is "unchanged" when its most similar stored page is its own earlier
    # version: every page kept by the first crawl, and the near-duplicates that are closer to their own earlier
    # version than to the page they duplicated (they are let through now: their links are followed).
    assert first.stats["simhash/kept"] <= second.stats["simhash/unchanged"] <= first.stats["simhash/checked"]
    assert second.stats["simhash/index_size"] == first.stats["simhash/index_size"]  # nothing stored twice
    assert second.stats["response_received_count"] >= first.stats["response_received_count"]
    index = project / ".scrapy" / "simhash" / "simhash-crawler" / "site"
    assert f"simhash: the index at {index} holds no pages yet" in first.log
    size = first.stats["simhash/index_size"]
    assert f"simhash: the index at {index} holds {size} pages from earlier crawls" in second.log
    assert "(to start empty: delete it or set SIMHASH_BACKEND)" in second.log
    unchanged = second.stats["simhash/unchanged"]
    assert f", {unchanged} unchanged since an earlier crawl (their items dropped)" in second.log


def test_jobdir_stop_and_resume_stores_no_near_duplicate_twice(site_port: int, tmp_path: Path) -> None:
    """A crawl stopped after a few pages and resumed with the same JOBDIR keeps its index in JOBDIR/simhash;
    across both runs each group of near-duplicates is stored once and no page twice."""
    jobdir = tmp_path / "job"
    settings = {"SIMHASH_BACKEND": "", "JOBDIR": str(jobdir), "CONCURRENT_REQUESTS": 1}
    args = {"start_urls": start_urls(site_port)}
    first = scrapy_crawl(
        "site", run_dir(tmp_path, "first"), args=args, settings={**settings, "CLOSESPIDER_PAGECOUNT": 8}
    )
    assert first.stats["finish_reason"] == "closespider_pagecount"
    second = scrapy_crawl("site", run_dir(tmp_path, "second"), args=args, settings=settings)

    assert (jobdir / "simhash" / "CURRENT").is_file()
    stored_first, stored_second = first.by_key(), second.by_key()
    assert stored_first and stored_second
    assert not set(stored_first) & set(stored_second)
    stored = {**stored_first, **stored_second}
    per_group = {group: len([k for k in keys if k in stored]) for group, keys in GROUPS.items()}
    assert max(per_group.values()) == 1
    # a request in flight when the first run stopped is not resumed (Scrapy's JOBDIR): one group may be missed
    assert sum(per_group.values()) >= len(GROUPS) - 1
