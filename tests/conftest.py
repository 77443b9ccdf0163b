"""Small HTML fixture pages, written for these tests: news articles in English and Chinese in one
site template, a near-duplicate of each (one sentence changed, an ad block and a visit counter added),
and pages that cannot be fingerprinted."""

from __future__ import annotations

import html
import importlib.util
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
from browser import fixture_browser_page, fixture_chromium  # noqa: F401 - fixtures: browser_page, chromium
from conftest_redis import (  # noqa: F401 - fixtures
    own_redis_server,
    password_redis_server,
    redis_cluster,
    redis_prefix,
    redis_server,
)

GARDEN_TITLE = "Volunteers turn an empty car park into a community garden"
GARDEN = [
    "For nearly a decade the gravel lot behind the old post office on Mill Street sat empty, collecting "
    "puddles in winter and dust in summer. This spring a group of neighbours decided that it had waited "
    "long enough, and after three months of weekend work the site now holds forty raised beds, a tool "
    "shed built from salvaged timber and a small orchard of apple and plum trees.",
    "The project began with a notice pinned to the library board asking whether anyone wanted to grow "
    "vegetables but had no yard. More than ninety people replied within a fortnight. The town council "
    "agreed to lease the land for a symbolic sum on the condition that the gardeners carry their own "
    "insurance and keep the entrance open to the public during daylight hours.",
    "Building the beds proved harder than expected. The gravel had to be raked away by hand, and the "
    "soil underneath was compacted clay that held water like a bowl. A retired engineer among the "
    "volunteers designed a drainage channel along the northern fence, while pupils from the primary "
    "school painted the wooden labels that now mark each plot.",
    "Water is the next challenge. The garden collects rain from the shed roof into two large barrels, "
    "but during the dry weeks of July that supply ran out within days. The group is now asking the "
    "council for permission to connect a metered tap, and has started a fund to pay for it.",
    "Not everyone is convinced. A few residents of the flats opposite worry about noise on summer "
    "evenings and about rats drawn by compost heaps. The organisers have promised to keep the compost "
    "in closed bins and to lock the gate at dusk, and they plan a meeting in September to hear further "
    "concerns.",
    "For now the first harvest is coming in. Courgettes, beans and lettuce have been shared among the "
    "plot holders, and a surplus of tomatoes was handed to the food bank on Station Road. The organisers "
    "say that the real crop is the conversations between people who had lived on the same street for "
    "years without ever speaking.",
]
GARDEN_CHANGED = GARDEN[1].replace(
    "More than ninety people replied within a fortnight.", "More than a hundred people replied within a week."
)
assert GARDEN[1] != GARDEN_CHANGED

RAIL_TITLE = "Regional rail line to run later trains from October"
RAIL = [
    "Passengers on the valley line will be able to travel home after midnight from the first week of "
    "October, when the operator introduces two extra evening departures in each direction. The change "
    "follows a long campaign by shift workers at the hospital and by owners of restaurants in the "
    "harbour district, who said that the last train left before their staff finished work.",
    "The new timetable adds services at a quarter to eleven and at twenty past midnight. To make room "
    "for them, the engineering works that normally close the line overnight will move to Sunday "
    "mornings, when ridership is lowest. Replacement buses will run during those hours and are timed to "
    "meet the first ferry across the estuary.",
    "Ticket prices will not change, but the off-peak fare will now apply to every train after seven in "
    "the evening rather than after half past eight. The operator estimates that this will cost it about "
    "two percent of its annual revenue and hopes that higher ridership will make up the difference.",
    "Drivers and conductors have agreed to the later shifts after a negotiation that lasted most of the "
    "summer. Their union said that the deal includes a taxi home for any crew member whose shift ends "
    "after the last bus, and a review after six months to check that fatigue rules are respected.",
    "Commuters at the busiest stations welcomed the news but asked for more carriages on the morning "
    "trains, which are often so crowded that passengers are left on the platform. The operator replied "
    "that new rolling stock has been ordered and that deliveries should begin next year.",
    "The trial will run until the end of March. If at least three hundred people use the late trains on "
    "an average night, the service will become permanent and may be extended to weekends.",
]

LIBRARY_TITLE = "市图书馆延长夜间开放时间"
LIBRARY = [
    "从下个月起，市图书馆将把周一至周五的闭馆时间从晚上八点推迟到十点。馆方表示，这一调整主要是回应"
    "上班族和备考学生的呼声，他们常常在下班或放学后才有时间来馆阅读，却发现刚坐下不久就要离开。",
    "为了保证夜间开放的安全和服务质量，图书馆新招募了二十多名志愿者，并对自助借还设备进行了升级。"
    "读者在晚上八点以后仍然可以借阅和归还图书，但参考咨询和办证服务只在白天提供。",
    "馆长在接受采访时说，过去一年里自习区的座位几乎每天都被占满，有些读者甚至一早就在门口排队。"
    "延长开放时间之后，馆方还计划在三楼增设一个安静阅读区，并更换一批更舒适的桌椅和台灯。",
    "不少市民对这一消息表示欢迎。一位在附近医院工作的护士说，她值完白班之后终于可以来这里看看书，"
    "不用再担心赶不上闭馆。也有读者建议图书馆在周末同样延长开放，并增加儿童阅览室的活动场次。",
    "图书馆方面表示，新的开放时间将先试行半年，期间会统计每天的到馆人数和借阅数据，再决定是否长期"
    "实施。馆方同时提醒读者，夜间入馆需要刷读者证，并请大家保持安静，爱护公共设施。",
]
LIBRARY_CHANGED = LIBRARY[0].replace("晚上八点推迟到十点", "晚上八点推迟到十点半")
assert LIBRARY[0] != LIBRARY_CHANGED

TEA_TITLE = "山村茶农迎来春茶采摘季"
TEA = [
    "清明前后，位于县城西南的山村进入了一年中最忙碌的时节。天刚蒙蒙亮，茶农们就背着竹篓上山，"
    "沿着陡峭的石阶一路采摘新发的嫩芽。今年春天雨水充足，气温回升平稳，茶叶的长势明显好于往年。",
    "村里的合作社去年引进了新的杀青和揉捻设备，鲜叶采回来之后可以当天加工完毕，茶叶的香气和色泽"
    "都更加稳定。合作社负责人介绍说，机器并不能完全替代手工，最好的那部分茶仍然由老师傅亲手炒制。",
    "除了传统的批发渠道，越来越多的年轻人开始通过网络直播销售自家的茶叶。他们在茶园里架起手机，"
    "一边采茶一边向观众讲解品种和工艺，订单常常在直播结束后的几个小时内就被抢购一空。",
    "不过，茶农们也有自己的担忧。山上的劳动力越来越少，采茶季请工的费用一年比一年高。一些农户表示，"
    "如果价格不能继续上涨，他们可能会减少种植面积，转而外出打工。",
    "县里的农业部门正在筹划一个茶文化旅游项目，希望把游客引到山村里来，体验采茶和制茶的过程，"
    "同时带动民宿和餐饮的发展。项目的第一期预计在秋天完工，届时将修通一条通往茶园的观光步道。",
]


def site_page(
    title: str, paragraphs: list[str], *, lang: str = "en", ad: str | None = None, views: int | None = None
) -> str:
    """An article in the fixture site's template (navigation, sidebar, footer)."""
    e = html.escape
    body = "\n".join(f"      <p>{e(p)}</p>" for p in paragraphs)
    ad_block = f'\n      <div class="ad-slot"><a href="/promo">{e(ad)}</a></div>' if ad else ""
    counter = f'\n      <span class="views">{views} views</span>' if views is not None else ""
    return f"""<!DOCTYPE html>
<html lang="{lang}">
<head><meta charset="utf-8"><title>{e(title)} | Riverside Courier</title>
<script>var tracking = {{"page": "article"}};</script></head>
<body>
  <header><a href="/">Riverside Courier</a>
    <nav><ul><li><a href="/news">News</a></li><li><a href="/sport">Sport</a></li>
      <li><a href="/culture">Culture</a></li><li><a href="/opinion">Opinion</a></li></ul></nav>
  </header>
  <main>
    <article>
      <h1>{e(title)}</h1>
      <div class="byline">By our local reporter</div>{counter}
{body}{ad_block}
    </article>
    <aside class="sidebar"><h3>Most read</h3><ul>
      <li><a href="/a/1">Harbour festival returns</a></li><li><a href="/a/2">School roof repaired</a></li>
    </ul></aside>
  </main>
  <footer><p>Riverside Courier, all rights reserved.</p><a href="/contact">Contact</a></footer>
</body>
</html>
"""


def blog_page(title: str, paragraphs: list[str], *, lang: str = "en") -> str:
    """The same kind of article copied into another site's template (a blog with other chrome)."""
    e = html.escape
    body = "\n".join(f'<p class="entry">{e(p)}</p>' for p in paragraphs)
    return f"""<html lang="{lang}"><head><title>{e(title)} - Notes from the Valley</title>
<style>body {{ font-family: serif; }}</style></head>
<body><div id="wrap">
<div id="top-menu"><a href="/">Home</a> | <a href="/archive">Archive</a> | <a href="/about">About me</a></div>
<table class="layout"><tr>
<td class="post"><h2 class="post-title">{e(title)}</h2>
<div class="post-body">
{body}
</div><div class="post-meta">Reposted from elsewhere. Tags: local, community</div></td>
<td class="sidebar-cell"><div class="widget"><b>Archive</b><br>
<a href="/2023">2023</a><br><a href="/2024">2024</a></div></td>
</tr></table>
<div id="footer-note">Made with a text editor.</div>
</div></body></html>
"""


def _replace(paragraphs: list[str], index: int, text: str) -> list[str]:
    return [text if i == index else p for i, p in enumerate(paragraphs)]


PAGES: dict[str, str] = {
    "en_article": site_page(GARDEN_TITLE, GARDEN),
    "en_edited": site_page(
        GARDEN_TITLE, _replace(GARDEN, 1, GARDEN_CHANGED), ad="Spring sale on garden tools", views=1234
    ),
    "en_other": site_page(RAIL_TITLE, RAIL),
    "en_copy": blog_page(GARDEN_TITLE, GARDEN),
    "zh_article": site_page(LIBRARY_TITLE, LIBRARY, lang="zh"),
    "zh_edited": site_page(
        LIBRARY_TITLE,
        _replace(LIBRARY, 0, LIBRARY_CHANGED),
        lang="zh",
        ad="限时优惠：台灯买一送一",
        views=5678,
    ),
    "zh_other": site_page(TEA_TITLE, TEA, lang="zh"),
    "image_only": '<!DOCTYPE html><html><body><img src="/a.jpg" alt=""><img src="/b.jpg"></body></html>',
    "blank": "",
}


@pytest.fixture(scope="session")
def pages() -> dict[str, str]:
    """The fixture pages by name, as HTML text."""
    return PAGES


@pytest.fixture
def page_files(tmp_path: Path) -> dict[str, Path]:
    """The fixture pages written as UTF-8 files, by name."""
    out = {}
    for name, text in PAGES.items():
        path = tmp_path / f"{name}.html"
        path.write_bytes(text.encode("utf-8"))
        out[name] = path
    return out


@pytest.fixture(scope="session")
def make_page():
    """The fixture site's template: ``make_page(title, paragraphs, lang=..., ad=..., views=...)``."""
    return site_page


@pytest.fixture
def pages_file(tmp_path: Path, pages: dict[str, str]) -> Path:
    """Two pages (English, Chinese) as a JSON Lines input of ``dedup``."""
    lines = [{"url": "https://a.example/garden", "html": pages["en_article"]},
             {"url": "https://a.example/x", "html": pages["zh_article"]}]  # fmt: skip
    path = tmp_path / "pages.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs in its own directory: the filter's default on-disk index (``.scrapy/simhash``)
    never outlives a test or leaks between tests."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def memory_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Crawlers built in this process default to the in-memory index (for tests of one crawl's decisions)."""
    from simhash_filter.crawl import settings

    monkeypatch.setattr(settings, "SIMHASH_BACKEND", "memory://")


@pytest.fixture(scope="module")
def site_port() -> Iterator[int]:
    """The local test site (``devsites/site_server.py``) in a subprocess; its port."""
    from crawl_helpers import local_site

    with local_site() as port:
        yield port


@pytest.fixture
def corpus(pages) -> list[tuple[str, str]]:
    """(url, html) in input order: originals first, their near-duplicates later, distinct pages between."""
    return [
        ("https://a.example/garden", pages["en_article"]),
        ("https://a.example/rail", pages["en_other"]),
        ("https://b.example/garden-copy", pages["en_edited"]),
        ("https://a.example/library", pages["zh_article"]),
        ("https://a.example/tea", pages["zh_other"]),
        ("https://c.example/library", pages["zh_edited"]),
    ]


BENCH_AVOID = "benchmarks.speed.bench_avoid"


@contextmanager
def benchmark_module(name: str) -> Iterator[ModuleType]:
    """A benchmark script imported as a module (``benchmarks`` is a package of the repository root)."""
    yield importlib.import_module(name)


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    """benchmarks/speed/bench_avoid.py as a module: its crawl of a generated site and the summary of a crawl."""
    with benchmark_module(BENCH_AVOID) as module:
        yield module
