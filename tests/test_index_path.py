"""The default on-disk index is one per project and spider (``.scrapy/simhash/<project>/<spider>``), and an index
left at the old path (``.scrapy/simhash/<spider>``) is moved there once, under its own lock."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from crawl_helpers import Crawl, scrapy_crawl, start_urls
from scrapy.settings import Settings

from devsites import pages as p
from devsites.site_server import GROUPS
from simhash_filter import DEFAULTS, fingerprint, open_index
from simhash_filter.crawl.indexpath import default_index_path, project_name
from simhash_filter.crawl.options import backend_uri

ROOT = Path(".scrapy", "simhash")  # tests run in their own directory, outside any project (conftest.py)


@pytest.fixture(autouse=True)
def _no_scrapyd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCRAPY_PROJECT", raising=False)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)


def make_index(path: Path, url: str = "https://a.example/rain") -> None:
    """An on-disk index holding one page, closed again: what an earlier crawl leaves."""
    fp = fingerprint(p.gazette(p.RAINWATER))
    with open_index(DEFAULTS, str(path)) as index:
        index.check_and_add(fp.value, url, fp.sketch)


def holds(path: Path) -> list[str]:
    with open_index(DEFAULTS, f"file://{path.resolve()}?readonly=1") as index:
        return [entry.key for entry in index.backend.entries()]


def test_the_project_is_scrapyds_else_bot_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scrapyd's SCRAPY_PROJECT names the project; Scrapy's own ``default`` (or none) leaves it to BOT_NAME."""
    assert project_name(Settings({"BOT_NAME": "shop"})) == "shop"
    assert project_name(Settings({"BOT_NAME": "../my bot"})) == ".._my_bot"
    monkeypatch.setenv("SCRAPY_PROJECT", "default")
    assert project_name(Settings({"BOT_NAME": "shop"})) == "shop"
    monkeypatch.setenv("SCRAPY_PROJECT", "shop-staging")
    assert project_name(Settings({"BOT_NAME": "shop"})) == "shop-staging"


def test_two_projects_get_two_indexes_and_jobdir_its_own() -> None:
    """Same spider name, two projects: two paths; JOBDIR keeps the job's index in it, project or not."""
    one = backend_uri(Settings({"BOT_NAME": "one"}), "site")
    two = backend_uri(Settings({"BOT_NAME": "two"}), "site")
    assert (one, two) == (str(ROOT / "one" / "site"), str(ROOT / "two" / "site"))
    assert backend_uri(Settings({"BOT_NAME": "one", "JOBDIR": "job"}), "site") == str(Path("job", "simhash"))


def test_an_index_at_the_old_path_is_moved(caplog: pytest.LogCaptureFixture) -> None:
    """The old ``.scrapy/simhash/<spider>`` moves to ``<project>/<spider>`` with one INFO line, whole."""
    make_index(ROOT / "site")
    with caplog.at_level(logging.INFO, logger="simhash_filter.crawl.indexpath"):
        path = default_index_path(Settings({"BOT_NAME": "shop"}), "site")
    assert path == ROOT / "shop" / "site"
    assert not (ROOT / "site").exists()
    assert holds(path) == ["https://a.example/rain"]
    moved = [r for r in caplog.records if "moved the index" in r.getMessage()]
    assert len(moved) == 1 and moved[0].levelno == logging.INFO
    assert default_index_path(Settings({"BOT_NAME": "other"}), "site") == ROOT / "other" / "site"  # taken once


def test_a_spider_named_like_its_project_moves_into_its_own_directory() -> None:
    """``.scrapy/simhash/shop`` (spider ``shop``) is where project ``shop``'s directory goes: it moves inside,
    and the project's other spiders' indexes go beside it, never inside an index."""
    make_index(ROOT / "shop")
    assert default_index_path(Settings({"BOT_NAME": "shop"}), "products") == ROOT / "shop" / "products"
    assert holds(ROOT / "shop" / "shop") == ["https://a.example/rain"]
    assert not (ROOT / "shop" / "CURRENT").exists()
    assert default_index_path(Settings({"BOT_NAME": "shop"}), "shop") == ROOT / "shop" / "shop"
    assert [q.name for q in ROOT.iterdir()] == ["shop"]


def test_an_old_index_in_use_is_not_moved() -> None:
    """An old index another crawl has open (its lock held) stays where it is, and this crawl is pointed at it
    (its open then fails as any second writer's does)."""
    make_index(ROOT / "site")
    with open_index(DEFAULTS, str(ROOT / "site")):  # holds the writer's lock
        assert default_index_path(Settings({"BOT_NAME": "shop"}), "site") == ROOT / "site"
    assert default_index_path(Settings({"BOT_NAME": "shop"}), "site") == ROOT / "shop" / "site"


def test_an_index_at_the_new_path_wins(caplog: pytest.LogCaptureFixture) -> None:
    """With both, the new one is used and the old one left alone, with a warning."""
    make_index(ROOT / "site", "https://old.example/")
    make_index(ROOT / "shop" / "site", "https://new.example/")
    with caplog.at_level(logging.WARNING, logger="simhash_filter.crawl.indexpath"):
        assert default_index_path(Settings({"BOT_NAME": "shop"}), "site") == ROOT / "shop" / "site"
    assert holds(ROOT / "site") == ["https://old.example/"]
    assert "an index of an earlier version is left at" in caplog.text


# --- real crawls of the local test site --------------------------------------------------------------------


def _scrapyd_crawl(site_port: int, tmp_path: Path, cwd: Path, name: str, **settings: str) -> Crawl:
    """``scrapy crawl site`` as Scrapyd runs it: the settings module named, no scrapy.cfg, ``.scrapy`` in ``cwd``."""
    run = tmp_path / name
    run.mkdir()
    return scrapy_crawl(
        "site",
        run,
        cwd=cwd,
        args={"start_urls": start_urls(site_port)},
        settings={"SIMHASH_BACKEND": "", **settings},
        extra_env={"SCRAPY_SETTINGS_MODULE": "crawler.settings"},
    )


@pytest.mark.slow
def test_two_projects_with_a_spider_of_the_same_name_keep_two_indexes(site_port: int, tmp_path: Path) -> None:
    """Two projects (BOT_NAME) crawl one site from one working directory, as under Scrapyd: the second starts
    from an empty index of its own and keeps the pages the first kept too."""
    cwd = tmp_path / "scrapyd"
    cwd.mkdir()
    first = _scrapyd_crawl(site_port, tmp_path, cwd, "first", BOT_NAME="alpha")
    second = _scrapyd_crawl(site_port, tmp_path, cwd, "second", BOT_NAME="beta")

    for project, crawl in (("alpha", first), ("beta", second)):
        index = cwd / ".scrapy" / "simhash" / project / "site"
        assert (index / "CURRENT").is_file()
        assert f"simhash: the index at {index} holds no pages yet" in crawl.log
    assert second.stats["simhash/kept"] == first.stats["simhash/kept"] >= len(GROUPS)
    assert second.stats["simhash/unchanged"] == 0


@pytest.mark.slow
def test_an_index_at_the_old_path_is_moved_and_remembered(site_port: int, tmp_path: Path) -> None:
    """A crawl of an earlier version left its index at .scrapy/simhash/site: the next crawl moves it to
    .scrapy/simhash/<project>/site (one INFO line) and remembers its pages; it stores none again."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "scrapy.cfg").write_text("[settings]\ndefault = crawler.settings\n", encoding="utf-8")
    old, new = project / ".scrapy" / "simhash" / "site", project / ".scrapy" / "simhash" / "simhash-crawler" / "site"
    common = {"cwd": project, "args": {"start_urls": start_urls(site_port)}}
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = scrapy_crawl("site", tmp_path / "first", settings={"SIMHASH_BACKEND": str(old)}, **common)
    second = scrapy_crawl("site", tmp_path / "second", settings={"SIMHASH_BACKEND": ""}, **common)

    assert not old.exists() and (new / "CURRENT").is_file()
    assert f"simhash: moved the index at {old} to {new}" in second.log
    size = first.stats["simhash/index_size"]
    assert f"simhash: the index at {new} holds {size} pages from earlier crawls" in second.log
    assert second.stats.get("simhash/kept", 0) == 0
    assert second.stats["simhash/index_size"] == size
