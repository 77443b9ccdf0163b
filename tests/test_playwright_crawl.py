"""A real crawl through scrapy-playwright and Debian's chromium: the pages of dropped near-duplicates are
closed by the filter, so a crawl with ``PLAYWRIGHT_MAX_PAGES_PER_CONTEXT = 4`` and ten copies of a page ends by
itself (without it, it stops fetching after the fourth dropped copy and never ends).

Skipped when scrapy-playwright is not installed (it is in the ``test`` extra), or with ``SIMHASH_NO_BROWSER=1``;
a missing ``/usr/bin/chromium`` skips it too, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import CHROMIUM
from crawl_helpers import TESTS, env

from devsites import pages as p
from devsites.localsite import LocalSite, Page

pytest.importorskip("scrapy_playwright")

pytestmark = pytest.mark.slow

#: A hang guard only: the crawl takes a few seconds; one that stalls is killed after this and fails.
CRAWL_TIMEOUT = 120
COPIES = 10
DISTINCT = {"/lighthouse": p.LIGHTHOUSE, "/backups": p.BACKUPS, "/library": p.LIBRARY, "/tea": p.TEA_GARDEN}


def _copy(i: int) -> Page:
    """The rainwater article again, with its own view counter and session id: a near-duplicate of the others."""
    counter = p.Counter(views=18_000 + i, timestamp=f"2024-05-14 08:{i:02d}:07", session=f"{i:016x}")
    return Page(p.gazette(p.RAINWATER, counter=counter).encode("utf-8"))


def _site() -> dict[str, Page]:
    """A front page linking to ten copies of one article and to four distinct articles."""
    links = [f"/copy/{i}" for i in range(COPIES)] + list(DISTINCT)
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    site = {"/": Page(f"<!DOCTYPE html><html><body><ul>{anchors}</ul></body></html>".encode())}
    site.update({f"/copy/{i}": _copy(i) for i in range(COPIES)})
    site.update({path: Page(p.gazette(article).encode("utf-8")) for path, article in DISTINCT.items()})
    return site


@pytest.fixture
def chromium_at_hand() -> None:
    """Skip (SIMHASH_NO_BROWSER=1, or no chromium outside CI) or fail (no chromium under CI), as browser.py does."""
    if os.environ.get("SIMHASH_NO_BROWSER") == "1":
        pytest.skip("SIMHASH_NO_BROWSER=1: browser tests skipped")
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        message = (
            f"no executable {CHROMIUM}: the scrapy-playwright test needs Debian's chromium (apt-get install chromium)"
        )
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture
def site() -> Iterator[LocalSite]:
    with LocalSite(_site(), hosts=("127.0.0.1",)) as server:
        yield server


def _run(cmd: list[str], cwd: Path) -> tuple[int, str]:
    """Run the crawl in its own process group; kill the group (chromium too) when it outlives the hang guard."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=CRAWL_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the crawl did not end within {CRAWL_TIMEOUT} s (stalled):\n{out[-4000:]}", pytrace=False)
    return proc.returncode, out


@pytest.mark.usefixtures("chromium_at_hand")
def test_dropped_pages_are_closed_and_the_crawl_ends(site: LocalSite, tmp_path: Path) -> None:
    """Ten copies of a page, four pages per context, no errback: the crawl ends by itself with one item per
    original (one copy and the four distinct pages), the nine other copies dropped and their pages closed."""
    items, stats = tmp_path / "items.jsonl", tmp_path / "stats.json"
    cmd = [sys.executable, "-m", "scrapy.cmdline", "runspider", str(TESTS / "playwright_spider.py"),
           "-a", f"start_url={site.url('/')}", "-O", f"{items}:jsonlines", "-s", "LOG_LEVEL=INFO",
           "-s", "EXTENSIONS={\"crawl_helpers.StatsToJson\": 0}", "-s", f"STATS_JSON={stats}"]  # fmt: skip
    returncode, log = _run(cmd, tmp_path)

    assert returncode == 0, log[-4000:]
    crawled = json.loads(stats.read_text(encoding="utf-8"))
    assert crawled["finish_reason"] == "finished", log[-4000:]
    paths = sorted("/" + item["url"].split("/", 3)[3] for item in map(json.loads, items.read_text().splitlines()))
    copies = [path for path in paths if path.startswith("/copy/")]
    assert len(copies) == 1 and sorted(set(paths) - set(copies)) == sorted(DISTINCT), paths
    assert crawled["simhash/dropped"] == COPIES - 1
    assert crawled["simhash/pages_closed"] == COPIES - 1
    assert crawled["simhash/page_close_errors"] == 0
