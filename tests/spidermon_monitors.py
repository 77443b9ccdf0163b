"""A Spidermon close monitor of the filter's stats, as docs/usage.md shows it, which also writes what it read to
``MONITOR_JSON`` (tests/test_monitors.py compares it with the stats at the end of the crawl)."""

from __future__ import annotations

import json
from typing import ClassVar

from spidermon import Monitor, MonitorSuite, monitors


@monitors.name("simhash")
class SimhashMonitor(Monitor):
    @monitors.name("the index answered every check")
    def test_index_answered(self) -> None:
        stats = self.data.stats
        self.assertEqual(stats["simhash/skipped/index_error"] + stats["simhash/index_full"], 0)

    @monitors.name("pages were checked")
    def test_checked(self) -> None:
        self.assertGreater(self.data.stats["simhash/checked"], 0)

    @monitors.name("the index holds every page kept")
    def test_index_size(self) -> None:
        stats = self.data.stats
        self.assertGreaterEqual(stats["simhash/index_size"], stats["simhash/kept"])

    @monitors.name("what the monitor read")
    def test_record(self) -> None:
        stats = self.data.stats
        seen = {key: stats[key] for key in ("simhash/index_size", "simhash/kept", "simhash/checked")}
        with open(self.data.crawler.settings["MONITOR_JSON"], "w", encoding="utf-8") as f:
            json.dump(seen, f)


class SpiderCloseMonitorSuite(MonitorSuite):
    monitors: ClassVar[list[type[Monitor]]] = [SimhashMonitor]
