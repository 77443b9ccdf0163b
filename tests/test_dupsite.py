"""The generated sites of ``devsites/dupsite.py`` (the test sites of "save downloads"): deterministic, every
link served, their ground truth (``content_id``) agreeing with what they serve, and one small crawl of
``benchmarks/speed/bench_avoid.py``."""

from __future__ import annotations

import itertools
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit

import pytest

from devsites.dupsite import (
    MAIN,
    MIRROR,
    DupHeavySite,
    GeneratedSite,
    ParamsMatterSite,
    dup_heavy_site,
    links_of,
    params_matter_site,
)
from devsites.localsite import LocalSite, Page


@pytest.fixture(scope="module")
def text(bench: ModuleType) -> ModuleType:
    """benchmarks/benchlib/text.py: visible text, shingles and Jaccard by the public set's rule."""
    from benchmarks.benchlib import text

    return text


@pytest.fixture(scope="module")
def heavy() -> DupHeavySite:
    return dup_heavy_site()


@pytest.fixture(scope="module")
def params() -> ParamsMatterSite:
    return params_matter_site()


@pytest.fixture(scope="module")
def walks(heavy: DupHeavySite, params: ParamsMatterSite) -> dict[str, list[tuple[str, Page, list[str]]]]:
    return {site.name: list(site.walk()) for site in (heavy, params)}


class Similarity:
    """Jaccard of the visible text of two served pages (English word 3-shingles or Chinese character 4-grams,
    by the language of the first)."""

    def __init__(self, site: GeneratedSite, text: ModuleType) -> None:
        self.site, self.text = site, text
        self.texts: dict[str, str] = {}
        self.shingles: dict[tuple[str, str], frozenset[str]] = {}

    def visible(self, url: str) -> str:
        if url not in self.texts:
            self.texts[url] = self.text.visible_text(self.site.fetch(url).body)
        return self.texts[url]

    def shingled(self, url: str, lang: str) -> frozenset[str]:
        if (url, lang) not in self.shingles:
            self.shingles[url, lang] = self.text.shingles(self.visible(url), lang)
        return self.shingles[url, lang]

    def __call__(self, a: str, b: str) -> float:
        lang = self.text.language(self.visible(a))
        return float(self.text.jaccard(self.shingled(a, lang), self.shingled(b, lang)))


def test_same_seed_gives_the_same_bytes_at_every_url() -> None:
    """Two sites built with the same arguments serve the same bytes at every URL; another seed other pages."""
    for make in (dup_heavy_site, params_matter_site):
        a, b, other = make(40, 3), make(40, 3), make(40, 4)
        urls = [url for url, _, _ in a.walk()]
        assert len(urls) > 100
        assert all(a.fetch(url).body == b.fetch(url).body for url in urls)
        assert a.fetch(a.url("/")).body != other.fetch(other.url("/")).body


@pytest.mark.parametrize("make", [dup_heavy_site, params_matter_site])
def test_link_order_shuffles_the_start_page_links_and_nothing_else(make) -> None:
    """``link_order``: the start page lists the same links in another order (the same for the same seed, another
    for another seed); every other page is served as it is, and the ground truth is the same."""
    plain, one, again, two = make(40), make(40, link_order=1), make(40, link_order=1), make(40, link_order=2)
    start = plain.url("/")
    orders = [links_of(site.fetch(start).body.decode("utf-8"), start) for site in (plain, one, again, two)]
    assert orders[1] == orders[2] and len({tuple(o) for o in orders}) == 3
    assert all(sorted(o) == sorted(orders[0]) for o in orders)
    urls = [url for url, _, _ in plain.walk()][1:60]
    assert all(plain.fetch(url).body == one.fetch(url).body for url in urls)
    assert [one.content_id(url) for url in urls] == [plain.content_id(url) for url in urls]


@pytest.mark.parametrize("name", ["dup-heavy", "params-matter"])
def test_every_link_is_served(name: str, walks: dict[str, list[tuple[str, Page, list[str]]]]) -> None:
    """Every link of every page reached from the start page is served (200), but the deliberate 404s."""
    site = {"dup-heavy": dup_heavy_site(), "params-matter": params_matter_site()}[name]
    missing = {urlsplit(url).path for url, page, _ in walks[name] if page.status != 200}
    assert missing == set(site.deliberate_404)
    assert all(urlsplit(link).hostname in site.hosts for _, _, links in walks[name] for link in links)
    reached = {site.content_id(url) for url, page, _ in walks[name] if page.status == 200}
    assert reached == set(site.distinct)  # every distinct page is reached, and every URL shows one


def test_duplicate_heavy_site_has_many_urls_per_page(heavy: DupHeavySite, walks: dict) -> None:
    """The news site has 150 articles, a fifth in Chinese, and several times more URLs than distinct pages."""
    assert len(heavy.stories) == 150
    assert sum(1 for s in heavy.stories if s.lang == "zh") == 30
    assert len(walks["dup-heavy"]) > 10 * len(heavy.distinct)
    listings = [cid for cid in heavy.distinct if cid.startswith("list:")]
    assert any(cid.endswith(":2") for cid in listings)


@pytest.mark.parametrize("name", ["dup-heavy", "params-matter"])
def test_content_id_agrees_with_what_is_served(name: str, walks: dict, text: ModuleType) -> None:
    """Every URL of a distinct page shows a near-identical text (Jaccard ≥ 0.9 with its canonical URL)."""
    site = {"dup-heavy": dup_heavy_site(), "params-matter": params_matter_site()}[name]
    sim = Similarity(site, text)
    by_id: dict[str, list[str]] = defaultdict(list)
    for url, page, _ in walks[name]:
        if page.status == 200:
            by_id[str(site.content_id(url))].append(url)
    low = [
        (cid, url, round(j, 3))
        for cid, urls in by_id.items()
        for url in urls
        if (j := sim(site.url(site.distinct[cid]), url)) < text.NEAR_IDENTICAL
    ]
    assert low == []
    assert sum(len(urls) for urls in by_id.values()) > 3 * len(site.distinct)


@pytest.mark.parametrize("name", ["dup-heavy", "params-matter"])
def test_distinct_pages_are_distinct(name: str, text: ModuleType) -> None:
    """The canonical URLs of two distinct pages show texts with a Jaccard under 0.5."""
    site = {"dup-heavy": dup_heavy_site(), "params-matter": params_matter_site()}[name]
    sim = Similarity(site, text)
    urls = [site.url(path) for path in site.distinct.values()]
    worst = max((sim(a, b), a, b) for a, b in itertools.combinations(urls, 2))
    assert worst[0] < text.DISTINCT, worst


def test_url_forms_of_the_news_site_show_one_page(heavy: DupHeavySite) -> None:
    """Every URL form (session, tracking, sort, print, index.html, slash, case, mirror) shows the one article."""
    story = heavy.stories[12]
    path = story.path
    forms = [
        path,
        f"{path};jsessionid=0123456789ABCDEF",
        f"{path}?utm_source=rss&utm_medium=feed&ref=related",
        f"{path}?sort=oldest",
        f"/print{path}",
        f"{path}index.html",
        path.rstrip("/"),
        path.upper(),
    ]
    for form in forms:
        assert heavy.content_id(heavy.url(form)) == f"article:{story.n}", form
        assert heavy.fetch(heavy.url(form)).status == 200
    assert heavy.content_id(heavy.url(f"{path}?sid=00ff", MIRROR)) == f"article:{story.n}"
    # ?page=1 is the listing itself, ?page=2 another page
    section = f"/{story.section}/"
    assert heavy.content_id(heavy.url(section)) == heavy.content_id(heavy.url(f"{section}?page=1"))
    assert heavy.content_id(heavy.url(f"{section}?page=2")) != heavy.content_id(heavy.url(section))
    assert heavy.content_id(heavy.url(f"{section}?page=99")) is None
    assert heavy.content_id(heavy.url("/print/")) is None
    # volatile bits: two URLs of one page never serve the same bytes
    bodies = {heavy.fetch(heavy.url(form)).body for form in forms[:4]}
    assert len(bodies) == 4


def test_mirror_pages_are_near_duplicates_in_other_chrome(heavy: DupHeavySite, walks: dict, text: ModuleType) -> None:
    """Each page's mirror (same path on 127.0.0.2) is a near-duplicate in other chrome whose links stay there."""
    sim = Similarity(heavy, text)
    for path in heavy.distinct.values():
        main, mirror = heavy.url(path), heavy.url(path, MIRROR)
        assert sim(main, mirror) >= text.NEAR_IDENTICAL, path
        assert heavy.fetch(main).body != heavy.fetch(mirror).body
    assert "courier mirror" in sim.visible(heavy.url("/", MIRROR))  # visible text is lower-case
    assert "courier mirror" not in sim.visible(heavy.url("/"))
    on_mirror = [(url, links) for url, _, links in walks["dup-heavy"] if urlsplit(url).hostname == MIRROR]
    assert len(on_mirror) > 100
    assert all(urlsplit(link).hostname == MIRROR for _, links in on_mirror for link in links)
    linked = {
        heavy.content_id(link)
        for url, _, links in walks["dup-heavy"]
        if urlsplit(url).hostname == MAIN
        for link in links
        if urlsplit(link).hostname == MIRROR
    }
    assert 0.2 * len(heavy.stories) < len(linked) < 0.5 * len(heavy.stories)


def test_params_matter_traps(params: ParamsMatterSite, text: ModuleType) -> None:
    """The catalogue's trap pairs: the same page (Jaccard ≥ 0.9) or distinct pages (< 0.5), as labelled."""
    sim = Similarity(params, text)
    assert any(not same for _, _, same in params.traps)
    for a, b, same in params.traps:
        ua, ub = params.url(a), params.url(b)
        assert (params.content_id(ua) == params.content_id(ub)) is same, (a, b)
        j = sim(ua, ub)
        assert j >= text.NEAR_IDENTICAL if same else j < text.DISTINCT, (a, b, j)
    assert text.language(sim.visible(params.url("/article?id=3&lang=zh"))) == "zh"
    assert params.content_id(params.url("/article?id=999")) is None
    assert params.content_id(params.url("/list?page=0")) is None
    assert params.content_id(params.url("/", MIRROR)) is None  # one host only


def test_local_site_asks_resolve_for_paths_it_does_not_have() -> None:
    """LocalSite serves its mapping first, then what ``resolve(host, path)`` answers, else a 404."""
    asked: list[tuple[str, str]] = []

    def resolve(host: str, path: str) -> Page | None:
        asked.append((host, path))
        return Page(f"{host} {path}".encode()) if path.startswith("/gen") else None

    with LocalSite({"/fixed": Page(b"fixed")}, resolve=resolve) as server:
        with urllib.request.urlopen(server.url("/fixed")) as response:
            assert response.read() == b"fixed"
        with urllib.request.urlopen(server.url("/gen;a=1?b=%E4%B8%AD", MIRROR)) as response:
            assert response.read() == f"{MIRROR} /gen;a=1?b=中".encode()
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(server.url("/nothing"))
        err.value.close()
        assert err.value.code == 404
    assert asked == [(MIRROR, "/gen;a=1?b=中"), (MAIN, "/nothing")]


@pytest.mark.slow
def test_crawl_with_the_filter_alone_requests_more_than_the_distinct_pages(bench: ModuleType, tmp_path: Path) -> None:
    """A real crawl of a small news site with the filter alone sends more requests than there are distinct pages."""
    site = dup_heavy_site(articles=20)
    with site.serve():
        run = bench.summarize(site, bench.crawl(site, tmp_path, bench.MODES[bench.FILTER]))
    assert run["requests"] > 3 * len(site.distinct)
    assert 0 < run["distinct"] <= len(site.distinct)
    assert run["stored"] < run["responses"]
