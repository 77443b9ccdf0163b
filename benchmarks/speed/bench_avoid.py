"""The avoidance benchmark ("save downloads"): the downloads a crawl saves when the filter learns which URLs
show a page it already has, and the distinct pages it loses by avoiding them.

Two generated sites of ``devsites/dupsite.py`` are served on loopback (``--sites``):

- ``dup-heavy``: a news site of ``--articles`` articles (default 150; a fifth in Chinese) with paginated
  section listings, linked under many URLs (session ids, tracking and sort parameters, print views,
  ``index.html``, no trailing slash, other letter case), and its mirror on 127.0.0.2 (same paths, other
  chrome) that the main host links to for a third of the articles;
- ``params-matter``: a catalogue where parameters change the page (``/list?page=N``, ``/article?id=N``,
  ``&lang=zh``) next to one that does not (``sid``), with traps for a learner that over-generalises
  (``?page=1`` is the listing itself, ``&lang=en`` the page itself, an old id shows another id's article).

Each site is crawled with real Scrapy (``scrapy crawl site``, the project's spider, in a subprocess; start page
``/`` of 127.0.0.1, the site's hosts allowed) in three modes, alternated, ``--repeat`` times, each crawl with a
fresh on-disk index in a temporary directory: **no filter** (``SIMHASH_ENABLED=False``), **filter alone** (the
add-on's defaults) and **filter + avoidance** (``SIMHASH_AVOID=True``).  Settings: ``CONCURRENT_REQUESTS`` and
``CONCURRENT_REQUESTS_PER_DOMAIN`` 16, ``DOWNLOAD_DELAY=0``, no AutoThrottle, ``LOG_LEVEL=INFO``, the
project's breadth-first order.  With ``--recrawl`` the filter alone and the filter + avoidance each crawl
again over the index of their first crawl (a recrawl: avoidance should avoid from its first request).

Reported per site and mode, medians over the repeats: requests sent (``downloader/request_count``, robots.txt
included), responses (``response_received_count``), pages stored (items), distinct pages stored (by the site's
ground truth, ``content_id`` of each item's URL; of all distinct pages), stored copies of a page already
stored, 404s, distinct pages lost against the filter alone of the same repeat (each listed, with the number of
repeats that lost it), crawl seconds (``elapsed_time_seconds``) and rate (responses/s, distinct pages stored/s),
CPU milliseconds of the crawl's process tree per response, and every
``simhash/avoided`` and ``simhash/avoided/...`` stat.  Output: a table on stdout, and with ``--json PATH`` the
numbers as JSON.

    python -m benchmarks.speed.bench_avoid [--repeat 3] [--sites dup-heavy,params-matter] [--articles N] [--seed 7]
                                     [--recrawl] [-s NAME=VALUE ...] [--json PATH]
    python -m benchmarks.speed.bench_avoid --repeat 1            # one crawl per mode: about a minute on two CPUs
    python -m benchmarks.speed.bench_avoid --overhead            # the avoider's own CPU per request and response
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# benchmarks/ (benchlib) also when this file is loaded by its path, as tests/test_dupsite.py does
from benchmarks.benchlib import ROOT
from benchmarks.benchlib.measure import median_of, timed_run
from benchmarks.benchlib.report import add_settings_option, apply_settings, make_parser, write_json
from devsites.dupsite import SITES, GeneratedSite

CRAWL_SETTINGS = {
    "CONCURRENT_REQUESTS": "16",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "16",
    "DOWNLOAD_DELAY": "0",
    "AUTOTHROTTLE_ENABLED": "False",
    "LOG_LEVEL": "INFO",
}
NO_FILTER, FILTER, AVOID = "no filter", "filter alone", "filter + avoidance"
#: The settings of each mode.
MODES: dict[str, dict[str, str]] = {
    NO_FILTER: {"SIMHASH_ENABLED": "False"},
    FILTER: {},
    AVOID: {"SIMHASH_AVOID": "True"},
}
#: The second crawl of a mode over its first crawl's index (``--recrawl``).
RECRAWL = ", 2nd crawl"
AVOIDED = "simhash/avoided"
CRAWL_TIMEOUT = 900


def crawl(site: GeneratedSite, workdir: Path, settings: dict[str, str], index: Path | None = None) -> dict[str, Any]:
    """One ``scrapy crawl site`` of ``site`` (served: :meth:`GeneratedSite.serve`) from its start URLs, its
    hosts allowed, with :data:`CRAWL_SETTINGS` and ``settings``, the index in ``index`` (default: a new
    directory in ``workdir``).  Returns the crawl's stats (``benchlib.scrapy_stats.BenchStats``), the feed's
    items in ``bench/items`` and its wall time in ``bench/wall_seconds``."""
    workdir.mkdir(parents=True, exist_ok=True)
    index = index or Path(tempfile.mkdtemp(prefix="index-", dir=workdir))
    stats_file, feed, log = workdir / "stats.json", workdir / "items.jsonl", workdir / "crawl.log"
    for path in (stats_file, feed, log):
        path.unlink(missing_ok=True)
    cmd = [
        sys.executable, "-m", "scrapy.cmdline", "crawl", "site",
        "-a", f"start_urls={','.join(site.start_urls())}", "-a", f"allowed_domains={','.join(site.hosts)}",
        "-O", f"{feed}:jsonlines", "-s", f"BENCH_STATS={stats_file}", "-s", f"LOG_FILE={log}",
        "-s", 'EXTENSIONS={"benchmarks.benchlib.scrapy_stats.BenchStats": 0}', "-s", f"SIMHASH_BACKEND={index}",
    ]  # fmt: skip
    for name, value in {**CRAWL_SETTINGS, **settings}.items():
        cmd += ["-s", f"{name}={value}"]
    path = [str(ROOT), os.environ.get("PYTHONPATH")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    proc, used = timed_run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=CRAWL_TIMEOUT)
    if proc.returncode != 0 or not stats_file.exists():
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        raise SystemExit(f"the crawl failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}{text[-3000:]}")
    stats = json.loads(stats_file.read_text(encoding="utf-8"))
    stats["bench/wall_seconds"] = used.wall
    stats["bench/cpu_seconds"] = used.cpu
    stats["bench/items"] = [json.loads(line) for line in feed.read_text(encoding="utf-8").splitlines() if line]
    return stats


def summarize(site: GeneratedSite, stats: dict[str, Any]) -> dict[str, Any]:
    """The numbers of one crawl, and the distinct pages it stored (``content_ids``, sorted)."""
    ids = [site.content_id(item["url"]) for item in stats["bench/items"]]
    distinct = sorted({i for i in ids if i is not None})
    seen: set[str | None] = set()
    copies = []  # stored pages whose distinct page was stored before them (feed order)
    for item, cid in zip(stats["bench/items"], ids, strict=True):
        if cid in seen:
            copies.append(f"{item['url']} ({cid})")
        seen.add(cid)
    seconds = float(stats.get("elapsed_time_seconds", 0.0))
    responses = int(stats.get("response_received_count", 0))
    out: dict[str, Any] = {
        "requests": int(stats.get("downloader/request_count", 0)),
        "responses": responses,
        "stored": len(ids),
        "distinct": len(distinct),
        "copies": sum(1 for i in ids if i is not None) - len(distinct),
        "unknown": sum(1 for i in ids if i is None),  # stored pages that are no page of the site (none expected)
        "not_found": int(stats.get("downloader/response_status_count/404", 0)),
        "dropped": int(stats.get("simhash/dropped", 0)),
        "seconds": seconds,
        "rate": responses / seconds if seconds else 0.0,
        "distinct_rate": len(distinct) / seconds if seconds else 0.0,
        "cpu_ms": 1000 * float(stats.get("bench/cpu_seconds", 0.0)) / responses if responses else 0.0,
        "wall": float(stats["bench/wall_seconds"]),
    }
    out |= {k: v for k, v in sorted(stats.items()) if k.startswith(AVOIDED) and isinstance(v, (int, float))}
    out["copy_examples"] = copies[:20]
    out["content_ids"] = distinct
    return out


def bench_site(site: GeneratedSite, workdir: Path, repeat: int, recrawl: bool, log: Any = print) -> dict[str, Any]:
    """The three modes (and the recrawls) ``repeat`` times over ``site``: each mode's runs and medians, and the
    distinct pages each mode lost against the filter alone of the same repeat."""
    modes = list(MODES) + ([FILTER + RECRAWL, AVOID + RECRAWL] if recrawl else [])
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    lost: dict[str, Counter[str]] = {m: Counter() for m in modes}
    with site.serve():
        for i in range(repeat):
            order = list(MODES)[i % 3 :] + list(MODES)[: i % 3]  # alternated: drift hits every mode
            for mode in order:
                index = workdir / f"index-{i}-{mode.replace(' ', '').replace('+', '-')}"
                run = summarize(site, crawl(site, workdir / "crawl", MODES[mode], index))
                runs[mode].append(run)
                log(_progress(site, mode, i, repeat, run))
                if recrawl and mode != NO_FILTER:  # again, over the index of the first crawl
                    again = summarize(site, crawl(site, workdir / "crawl", MODES[mode], index))
                    runs[mode + RECRAWL].append(again)
                    log(_progress(site, mode + RECRAWL, i, repeat, again))
            base = set(runs[FILTER][-1]["content_ids"])
            for mode in (NO_FILTER, AVOID):
                lost[mode].update(base - set(runs[mode][-1]["content_ids"]))
    out: dict[str, Any] = {}
    for mode in modes:
        medians = median_of([{k: v for k, v in r.items() if k != "content_ids"} for r in runs[mode]])
        out[mode] = {
            **medians,
            "lost": dict(sorted(lost[mode].items())) if mode in (NO_FILTER, AVOID) else None,
            "runs": runs[mode],
        }
    return out


def _progress(site: GeneratedSite, mode: str, i: int, repeat: int, run: dict[str, Any]) -> str:
    avoided = run.get(AVOIDED, sum(v for k, v in run.items() if k.startswith(AVOIDED + "/")))
    return (
        f"  {site.name} {i + 1}/{repeat}, {mode}: {run['requests']} requests, {run['stored']} stored, "
        f"{run['distinct']}/{len(site.distinct)} distinct, {run['seconds']:.1f} s ({run['rate']:.0f}/s)"
        + (f", avoided {avoided}" if any(k.startswith(AVOIDED) for k in run) else "")
    )


# --- the report -----------------------------------------------------------------------------------------


def report_site(name: str, r: dict[str, Any], repeat: int) -> Iterator[str]:
    yield ""
    yield (
        f"{name}: {r['distinct_pages']} distinct pages, {r['urls']} URLs reachable without a filter "
        f"(articles {r['articles']}, seed {r['seed']}); medians of {repeat}"
    )
    head = (
        f"{'mode':<32}{'requests':>9}{'responses':>10}{'stored':>8}{'distinct':>10}{'lost':>6}{'copies':>8}"
        f"{'404':>5}{'crawl s':>9}{'resp/s':>8}{'dist/s':>8}{'CPU ms/resp':>12}{'vs filter':>10}"
    )
    yield head
    base = r["modes"][FILTER]["requests"]
    for mode, c in r["modes"].items():
        lost = "-" if c["lost"] is None else str(len(c["lost"]))
        share = f"{c['requests'] / base:.2f}x" if base else "-"
        yield (
            f"{mode:<32}{c['requests']:>9.0f}{c['responses']:>10.0f}{c['stored']:>8.0f}"
            f"{c['distinct']:>6.0f}/{r['distinct_pages']:<3}{lost:>6}{c['copies']:>8.0f}{c['not_found']:>5.0f}"
            f"{c['seconds']:>9.1f}{c['rate']:>8.0f}{c['distinct_rate']:>8.1f}{c['cpu_ms']:>12.2f}{share:>10}"
        )
    for mode, c in r["modes"].items():
        avoided = {k: v for k, v in c.items() if k.startswith(AVOIDED)}
        if avoided:
            yield f"  {mode}: " + ", ".join(f"{k} {v:g}" for k, v in avoided.items())
    if not any(k.startswith(AVOIDED) for c in r["modes"].values() for k in c):
        yield f"  no {AVOIDED}/... stats in any crawl"
    for mode, c in r["modes"].items():
        if mode != NO_FILTER and c["copy_examples"]:
            yield f"  stored copies by {mode} (first run): " + ", ".join(c["copy_examples"][:3])
    for mode, c in r["modes"].items():
        for cid, times in (c["lost"] or {}).items():
            yield f"  lost by {mode}: {cid} ({r['canonical'].get(cid, '?')}), in {times} of {repeat} repeats"
    yield (
        "  (requests: downloader/request_count, robots.txt included; distinct: distinct pages stored, of all; "
        "lost: distinct pages the filter alone stored and this mode did not; copies: stored pages whose distinct "
        "page was already stored; dist/s: distinct pages stored per crawl second; CPU ms/resp: CPU of the crawl's "
        "process tree per response; vs filter: requests / the filter alone's)"
    )


async def _observe_all(avoider: Any, decisions: list[Any], requests: list[Any]) -> None:
    for decision, request in zip(decisions, requests, strict=True):
        await avoider.observed(decision, request)


def overhead(site: GeneratedSite, rounds: int = 5) -> dict[str, float]:
    """The avoider's own CPU time, in the process, on the URLs a crawl without a filter reaches on *site* (each
    URL's page fingerprinted by the model, the decision made by a memory index): microseconds per request checked
    (``Avoider.check``) and per response observed (``Avoider.observed``), medians over *rounds* passes."""
    import asyncio

    from scrapy import Request
    from scrapy.statscollectors import MemoryStatsCollector
    from scrapy.utils.test import get_crawler

    from simhash_filter.config import DEFAULTS
    from simhash_filter.crawl.avoid import Avoider
    from simhash_filter.crawl.decision import Decision
    from simhash_filter.crawl.stats import FilterStats
    from simhash_filter.index.backends.memory import MemoryBackend
    from simhash_filter.index.nearduplicate import NearDuplicateIndex
    from simhash_filter.index.tables import resolve_design
    from simhash_filter.model.fingerprint import Fingerprinter

    fingerprinter, k = Fingerprinter(), DEFAULTS.max_distance
    pages = [(url, fingerprinter.fingerprint(page.body)) for url, page, _ in site.walk() if page.status == 200]
    design = resolve_design(DEFAULTS.tables, 10**6)
    times: dict[str, list[float]] = {"check": [], "observed": []}
    for _ in range(rounds):
        metadata = DEFAULTS.index_metadata()
        index = NearDuplicateIndex(k, backend=MemoryBackend(k=k, design=design, metadata=metadata),
                                   metadata=metadata, min_similarity=DEFAULTS.min_similarity)  # fmt: skip
        decisions = []
        for url, fp in pages:
            if fp.value is not None:
                match = index.check_and_add(fp.value, url, fp.sketch)
                decisions.append(Decision(url, "ok", fp.value, match and match.key, match and match.distance))
        avoider = Avoider(index.backend, FilterStats(MemoryStatsCollector(get_crawler())))
        requests = [Request(d.url) for d in decisions]
        start = time.process_time()
        for request in requests:
            avoider.check(request)
        times["check"].append((time.process_time() - start) / len(requests) * 1e6)

        start = time.process_time()
        asyncio.run(_observe_all(avoider, decisions, requests))
        times["observed"].append((time.process_time() - start) / len(decisions) * 1e6)
    return {name: sorted(values)[len(values) // 2] for name, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="crawls of each mode (default: 3)")
    parser.add_argument(
        "--sites", default=",".join(SITES), help=f"sites to crawl, comma-separated (default: {','.join(SITES)})"
    )
    parser.add_argument("--articles", type=int, help="articles of each site (default: each site's own: 150, 60)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated sites (default: 7)")
    parser.add_argument("--recrawl", action="store_true", help="crawl again over each filter crawl's index")
    add_settings_option(parser)
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument(
        "--overhead", action="store_true", help="only the avoider's own CPU per request and response (no crawl)"
    )
    args = parser.parse_args(argv)
    if args.overhead:
        for name in args.sites.split(","):
            cost = overhead(SITES[name](seed=args.seed))
            print(f"{name}: {cost['check']:.1f} µs per request checked, {cost['observed']:.1f} µs per response "
                  "observed (CPU, median of 5 passes)")  # fmt: skip
        return 0
    apply_settings(parser, args.set, CRAWL_SETTINGS)
    names = [n.strip() for n in args.sites.split(",") if n.strip()]
    unknown = [n for n in names if n not in SITES]
    if unknown or args.repeat < 1:
        parser.error(f"unknown sites {unknown} (known: {', '.join(SITES)})" if unknown else "--repeat must be ≥ 1")
    start = time.perf_counter()
    result: dict[str, Any] = {
        "repeat": args.repeat,
        "seed": args.seed,
        "recrawl": args.recrawl,
        "cpus": os.cpu_count(),
        "settings": CRAWL_SETTINGS,
        "sites": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-avoid-") as tmp:
        for name in names:
            factory = SITES[name]
            site = factory(args.articles, args.seed) if args.articles else factory(seed=args.seed)
            urls = sum(1 for _ in site.walk())
            print(f"{name}: {len(site.distinct)} distinct pages, {urls} URLs reachable; crawling", flush=True)
            modes = bench_site(site, Path(tmp) / name, args.repeat, args.recrawl, lambda s: print(s, flush=True))
            result["sites"][name] = {
                "articles": site.articles,
                "seed": args.seed,
                "distinct_pages": len(site.distinct),
                "urls": urls,
                "canonical": site.distinct,
                "modes": modes,
            }
    result["seconds"] = time.perf_counter() - start
    for name, r in result["sites"].items():
        print("\n".join(report_site(name, r, args.repeat)))
    print(f"\n{sum(len(m['runs']) for r in result['sites'].values() for m in r['modes'].values())} crawls "
          f"in {result['seconds']:.0f} s")  # fmt: skip
    if args.json:
        write_json(args.json, result, indent=1, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
