"""Tests of the add-on, the SIMHASH_* defaults and their documentation."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy import Spider
from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
from scrapy.core.spidermw import SpiderMiddlewareManager
from scrapy.pipelines import ItemPipelineManager
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.test import get_crawler

from simhash_filter import DEFAULTS, SimhashAddon, SimhashDownloaderMiddleware, SimhashPipeline, SimhashSpiderMiddleware
from simhash_filter.crawl import settings as simhash_settings

ADDONS = {"ADDONS": {"simhash_filter.SimhashAddon": 0}}
ROOT = Path(__file__).resolve().parent.parent
#: Where the SIMHASH_* settings are listed with their defaults: the README's short table and the full reference.
DOCS = (ROOT / "README.md", ROOT / "docs" / "settings.md")


def components(crawler, name: str) -> dict:
    return {k: v for k, v in crawler.settings.getdict(name).items() if "simhash" in str(k).lower()}


def test_addon_enables_the_three_components():
    """One ADDONS line adds the downloader middleware, the spider middleware and the pipeline."""
    crawler = get_crawler(Spider, settings_dict=ADDONS)
    assert components(crawler, "DOWNLOADER_MIDDLEWARES") == {SimhashDownloaderMiddleware: 540}
    assert components(crawler, "SPIDER_MIDDLEWARES") == {SimhashSpiderMiddleware: 40}
    assert components(crawler, "ITEM_PIPELINES") == {SimhashPipeline: 100}
    assert any(isinstance(a, SimhashAddon) for a in crawler.addons.addons)


def test_component_managers_build_without_deprecation_warnings():
    """Scrapy's managers load the components with no warning (pytest turns warnings into errors)."""
    crawler = get_crawler(Spider, settings_dict=ADDONS)
    managers = [
        DownloaderMiddlewareManager.from_crawler(crawler),
        SpiderMiddlewareManager.from_crawler(crawler),
        ItemPipelineManager.from_crawler(crawler),
    ]
    found = [type(mw) for m in managers for mw in m.middlewares]
    assert {SimhashDownloaderMiddleware, SimhashSpiderMiddleware, SimhashPipeline} <= set(found)


def test_addon_sets_defaults_at_addon_priority():
    """Every SIMHASH_* default is set at add-on priority; the project's own values win."""
    crawler = get_crawler(Spider, settings_dict={**ADDONS, "SIMHASH_ACTION": "flag"})
    s = crawler.settings
    assert s["SIMHASH_ACTION"] == "flag" and s.getpriority("SIMHASH_ACTION") == SETTINGS_PRIORITIES["project"]
    assert s.getint("SIMHASH_MAX_DISTANCE") == DEFAULTS.max_distance
    assert s.getpriority("SIMHASH_MAX_DISTANCE") == SETTINGS_PRIORITIES["addon"]
    for name in simhash_settings.default_settings():
        assert name in s


def test_project_can_move_or_disable_a_component():
    """A project that lists a component keeps its own priority for it (None disables it)."""
    crawler = get_crawler(
        Spider,
        settings_dict={
            **ADDONS,
            "DOWNLOADER_MIDDLEWARES": {"simhash_filter.SimhashDownloaderMiddleware": 520},
            "ITEM_PIPELINES": {"simhash_filter.SimhashPipeline": None},
        },
    )
    assert components(crawler, "DOWNLOADER_MIDDLEWARES") == {"simhash_filter.SimhashDownloaderMiddleware": 520}
    assert components(crawler, "ITEM_PIPELINES") == {"simhash_filter.SimhashPipeline": None}


def test_disabled_filter_adds_nothing():
    """With SIMHASH_ENABLED=False the add-on adds no component and is not listed as enabled."""
    crawler = get_crawler(Spider, settings_dict={**ADDONS, "SIMHASH_ENABLED": False})
    for name in ("DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES", "ITEM_PIPELINES"):
        assert components(crawler, name) == {}
    assert not crawler.addons.addons


def test_defaults_come_from_the_core_config():
    """The SIMHASH_* defaults are the core's DEFAULTS (one source for the CLI and the crawler)."""
    d = simhash_settings.default_settings()
    assert d["SIMHASH_MAX_DISTANCE"] == DEFAULTS.max_distance
    assert d["SIMHASH_DOM_DECAY"] == DEFAULTS.fingerprint.dom_decay
    assert d["SIMHASH_STRUCTURE_WEIGHT"] == DEFAULTS.fingerprint.structure_weight
    assert d["SIMHASH_ENABLED"] is True and d["SIMHASH_ACTION"] == "drop" and d["SIMHASH_BACKEND"] == ""
    d["SIMHASH_ITEM_FIELDS"].append("x")
    assert simhash_settings.SIMHASH_ITEM_FIELDS == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_setting_documented_with_its_default(doc: Path):
    """The README and docs/settings.md list every SIMHASH_* setting with its current default, the enabling
    flag first, the rest in alphabetical order."""
    text = doc.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(SIMHASH_\w+)` \| `([^`]*)` \|", text, re.MULTILINE)
    documented = {name: ast.literal_eval(value) for name, value in rows}
    assert len(rows) == len(documented), f"{doc.name} lists a setting twice"
    assert documented == simhash_settings.default_settings()
    assert rows[0][0] == "SIMHASH_ENABLED"
    assert [n for n, _ in rows[1:]] == sorted(n for n, _ in rows[1:])


def test_importing_the_package_does_not_import_scrapy():
    """The core stays free of Scrapy: importing simhash_filter (and its settings) does not import it."""
    code = "import sys, simhash_filter, simhash_filter.crawl.settings; assert 'scrapy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
