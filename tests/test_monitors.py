"""A Spidermon close monitor (tests/spidermon_monitors.py: docs/usage.md's, which also records what it read) reads
the filter's stats: every ``simhash/...`` key is there (0 on a recrawl that keeps nothing) and ``simhash/index_size``
is the index's size at the end, although Spidermon's ``spider_closed`` handler runs before the filter's own."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from crawl_helpers import scrapy_crawl, start_urls

pytestmark = pytest.mark.slow

if not os.environ.get("CI"):  # in the test extra: under CI a missing Spidermon fails the test
    pytest.importorskip("spidermon")


def monitored_crawl(port: int, tmp_path: Path, name: str, index: Path) -> tuple[dict[str, int], dict[str, object], str]:
    """A crawl of the test site with Spidermon's close monitors: what the monitor read, the final stats, the log."""
    run = tmp_path / name
    run.mkdir()
    extensions = {"crawl_helpers.StatsToJson": 0, "spidermon.contrib.scrapy.extensions.Spidermon": 500}
    crawl = scrapy_crawl(
        "site",
        run,
        args={"start_urls": start_urls(port)},
        settings={
            "SIMHASH_BACKEND": str(index),
            "SPIDERMON_ENABLED": "True",
            "EXTENSIONS": json.dumps(extensions),
            "SPIDERMON_SPIDER_CLOSE_MONITORS": "spidermon_monitors.SpiderCloseMonitorSuite",
            "MONITOR_JSON": str(run / "monitor.json"),
        },
    )
    return json.loads((run / "monitor.json").read_text(encoding="utf-8")), crawl.stats, crawl.log


def test_spidermon_close_monitor_reads_the_final_stats(site_port: int, tmp_path: Path) -> None:
    index = tmp_path / "index"
    seen, stats, log = monitored_crawl(site_port, tmp_path, "first", index)
    assert seen["simhash/index_size"] == stats["simhash/index_size"] >= seen["simhash/kept"] > 0
    assert "[Spidermon] 4 monitors in" in log and "[Spidermon] FAILED" not in log

    seen, stats, log = monitored_crawl(site_port, tmp_path, "again", index)  # a recrawl: nothing new is kept
    assert seen["simhash/kept"] == 0 and seen["simhash/checked"] > 0
    assert seen["simhash/index_size"] == stats["simhash/index_size"]
    assert "[Spidermon] 4 monitors in" in log and "[Spidermon] FAILED" not in log
