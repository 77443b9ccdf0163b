"""Saving downloads (``SIMHASH_AVOID``): real Scrapy crawls of the generated sites of ``devsites/dupsite.py`` and of a
small site made here, with the in-memory, on-disk and Redis indexes: requests left unsent, no distinct page lost,
parameters that matter never learned, a wrong rule withdrawn and what it avoided fetched after all, a recrawl that
avoids from its start, and two crawl processes that learn what one learns."""

from __future__ import annotations

import json
import random
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest

from devsites.dupsite import dup_heavy_site, params_matter_site
from devsites.localsite import LocalSite, Page
from devsites.redis_server import RedisServer
from simhash_filter.config import DEFAULTS
from simhash_filter.crawl.known import KnownDuplicates, url_hash
from simhash_filter.crawl.urlrules import RuleBook
from simhash_filter.index.backends import open_backend
from simhash_filter.index.tables import resolve_design

pytestmark = pytest.mark.slow

AVOID = {"SIMHASH_AVOID": "True"}


def _crawl(bench: ModuleType, site, workdir: Path, settings: dict[str, str], index: Path | None = None):
    """One crawl of *site* (served already): its summary, its stats and its log."""
    stats = bench.crawl(site, workdir, settings, index)
    log = (workdir / "crawl.log").read_text(encoding="utf-8")
    return bench.summarize(site, stats), stats, log


def _rules(notes: dict[str, int]) -> set[tuple[str, str, str]]:
    """The active rules and mirrors of an index's notes, hosts without their port."""
    book = RuleBook()
    book.merge(notes)
    return {(v.kind, v.host.split(":")[0], v.rule.split(":")[0] if v.kind == "mirror" else v.rule)
            for v in book.verdicts() if v.active}  # fmt: skip


def _file_notes(index: Path) -> dict[str, int]:
    k = DEFAULTS.max_distance
    design = resolve_design(DEFAULTS.tables, 10**6)
    with open_backend(f"file://{index}?readonly=1", k=k, design=design) as b:
        return b.notes()


@pytest.mark.parametrize("store", ["memory", "file"])
def test_the_news_site_is_crawled_with_far_fewer_requests_and_every_distinct_page(
    bench: ModuleType, tmp_path: Path, store: str
) -> None:
    """On the duplicate-heavy site (session ids, tracking parameters, print views, index.html, case and slash
    variants, a mirror host) the crawl with avoidance sends at most 65 % of the filter alone's requests and
    stores every distinct page the filter alone stores; each learned rule is logged."""
    site = dup_heavy_site(articles=40)
    backend = {"SIMHASH_BACKEND": "memory://"} if store == "memory" else {}
    with site.serve():
        alone, _, _ = _crawl(bench, site, tmp_path / "alone", backend)
        avoiding, stats, log = _crawl(bench, site, tmp_path / "avoid", {**AVOID, **backend})
    assert avoiding["requests"] <= 0.65 * alone["requests"], (avoiding["requests"], alone["requests"])
    assert set(avoiding["content_ids"]) == set(alone["content_ids"])
    assert stats.get("simhash/avoided/url_rule", 0) > 0 and stats.get("simhash/avoided/mirror", 0) > 0
    assert "learned URL rule" in log and "learned mirror" in log and "Traceback" not in log


def test_parameters_that_change_the_page_are_never_learned(bench: ModuleType, tmp_path: Path) -> None:
    """On the catalogue (``?page=``, ``?id=``, ``&lang=zh`` change the page; ``?page=1`` and ``&lang=en`` do not;
    ``sid`` never does) every distinct page is stored, and only rules that change no page are active at the end."""
    site = params_matter_site(articles=30)
    index = tmp_path / "index"
    with site.serve():
        avoiding, stats, _ = _crawl(bench, site, tmp_path / "avoid", AVOID, index)
    assert avoiding["distinct"] == len(site.distinct)
    active = {rule for kind, _, rule in _rules(_file_notes(index)) if kind == "rule"}
    assert not active & {"param:page", "param:id", "param:lang"}, active
    assert "param:sid" in active
    assert stats.get("simhash/avoided/url_rule", 0) > 0


#: The orders a site is crawled in: concurrent requests, and the seed its start page's links are shuffled by
#: (None: the site's own order).
ORDERS = [(concurrency, order) for concurrency in ("1", "8") for order in (None, 1, 2)] + [("16", None)]


def _learned_in_every_order(bench: ModuleType, make, tmp_path: Path) -> list[tuple[set, dict]]:
    """The site that ``make(link_order)`` builds, crawled with avoidance in each of :data:`ORDERS` (a fresh on-disk
    index each): the active rules and mirrors each crawl left in its index, and its summary."""
    out = []
    for concurrency, order in ORDERS:
        site, name = make(order), f"{concurrency}-{order}"
        settings = {**AVOID, "CONCURRENT_REQUESTS": concurrency}
        with site.serve():
            run, _, log = _crawl(bench, site, tmp_path / name, settings, tmp_path / f"index-{name}")
        assert "Traceback" not in log
        assert run["distinct"] == len(site.distinct), (name, sorted(set(site.distinct) - set(run["content_ids"])))
        out.append((_rules(_file_notes(tmp_path / f"index-{name}")), run))
    return out


def test_the_catalogue_learns_the_same_rules_in_every_order(bench: ModuleType, tmp_path: Path) -> None:
    """The catalogue crawled one request at a time and eight at a time, its start page's links in three orders
    (and sixteen at a time):
    every crawl stores every distinct page and ends with ``param:sid`` active and nothing else (``page``, ``id``
    and ``lang`` change pages: their pairs disagree before they could act)."""
    learned = _learned_in_every_order(bench, lambda order: params_matter_site(articles=30, link_order=order), tmp_path)
    for rules, run in learned:
        assert rules == {("rule", "127.0.0.1", "param:sid")}, (rules, run["requests"])
        assert run.get("simhash/avoided/url_rule", 0) > 0


def test_the_news_site_learns_the_same_rules_in_every_order(bench: ModuleType, tmp_path: Path) -> None:
    """The news site and its mirror, crawled in the same seven orders: every crawl stores every distinct page and
    ends with the same active rules on both hosts and the same mirror verdict (the rules that the site supports
    reach the precision bound long before their pairs run out, whatever comes first; the mirror's rules pool its
    partner's counts); ``page`` never acts."""
    learned = _learned_in_every_order(bench, lambda order: dup_heavy_site(articles=150, link_order=order), tmp_path)
    first = learned[0][0]
    assert all(rules == first for rules, _ in learned), [sorted(rules ^ first) for rules, _ in learned]
    assert ("mirror", "127.0.0.1", "127.0.0.2") in first
    for rule in ("param:;jsessionid", "param:utm_source", "index", "slash", "case", "prefix:print", "param:sid"):
        assert ("rule", "127.0.0.1", rule) in first and ("rule", "127.0.0.2", rule) in first, rule
    assert not {rule for _, _, rule in first} & {"param:page"}


def _words(rng: random.Random, n: int) -> str:
    syllables = "ka lo mi re su ta ne vo pi da ru se ko ma li".split()
    return " ".join("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(n))


def _article(seed: str) -> Page:
    rng = random.Random(seed)
    paras = "".join(f"<p>{_words(rng, 60)}.</p>" for _ in range(5))
    return Page(f"<html><head><title>{_words(rng, 4)}</title></head><body><main>{paras}</main></body></html>".encode())


def _links_page(links: list[str]) -> Page:
    items = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return Page(f"<html><body><h1>Index</h1><ul>{items}</ul></body></html>".encode())


def test_a_wrong_rule_is_withdrawn_and_what_it_avoided_is_fetched_after_all(bench: ModuleType, tmp_path: Path) -> None:
    """``?v=1`` shows the same page on ten articles (the rule ``param:v`` is learned: a precision bound of 0.7
    needs seven such pairs), then ``?v=2`` shows another page on twenty: validation fetches withdraw the rule, the
    requests it avoided are queued again, and every one of the forty distinct pages is stored."""
    pages = {"/robots.txt": Page(b"", "text/plain")}
    first = [f"/a{i}" for i in range(10)]
    second = [f"/b{j}" for j in range(20)]
    pages["/"] = _links_page([*first, *(f"{p}?v=1" for p in first), "/hub"])
    pages["/hub"] = _links_page([*second, *(f"{p}?v=2" for p in second)])
    for p in first:
        pages[p] = pages[f"{p}?v=1"] = _article(p)
    for p in second:
        pages[p], pages[f"{p}?v=2"] = _article(p), _article(p + "?v=2")
    settings = {**AVOID, "SIMHASH_AVOID_MIN_EXAMPLES": "3", "SIMHASH_AVOID_MIN_PRECISION": "0.7",
                "SIMHASH_AVOID_VALIDATE": "0.3", "CONCURRENT_REQUESTS": "1"}  # fmt: skip
    with LocalSite(pages, hosts=("127.0.0.1",)) as server:
        stats = bench.crawl(_Site(server.port), tmp_path, settings)
    stored = {item["url"].split(":", 2)[2].split("/", 1)[1] for item in stats["bench/items"]}
    expected = {p.lstrip("/") for p in [*first, *second, *(f"{p}?v=2" for p in second), "/", "/hub"]}
    assert stats.get("simhash/avoid/rules_learned", 0) >= 1
    assert stats.get("simhash/avoid/rules_withdrawn", 0) >= 1
    assert stored >= expected - {""}, sorted(expected - stored)


class _Site:
    """The smallest site the benchmark's crawl takes: one host, start page ``/``, no ground truth."""

    hosts = ("127.0.0.1",)

    def __init__(self, port: int) -> None:
        self.port = port

    def start_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{self.port}/"]


def test_a_recrawl_with_the_on_disk_index_avoids_from_its_start(bench: ModuleType, tmp_path: Path) -> None:
    """The second crawl over the same on-disk index knows the rules and mirrors at once (logged as known) and
    sends fewer requests than the first; its start page is fetched (a kept page is never avoided)."""
    site = dup_heavy_site(articles=30)
    index = tmp_path / "index"
    with site.serve():
        first, _, _ = _crawl(bench, site, tmp_path / "first", AVOID, index)
        again, stats, log = _crawl(bench, site, tmp_path / "again", AVOID, index)
    lines = log.splitlines()
    known = [i for i, line in enumerate(lines) if "known URL rule" in line or "known mirror" in line]
    crawled = [i for i, line in enumerate(lines) if "Crawled (" in line or "not fetching" in line]
    assert known and crawled and max(known) < min(crawled), "the rules must be known before the first request"
    avoided = stats.get("simhash/avoided/url_rule", 0) + stats.get("simhash/avoided/mirror", 0)
    assert again["requests"] < avoided  # most of what the recrawl met was left unsent
    assert again["requests"] < 2 * first["requests"]


def test_two_crawl_processes_sharing_redis_learn_the_rules_of_one(
    bench: ModuleType, tmp_path: Path, redis_server: RedisServer
) -> None:
    """Two scrapy-redis processes crawling the news site together, with one Redis index, end with the same
    active rules on both hosts and the same mirror verdict as one process alone (their evidence is counted in one
    Redis hash).  150 articles: a site large enough that its rules reach the precision bound whatever the order
    the processes meet its pages in."""
    site = dup_heavy_site(articles=150)
    k = DEFAULTS.max_distance
    design = resolve_design(DEFAULTS.tables, 10**6)

    def redis_settings(run: str, **more: str) -> dict[str, str]:
        return {
            **AVOID,
            "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
            "SCHEDULER_PERSIST": "True",
            "SCHEDULER_QUEUE_KEY": f"{run}:%(spider)s:requests",
            "SCHEDULER_DUPEFILTER_KEY": f"{run}:%(spider)s:dupefilter",
            "REDIS_URL": redis_server.url,
            "SIMHASH_BACKEND": f"{redis_server.url}?prefix={run}",
            "CONCURRENT_REQUESTS": "4",
            **more,
        }

    def notes(run: str) -> dict[str, int]:
        with open_backend(f"{redis_server.url}?prefix={run}", k=k, design=design) as backend:
            return backend.notes()

    one, two = f"one-{uuid.uuid4().hex[:8]}", f"two-{uuid.uuid4().hex[:8]}"
    with site.serve(), ThreadPoolExecutor(2) as pool:
        bench.crawl(site, tmp_path / "one", redis_settings(one))
        # the two processes take turns (tests/crawl_gate.py): both take part, however the two are scheduled
        futures = []
        for me in (0, 1):
            turn = {"TURNS_MINE": f"{two}:turn:{me}", "TURNS_OTHER": f"{two}:turn:{1 - me}"}
            gate = {"DOWNLOADER_MIDDLEWARES": json.dumps({"tests.crawl_gate.TakeTurns": 950}), **turn}
            futures.append(pool.submit(bench.crawl, site, tmp_path / f"two-{me}", redis_settings(two, **gate)))
        runs = [future.result() for future in futures]
    assert all(run.get("response_received_count", 0) > 0 for run in runs), "one process fetched nothing"
    alone, together = (_rules(notes(run)) for run in (one, two))
    assert together == alone
    assert ("rule", "127.0.0.1", "param:utm_source") in together


def test_the_test_site_keeps_every_group_and_every_distinct_page_with_avoidance(site_port: int, tmp_path: Path) -> None:
    """The crawl tests' own site (near-duplicate groups across two hosts, a mirror, redirects, odd pages): with
    avoidance on, still exactly one page of each group is stored and every distinct page."""
    from crawl_helpers import scrapy_crawl, start_urls

    from devsites.site_server import GROUPS, OTHERS

    crawl = scrapy_crawl("site", tmp_path, args={"start_urls": start_urls(site_port)},
                         settings={**AVOID, "DOWNLOAD_FAIL_ON_DATALOSS": "False"})  # fmt: skip
    stored = crawl.by_key()
    for group, keys in GROUPS.items():
        assert len([k for k in keys if k in stored]) == 1, (group, sorted(stored))
    assert set(OTHERS) <= set(stored)
    assert "Traceback" not in crawl.log


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("SIMHASH_AVOID_ACTION", "delete"),
        ("SIMHASH_AVOID_VALIDATE", "2"),
        ("SIMHASH_AVOID_MIN_EXAMPLES", "many"),
        ("SIMHASH_AVOID_MIN_PRECISION", "1.5"),
    ],
)
def test_a_wrong_avoid_setting_stops_the_crawl_at_start_in_one_line(
    tmp_path: Path, site_port: int, setting: str, value: str
) -> None:
    """A wrong SIMHASH_AVOID_* value: one ERROR line naming the setting and the value, no traceback, no request."""
    from test_errors import crawl_log

    log = crawl_log(tmp_path, site_port, str(tmp_path / "index"), **AVOID, **{setting: value})
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and setting in errors[0] and value in errors[0], log
    assert "Traceback" not in log and "Closing spider (simhash_start_failed)" in log, log


def test_deprioritized_requests_are_sent_later_not_dropped(bench: ModuleType, tmp_path: Path) -> None:
    """``SIMHASH_AVOID_ACTION = "deprioritize"``: the requests the rules would avoid are counted and sent back to
    the scheduler; none is dropped, and every distinct page is stored."""
    site = dup_heavy_site(articles=20)
    with site.serve():
        run, stats, _ = _crawl(bench, site, tmp_path, {**AVOID, "SIMHASH_AVOID_ACTION": "deprioritize"})
    assert stats.get("simhash/deprioritized/url_rule", 0) > 0
    assert not any(n for key, n in stats.items() if key.startswith("simhash/avoided/")), "a request was dropped"
    assert run["distinct"] == len(site.distinct)


def test_evidence_that_cannot_be_written_is_kept_for_the_next_write() -> None:
    """A store that fails a write of the rules' evidence: the failure is counted (and logged once), the counts
    stay pending, and the next write stores them all."""
    import asyncio

    from scrapy.statscollectors import MemoryStatsCollector
    from scrapy.utils.test import get_crawler

    from simhash_filter.crawl.avoid import Avoider
    from simhash_filter.crawl.stats import FilterStats
    from simhash_filter.index.backends.memory import MemoryBackend

    k = DEFAULTS.max_distance
    backend = MemoryBackend(k=k, design=resolve_design(DEFAULTS.tables, 1000))
    stats = MemoryStatsCollector(get_crawler())
    avoider = Avoider(backend, FilterStats(stats))
    avoider.book.observe("http://a.test/p", 1, None)
    avoider.book.observe("http://a.test/p?sid=1", 1, "http://a.test/p")
    real, calls = backend.add_notes, []

    def failing(increments):
        calls.append(dict(increments))
        raise ConnectionError("store down")

    backend.add_notes = failing  # type: ignore[method-assign]
    asyncio.run(avoider.flush())
    assert stats.get_value("simhash/avoid/notes_errors") == 1 and backend.notes() == {}
    backend.add_notes = real  # type: ignore[method-assign]
    asyncio.run(avoider.flush())
    assert backend.notes() == calls[0] == {"rule|a.test|param:sid|+": 1}


_DROPPED = re.compile(r"simhash: (\w+) (\S+): near-duplicate of (\S+) \(distance")
_CRAWLED = re.compile(r"Crawled \(\d+\) <GET (\S+)>")


def _dropped_and_fetched(log: str) -> tuple[set[str], set[str]]:
    """The URLs a crawl's DEBUG log says it dropped as near-duplicates of another page, and those it downloaded."""
    dropped = {m[2] for m in _DROPPED.finditer(log) if m[2] != m[3] and m[1].startswith("drop")}
    return dropped, {m[1] for m in _CRAWLED.finditer(log)}


def test_a_recrawl_does_not_download_what_the_last_crawl_dropped(bench: ModuleType, tmp_path: Path) -> None:
    """Two crawls of the news site over one on-disk index: the second downloads none of the URLs the first dropped
    as near-duplicates (the index holds their URLs, and its notes the page each duplicated), counts each in
    ``simhash/avoided/known``, and the index still holds every distinct page."""
    site = dup_heavy_site(articles=30)
    index = tmp_path / "index"
    settings = {**AVOID, "LOG_LEVEL": "DEBUG", "SIMHASH_DEBUG": "True"}
    with site.serve():
        first, _, log1 = _crawl(bench, site, tmp_path / "first", settings, index)
        _, stats, log2 = _crawl(bench, site, tmp_path / "again", settings, index)
    dropped, _ = _dropped_and_fetched(log1)
    _, fetched = _dropped_and_fetched(log2)
    assert first["distinct"] == len(site.distinct) and dropped
    assert not dropped & fetched, sorted(dropped & fetched)[:5]
    assert stats.get("simhash/avoided/known") == len(dropped)
    k = DEFAULTS.max_distance
    with open_backend(f"file://{index}?readonly=1", k=k, design=resolve_design(DEFAULTS.tables, 10**6)) as b:
        held = {site.content_id(entry.key) for entry in b.entries()}
    assert set(site.distinct) <= held
    assert "Traceback" not in log2


def _known(max_age: float) -> KnownDuplicates:
    return KnownDuplicates(max_age)


def test_a_known_near_duplicate_is_skipped_only_while_young_and_while_its_kept_page_is_held() -> None:
    """A record acts while younger than its maximum age and only when the index holds the page it duplicated; a
    record seen again moves to the new time (notes are counters: the difference is added); 0 turns them off."""
    writer = _known(3600)
    writer.dropped("http://a.test/p?sid=1", "http://a.test/p", now=1000)
    writer.dropped("http://a.test/q?sid=1", "http://a.test/gone", now=1000)
    notes = writer.take_pending()
    assert len(notes) == 2 and set(notes.values()) == {1000}

    def loaded(max_age: float, now: float, notes: dict[str, int]) -> KnownDuplicates:
        known = _known(max_age)
        known.load(notes, now=now)
        for key in ("http://a.test/p", "http://a.test/q?sid=1", "http://a.test/p?sid=1"):
            known.held(key)
        known.loaded()
        return known

    young = loaded(3600, 2000, notes)
    assert young.target("http://a.test/p?sid=1") == "http://a.test/p"
    assert young.target("http://a.test/q?sid=1") is None  # its kept page is not in the index
    assert young.target("http://a.test/p") is None
    old = loaded(3600, 5000, notes)
    assert old.target("http://a.test/p?sid=1") is None  # too old: fetched and checked again
    old.unchanged("http://a.test/p?sid=1", now=5000)  # the same page as before: the record is renewed
    renewed = old.take_pending()
    assert renewed == {next(iter(k for k in notes if k.endswith(f"{url_hash('http://a.test/p'):016x}"))): 4000}
    totals = {k: notes[k] + renewed.get(k, 0) for k in notes}
    assert loaded(3600, 5000, totals).target("http://a.test/p?sid=1") == "http://a.test/p"
    assert loaded(0, 2000, notes).target("http://a.test/p?sid=1") is None
    assert loaded(3600, 1000 - 3600, notes).target("http://a.test/p?sid=1") is None  # from the future: not trusted
