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

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawler.demo import build_site  # noqa: E402 - the repository root is added above
from crawler.localsite import HOSTS, LocalSite, Page  # noqa: E402

# A Scrapy extension (loaded from this file in the crawl subprocess) that writes the stats and the
# reactor's worst stall: a 10 ms LoopingCall measures how late it runs.
EXTENSION = """
import json, time
from scrapy import signals
from twisted.internet import task

class BenchStats:
    def __init__(self, crawler):
        self.crawler = crawler
        self.last = None
        self.worst = 0.0
        self.loop = task.LoopingCall(self.tick)

    @classmethod
    def from_crawler(cls, crawler):
        ext = cls(crawler)
        crawler.signals.connect(ext.opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.stopped, signal=signals.engine_stopped)
        return ext

    def opened(self, spider):
        self.last = time.perf_counter()
        self.loop.start(0.01, now=False)

    def tick(self):
        now = time.perf_counter()
        self.worst = max(self.worst, now - self.last - 0.01)
        self.last = now

    def stopped(self):
        if self.loop.running:
            self.loop.stop()
        stats = dict(self.crawler.stats.get_stats())
        stats["bench/worst_stall_seconds"] = self.worst
        with open(self.crawler.settings["BENCH_STATS"], "w") as f:
            json.dump(stats, f, default=str)
"""

WORDS = (
    "river market bridge council ferry orchard school library harbour station valley garden museum "
    "tram meadow season festival bakery workshop lantern quarry canal signal timber"
).split()


def padding(rng: random.Random, kb: int) -> str:
    """About ``kb`` KiB of what real pages carry around an article: link lists in a sidebar
    and inline scripts (generated words; links to fragments of the same page, so no new URLs)."""
    parts: list[str] = ['<aside class="sidebar">']
    size = 0
    n = 0
    while size < kb * 1024 * 0.6:
        n += 1
        links = "".join(
            f'<li><a href="#s{n}">{" ".join(rng.choice(WORDS) for _ in range(10))}</a></li>' for _ in range(4)
        )
        block = f'<nav class="more" id="s{n}"><h4>{rng.choice(WORDS)}</h4><ul>{links}</ul></nav>'
        parts.append(block)
        size += len(block)
    parts.append("</aside>")
    data = json.dumps([{"id": i, "tag": rng.choice(WORDS), "w": rng.random()} for i in range(int(kb * 10))])
    parts.append(f"<script>window.__state = {data[: int(kb * 1024 * 0.4)]}</script>")
    return "".join(parts)


def padded_site(articles: int, kb: int) -> dict[str, Page]:
    site, _ = build_site(articles, seed=7)
    rng = random.Random(1)
    out = {}
    for key, page in site.items():
        if page.content_type and page.content_type.startswith("text/html") and b"</body>" in page.body:
            text = page.body.decode("utf-8")
            head, _, tail = text.rpartition("</body>")
            page = Page((head + padding(rng, kb) + "</body>" + tail).encode("utf-8"))
        out[key] = page
    return out


def crawl(server: LocalSite, workdir: Path, settings: dict[str, str]) -> dict:
    stats_file = workdir / "stats.json"
    starts = ",".join(server.url("/", host) for host in HOSTS)
    cmd = [sys.executable, "-m", "scrapy.cmdline", "crawl", "site", "-a", f"start_urls={starts}",
           "-O", f"{workdir / 'items.jsonl'}:jsonlines", "-s", "LOG_LEVEL=WARNING",
           "-s", f"BENCH_STATS={stats_file}", "-s", 'EXTENSIONS={"bench_ext.BenchStats": 0}',
           "-s", "SIMHASH_BACKEND=memory://"]  # fmt: skip
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(workdir), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    return json.loads(stats_file.read_text())


def ms_per_page(pages: float):
    """A formatter of seconds as milliseconds per page."""
    return lambda seconds: f"{1000 * seconds / pages:.2f}" if pages else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    results: dict[str, list[dict]] = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as tmp, LocalSite(site) as server:
        workdir = Path(tmp)
        (workdir / "bench_ext.py").write_text(EXTENSION)
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

        def med(key: str, runs: list[dict] = runs) -> float:
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
