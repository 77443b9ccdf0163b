"""The default on-disk index is one per project and spider (``.scrapy/simhash/<project>/<spider>``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from crawl_helpers import Crawl, scrapy_crawl, start_urls
from scrapy.settings import Settings

from devsites.site_server import GROUPS
from simhash_filter.crawl.indexpath import project_name
from simhash_filter.crawl.settings import backend_uri

ROOT = Path(".scrapy", "simhash")  # tests run in their own directory, outside any project (conftest.py)


@pytest.fixture(autouse=True)
def _no_scrapyd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCRAPY_PROJECT", raising=False)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)


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
