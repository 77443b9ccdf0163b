"""Where should the crawler fingerprint pages: in the reactor thread, in worker threads, or in worker processes?

Serves the demo site (``crawler.demo``: generated articles with near-duplicates on 127.0.0.1 and
127.0.0.2), with every page padded to a realistic size (``--page-kb``, generated comments and link
lists), and crawls it with ``scrapy crawl site`` several times: without the filter, then with the
filter in the reactor thread (``SIMHASH_PROCESSES=0``), with ``SIMHASH_THREADS`` = 1, 2 and with
``SIMHASH_PROCESSES`` = 1, 2.  Reports the crawl time, pages/s,
the fingerprinting time per page and the time per page the filter spent in the reactor thread,
and the worst reactor stall (the longest delay of a 10 ms timer while crawling), median of
``--repeat`` runs.

    python benchmarks/bench_crawl_threads.py [--articles 120] [--page-kb 60] [--repeat 3]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib.crawl import crawl_site
from benchlib.report import make_parser
from benchlib.site import padded_site

from crawler.localsite import HOSTS, LocalSite


def crawl(server: LocalSite, workdir: Path, settings: dict[str, str]) -> dict[str, Any]:
    """One crawl of both hosts with the in-memory index, the log at WARNING: its stats, with the reactor's
    worst stall (``bench/worst_stall_seconds``)."""
    starts = [server.url("/", host) for host in HOSTS]
    return crawl_site(workdir, starts, {"LOG_LEVEL": "WARNING", "SIMHASH_BACKEND": "memory://", **settings})


def ms_per_page(pages: float) -> Callable[[float], str]:
    """A formatter of seconds as milliseconds per page."""
    return lambda seconds: f"{1000 * seconds / pages:.2f}" if pages else "-"


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--articles", type=int, default=120)
    parser.add_argument("--page-kb", type=int, default=60, help="padding added to each HTML page (KiB)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    configs = {
        "no filter": {"SIMHASH_ENABLED": "False"},
        "reactor thread (SIMHASH_PROCESSES=0)": {"SIMHASH_PROCESSES": "0"},
        "1 worker thread": {"SIMHASH_THREADS": "1"},
        "2 worker threads": {"SIMHASH_THREADS": "2"},
        "1 worker process": {"SIMHASH_PROCESSES": "1"},
        "2 worker processes": {"SIMHASH_PROCESSES": "2"},
    }
    site = padded_site(args.articles, args.page_kb)
    sizes = [len(p.body) for p in site.values() if p.content_type and p.content_type.startswith("text/html")]
    print(f"{len(site)} pages, HTML median {statistics.median(sizes) / 1024:.0f} KiB; {os.cpu_count()} CPUs")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as tmp, LocalSite(site) as server:
        workdir = Path(tmp)
        for _ in range(args.repeat):
            for name, settings in configs.items():  # interleaved, so that drift hits every config
                results[name].append(crawl(server, workdir, settings))
    print(f"\nmedian of {args.repeat} crawls")
    header = (
        f"{'':<36}{'responses':>10}{'dropped':>8}{'crawl s':>8}{'pages/s':>9}{'fp ms/page':>11}"
        f"{'reactor ms/page':>16}{'worst stall ms':>15}"
    )
    print(header)
    for name, runs in results.items():

        def med(key: str, runs: list[dict[str, Any]] = runs) -> float:
            return statistics.median(float(r.get(key, 0)) for r in runs)

        elapsed = med("elapsed_time_seconds")
        responses = med("response_received_count")
        fingerprinted = statistics.median(
            r.get("simhash/checked", 0) + r.get("simhash/skipped/too_few_features", 0) for r in runs
        )
        per_page = ms_per_page(fingerprinted)
        print(
            f"{name:<36}{responses:>10.0f}{med('simhash/dropped'):>8.0f}{elapsed:>8.2f}{responses / elapsed:>9.0f}"
            f"{per_page(med('simhash/fingerprint_seconds')):>11}{per_page(med('simhash/reactor_seconds')):>16}"
            f"{1000 * med('bench/worst_stall_seconds'):>15.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
