"""Four crawler processes, three mirror sites, one index sharded over a 3-node Redis Cluster, a node restarted
mid-crawl.

The site of ``bench_crawl.py`` (the first ``--pages`` original pages of the public set on http://127.0.0.1:PORT/,
their twins by five seeded mirrors on 127.0.0.2) and a third host, 127.0.0.3, whose twins another seed made: three
sites that copy each other.  A 3-node Redis Cluster on loopback (``--cluster-enabled yes``, append-only files on)
holds the index, ``redis://NODE/0?cluster=1&shards=3&prefix=...``; a plain Redis holds scrapy-redis's frontier (its
scheduler and dupefilter: one queue, each request taken once).  ``--crawlers`` processes (``scrapy crawl site``,
``SIMHASH_ACTION=flag``, the first alone until it has queued work) crawl the three sitemaps.  When the frontier has
seen ``--restart-at`` of the site's URLs, one cluster node is stopped (SIGTERM: its append-only file is written) and
started again.

Reported, against the targets of issue 28:

- every page fetched once (no URL in two processes' feeds) and every page of the three sites fetched;
- races: pairs of kept pages (checked, no ``duplicate_of``) in one block of a table (the same lead), within k, whose
  sketches verify: a page that one process would have flagged (target 0);
- twins flagged: the share of (page, twin) pairs of which one is flagged (of all pairs, and of the pairs whose
  pages were both checked), beside one process crawling the same sites alone with ``memory://``, and the flags of
  both;
- each node's share of the index's memory (``used_memory`` after the crawl less before it; target 25-40 %);
- the restart: pages let through unchecked while the node was away (``simhash/skipped/index_error``), ERROR lines in
  the crawls' logs, how each crawl finished, and kept pages missing from the index afterwards (pages let through
  are added when the index answers again: target 0).

    python -m benchmarks.scale.bench_cluster_crawl [--pages 300] [--crawlers 4] [--restart-at 0.4]
                                             [--index-options '&retries=5'] [--json PATH]
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.benchlib.crawl import crawl_site
from benchmarks.benchlib.data import load_public
from benchmarks.benchlib.mirrors import MIRROR_PAGES, TWIN_SEED, TwinMaker
from benchmarks.benchlib.report import make_parser, write_json
from benchmarks.benchlib.site import relink, sitemap, title_of
from benchmarks.speed.bench_crawl import CRAWL_SETTINGS, build
from devsites.demosite import key_of
from devsites.localsite import HOSTS, LocalSite, Page
from devsites.redis_server import RedisCluster, RedisServer
from simhash_filter.config import DEFAULTS
from simhash_filter.index.backends import open_backend
from simhash_filter.index.tables import TableDesign, tables_for
from simhash_filter.model.sketch import similarity

THIRD = "127.0.0.3"
SITES = (*HOSTS, THIRD)


def three_sites(pages: int) -> tuple[dict[str, Page], list[tuple[str, ...]]]:
    """The site on three hosts, and per page of the set its keys on the three hosts."""
    corpus = load_public(pages)
    site, _, _, _ = build(corpus)
    paths = {s.path for s in corpus.sources}
    maker = TwinMaker(corpus.sources, seed=TWIN_SEED + 1)
    for s in corpus.sources:
        site[f"{THIRD}{s.path}"] = Page(maker.make(s, relink(s.html, s.path, paths)).html.encode("utf-8"))
    site[f"{THIRD}/"] = sitemap("Another mirror", [(s.path, title_of(s.html, s.path)) for s in corpus.sources])
    for path, text in MIRROR_PAGES.items():
        site[f"{THIRD}{path}"] = Page(f"<html><body><h2>{path[1:-5]}</h2><p>{text}</p></body></html>".encode())
    groups = [tuple(key_of(f"http://{host}{s.path}") for host in SITES) for s in corpus.sources]
    return site, groups


def _restart_when(frontier: RedisServer, key: str, target: int, node: RedisServer, done: threading.Event,
                  out: dict[str, Any]) -> None:  # fmt: skip
    """Restart *node* once the frontier's dupefilter *key* holds *target* requests."""
    with frontier.client() as client:
        while not done.is_set():
            if client.scard(key) >= target:
                start = time.monotonic()
                node.stop()
                node.start()
                out.update(restarted_after_requests=int(client.scard(key)), down_seconds=time.monotonic() - start)
                return
            time.sleep(0.05)


def races(entries: list[Any], kept: set[str], design: TableDesign, k: int, min_similarity: float) -> list[tuple]:
    """Pairs of kept pages in one block of a table, within k, whose sketches verify."""
    rows = [e for e in entries if key_of(e.key) in kept]
    fps = np.array([e.fingerprint for e in rows], dtype=np.uint64)
    found = []
    for i in range(len(rows)):
        x = fps[i + 1 :] ^ fps[i]
        near = np.flatnonzero(np.bitwise_count(x) <= k)
        for j in near.tolist():
            if any(not int(x[j]) & mask for mask in design.lead_masks):
                a, b = rows[i], rows[i + 1 + j]
                if similarity(a.sketch, b.sketch) >= min_similarity:
                    found.append((a.key, b.key))
    return found


def twins_flagged(groups: list[tuple[str, ...]], items: list[dict[str, Any]], checked: bool = False) -> float:
    """The share of (page, twin) pairs of which one page is flagged as a near-duplicate (*checked*: of the pairs
    whose pages were both checked, none let through while the index was away)."""
    flagged = {key_of(i["url"]) for i in items if i.get("duplicate_of")}
    unchecked = {key_of(i["url"]) for i in items if i.get("skipped")} if checked else set()
    pairs = [(g[0], twin) for g in groups for twin in g[1:] if not {g[0], twin} & unchecked]
    return sum(a in flagged or b in flagged for a, b in pairs) / len(pairs)


def crawl_together(
    workdir: Path,
    crawlers: int,
    starts: list[str],
    settings: dict[str, str],
    frontier: RedisServer,
    restart: tuple[RedisServer, int] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """*crawlers* crawls sharing the frontier (the first alone until it has queued work); with *restart* (a node, a
    number of requests), that node restarted once the frontier has seen that many requests.  Their stats and logs,
    and what the run did."""
    run = settings["SCHEDULER_QUEUE_KEY"].split(":", 1)[0]
    done = threading.Event()
    what: dict[str, Any] = {}
    watcher = None
    if restart is not None:
        watcher = threading.Thread(
            target=_restart_when, args=(frontier, f"{run}:site:dupefilter", restart[1], restart[0], done, what)
        )
    start = time.monotonic()
    dirs = [workdir / f"crawl{i}" for i in range(crawlers)]
    for d in dirs:
        d.mkdir(parents=True)
    with ThreadPoolExecutor(crawlers) as pool:
        futures = [pool.submit(crawl_site, dirs[0], starts, settings)]
        with frontier.client() as client:
            while not client.zcard(f"{run}:site:requests") and not futures[0].done():
                time.sleep(0.05)
        if watcher is not None:
            watcher.start()
        futures += [pool.submit(crawl_site, d, starts, settings) for d in dirs[1:]]
        crawls = [f.result() for f in futures]
    done.set()
    if watcher is not None:
        watcher.join()
    what["seconds"] = round(time.monotonic() - start, 1)
    for crawl, d in zip(crawls, dirs, strict=True):
        crawl["bench/log"] = (d / "crawl.log").read_text(encoding="utf-8", errors="replace")
    return crawls, what


def outcome(crawls: list[dict[str, Any]], index_uri: str, groups: list[tuple[str, ...]]) -> dict[str, Any]:
    """Fetches, races, pages lost and twins flagged of crawls that shared the index at *index_uri*."""
    k = DEFAULTS.max_distance
    design = TableDesign.parse(tables_for(DEFAULTS.expected_pages))
    with open_backend(index_uri, k=k, design=design) as index:
        entries = list(index.entries())
    items = [item for crawl in crawls for item in crawl["bench/items"]]
    fetched = Counter(key_of(i["url"]) for i in items)
    kept = {key_of(i["url"]) for i in items if not i.get("duplicate_of") and not i.get("skipped")}
    let_through = {key_of(i["url"]) for i in items if i.get("skipped") == "index_error"}
    stored = {key_of(e.key) for e in entries}
    found = races(entries, kept, design, k, DEFAULTS.min_similarity)
    return {
        "fetched_pages": len(fetched),
        "fetched_twice": sum(n > 1 for n in fetched.values()),
        "every_page_fetched": all(key in fetched for g in groups for key in g),
        "pages_per_crawler": [len(c["bench/items"]) for c in crawls],
        "races": len(found),
        "race_examples": found[:5],
        "let_through_index_error": len(let_through),
        "index_error_stats": sum(c.get("simhash/skipped/index_error", 0) for c in crawls),
        "kept_missing_from_index": sorted((kept | let_through) - stored)[:20],
        "error_lines": [line for c in crawls for line in c["bench/log"].splitlines() if " ERROR: " in line][:10],
        "finish_reasons": [c.get("finish_reason") for c in crawls],
        "flags": sum(1 for i in items if i.get("duplicate_of")),
        "twins_flagged": round(twins_flagged(groups, items), 4),
        "twins_flagged_both_checked": round(twins_flagged(groups, items, checked=True), 4),
    }


def main() -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--pages", type=int, default=300, help="pages of the set on each host (default: 300)")
    parser.add_argument("--crawlers", type=int, default=4)
    parser.add_argument("--restart-at", type=float, default=0.4, help="share of the URLs seen before the restart")
    parser.add_argument("--index-options", default="", help="more options of the sharded index's URI (&retries=5)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    site, groups = three_sites(args.pages)
    urls = sum(1 for key in site if key[0].isdigit())
    result: dict[str, Any] = {"pages_per_host": args.pages, "urls_served": urls, "crawlers": args.crawlers}
    with tempfile.TemporaryDirectory() as tmp, LocalSite(site, hosts=SITES) as server, \
            RedisServer(Path(tmp) / "frontier") as frontier, \
            RedisCluster(Path(tmp) / "cluster", appendonly=True) as cluster:  # fmt: skip
        starts = [server.url("/", host) for host in SITES]
        for name in ("sharded", "one server"):
            run = f"bench-{uuid.uuid4().hex[:8]}"
            settings = {
                **CRAWL_SETTINGS,
                "CONCURRENT_REQUESTS": "8",
                "DOWNLOAD_DELAY": "0.01",
                "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
                "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
                "SCHEDULER_PERSIST": "True",
                "SCHEDULER_QUEUE_KEY": f"{run}:%(spider)s:requests",
                "SCHEDULER_DUPEFILTER_KEY": f"{run}:%(spider)s:dupefilter",
                "SIMHASH_ACTION": "flag",
                "REDIS_URL": frontier.url,
            }
            workdir = Path(tmp) / name.replace(" ", "-")
            if name == "sharded":  # over the cluster, a node restarted mid-crawl
                index_uri = f"{cluster.url}?cluster=1&shards=3&prefix={run}{args.index_options}"
                before = [node.used_memory() for node in cluster.nodes]
                restart = (cluster.nodes[1], int(args.restart_at * urls))
            else:  # the same crawl with the index on one server (the frontier's): what sharding changes
                index_uri, restart = f"{frontier.url}?prefix={run}", None
            crawls, what = crawl_together(workdir, args.crawlers, starts, {**settings, "SIMHASH_BACKEND": index_uri},
                                          frontier, restart)  # fmt: skip
            result[name] = {**what, **outcome(crawls, index_uri, groups)}
            if name == "sharded":
                grown = [after - b for after, b in zip((n.used_memory() for n in cluster.nodes), before, strict=True)]
                result[name]["node_memory_share"] = [round(g / sum(grown), 3) for g in grown]
        (Path(tmp) / "alone").mkdir()
        alone = crawl_site(Path(tmp) / "alone", starts, {**CRAWL_SETTINGS, "SIMHASH_ACTION": "flag",
                                                          "SIMHASH_BACKEND": "memory://"})  # fmt: skip
        result["one process"] = {
            "flags": sum(1 for i in alone["bench/items"] if i.get("duplicate_of")),
            "twins_flagged": round(twins_flagged(groups, alone["bench/items"]), 4),
        }
    print(json.dumps(result, indent=1))
    if args.json:
        write_json(args.json, result, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
