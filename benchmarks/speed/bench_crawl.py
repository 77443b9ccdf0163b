"""The crawl benchmark (issue 3): what the filter costs in a real crawl, and how it does on a mirror pair.

A local site of ``--pages`` real-size pages is served on loopback: the first N *original* pages of the
public near-duplicate set (``../shared/datasets/neardup-public``, stream order, each page's own HTML
at ``/<host><path>`` of its URL, so that its relative links keep working) when that directory is there,
else the generated demo articles (``devsites/sample.py``, as in ``crawler.demo``) padded to a real
size like ``bench_crawl_threads.py`` does.  The start page ``/`` links every page (one sitemap: paginated
index pages are near-duplicates of each other to the filter, which then drops them in a crawl and loses
the pages only they link); links to pages of the same site that are not in the set point at the page
itself (a crawl would only meet 404s there).  Originals only: the crawls with and without the filter
fetch and parse the same pages (but for the few the filter takes for near-duplicates and drops), so the
difference is the filter's own work.

1. **Rate.**  ``scrapy crawl site -a start_urls=http://127.0.0.1:PORT/`` in a subprocess with the filter
   off (``SIMHASH_ENABLED=False``) and on (the defaults, with ``SIMHASH_BACKEND=--backend``), alternated
   off/on ``--repeat`` times: median pages/s of each (HTML pages / the crawl's ``elapsed_time_seconds``)
   and their ratio (target: on ≥ 90 % of off).  The CPU time per page the filter adds, twice: its own
   account (``simhash/fingerprint_seconds``, and the index's part of ``simhash/reactor_seconds``; wall
   time in the reactor thread) and the crawl process's CPU time (user + sys) per page, on minus off,
   while crawling (spider opened to engine stopped) and for the whole process (start-up included, and
   the CPU time of its worker processes, if any).  ``--processes 0,1,2`` adds crawls with the filter on and
   ``SIMHASH_PROCESSES`` = each value, alternated with the others (``processes=N`` in the report).
   Settings: ``CONCURRENT_REQUESTS`` and ``CONCURRENT_REQUESTS_PER_DOMAIN`` 16, ``DOWNLOAD_DELAY=0``,
   no AutoThrottle, ``LOG_LEVEL=INFO``, robots.txt obeyed (the server answers it at once).
2. **Mirror accuracy.**  The same pages on http://127.0.0.1:PORT/ and their *twins* on
   http://127.0.0.2:PORT/ (same paths): each page served again by one of five mirrors (seeded: a
   verbatim copy with a one-line footer, a verbatim copy with the mirror's banner and footer, a re-skin
   that drops the page's own header/nav/footer/sidebars for its own header/nav/breadcrumbs/footer,
   an old table layout with a related-pages column and a visit counter, a portal with sidebars, ads and
   share/comment text; the chrome's text is written here and names other pages of the set), 30 % of them
   with small content edits, and 15 % edited word by word until their Jaccard falls just under 0.9 (when
   it was above).  Both hosts are crawled once with ``SIMHASH_ACTION=flag``.  Ground truth from the
   served pages: visible text by lxml (body without script/style/noscript/template/iframe, NFKC,
   lower-case), English word 3-shingles, Chinese character 4-grams (the public set's rule); a twin pair
   is *near-identical* when its Jaccard is ≥ 0.9.  Reported: the share of near-identical twin pairs of
   which one page is flagged rightly (target ≥ 97 %), and the share of flags that are wrong by the public
   set's rule (target ≤ 0.5 %): a flag is right when its page and ``duplicate_of`` tell the same page of
   the set (a page and its twin: the generator's label, like the public set's variant labels), or are a
   true pair in the public set's labels; otherwise it is wrong under Jaccard 0.5, ambiguous from 0.5 to
   0.9 (reported beside it) and right from 0.9.  The strict rule (right only at Jaccard ≥ 0.9, so a twin
   flagged at J < 0.9 is wrong) is reported too.

Output: a table on stdout, and with ``--json PATH`` the numbers as JSON.

    python -m benchmarks.speed.bench_crawl [--pages 2000] [--repeat 3] [--backend memory://] [--processes 0,1]
                                     [-s NAME=VALUE ...] [--json PATH]
    python -m benchmarks.speed.bench_crawl --pages 60 --repeat 1 --json out/bench_crawl.json   # a quick smoke run
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# benchmarks/ (benchlib) also when this file is loaded by its path, as tests/test_bench_crawl.py does
from benchmarks.benchlib.crawl import crawl_site, html_pages
from benchmarks.benchlib.data import PUBLIC_SET, Corpus, Source, load_public
from benchmarks.benchlib.measure import median_by
from benchmarks.benchlib.mirrors import EDIT_KINDS, MIRROR_PAGES, MIRRORS, Twin, TwinMaker
from benchmarks.benchlib.report import add_settings_option, apply_settings, make_parser, pct, write_json
from benchmarks.benchlib.site import MAIN, MIRROR, pad, relink, sitemap, title_of
from benchmarks.benchlib.text import DISTINCT, NEAR_IDENTICAL, jaccard, language, shingles, visible_text
from devsites.demosite import key_of
from devsites.localsite import HOSTS, LocalSite, Page
from devsites.sample import sample

TARGET_RATIO, TARGET_FLAGGED, TARGET_WRONG = 0.90, 0.97, 0.005
CRAWL_SETTINGS = {
    "CONCURRENT_REQUESTS": "16",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "16",
    "DOWNLOAD_DELAY": "0",
    "AUTOTHROTTLE_ENABLED": "False",
    "LOG_LEVEL": "INFO",
}


# --- the pages and their ground truth -------------------------------------------------------------------


def load_demo(n: int, page_kb: int = 6) -> Corpus:
    """``n`` generated articles (the demo site's generator), padded with ``page_kb`` KiB like real pages."""
    rows = [r for r in sample(n, seed=7) if r["variant"] == "original"]
    rng = random.Random(1)
    sources = [
        Source(row["url"], pad(row["html"], rng, page_kb), row["lang"], f"demo-{i}") for i, row in enumerate(rows[:n])
    ]
    return Corpus(f"generated demo articles (devsites/sample.py), padded by {page_kb} KiB", sources)


class Truth:
    """The served pages' ground truth: which page of the set each key tells, and pairwise Jaccard."""

    def __init__(
        self, site: dict[str, Page], label_of: dict[str, str], lang_of: dict[str, str], true_pairs: set[frozenset[str]]
    ) -> None:
        self.site = site
        self.label_of = label_of
        self.lang_of = lang_of
        self.true_pairs = true_pairs
        self._text: dict[str, str] = {}
        self._shingles: dict[tuple[str, str], frozenset[str]] = {}

    def text(self, key: str) -> str:
        """The visible text of the page served at ``key`` (host + path; empty if nothing is served there)."""
        if key not in self._text:
            page = self.site.get(key) or self.site.get(key.removeprefix(MAIN).removeprefix(MIRROR))
            self._text[key] = visible_text(page.body) if page and page.status == 200 else ""
        return self._text[key]

    def shingles(self, key: str, lang: str) -> frozenset[str]:
        if (key, lang) not in self._shingles:
            self._shingles[key, lang] = shingles(self.text(key), lang)
        return self._shingles[key, lang]

    def jaccard(self, a: str, b: str) -> float:
        """Jaccard of the two pages' shingles, by the language of the set's page (else of ``a``'s text)."""
        lang = self.lang_of.get(a) or language(self.text(a))
        return jaccard(self.shingles(a, lang), self.shingles(b, lang))

    def labelled(self, a: str, b: str) -> bool:
        """The same page of the set (a page and its twin), or a true pair in the set's labels."""
        la, lb = self.label_of.get(a), self.label_of.get(b)
        return la is not None and lb is not None and (la == lb or frozenset((la, lb)) in self.true_pairs)


def build(corpus: Corpus) -> tuple[dict[str, Page], Truth, list[tuple[str, str, Twin]], list[int]]:
    """The site on both hosts, its ground truth, the (page, twin) key pairs and the pages' sizes."""
    sources = corpus.sources
    paths = {s.path for s in sources}
    pages = {s.path: relink(s.html, s.path, paths) for s in sources}
    site: dict[str, Page] = {"/robots.txt": Page(b"User-agent: *\nDisallow: /private/\n", content_type="text/plain")}
    label_of: dict[str, str] = {}
    lang_of: dict[str, str] = {}
    for s in sources:
        site[f"{MAIN}{s.path}"] = Page(pages[s.path].encode("utf-8"))
    maker = TwinMaker(sources)
    pairs = []
    for s in sources:
        twin = maker.make(s, pages[s.path])
        site[f"{MIRROR}{s.path}"] = Page(twin.html.encode("utf-8"))
        a, b = key_of(f"http://{MAIN}{s.path}"), key_of(f"http://{MIRROR}{s.path}")
        for key in (a, b):
            label_of[key], lang_of[key] = s.label, s.lang
        pairs.append((a, b, twin))
    entries = [(s.path, title_of(s.html, s.path)) for s in sources]
    site[f"{MAIN}/"] = sitemap("All pages", entries)
    site[f"{MIRROR}/"] = sitemap("Mirror contents", entries)
    for path, text in MIRROR_PAGES.items():
        site[f"{MIRROR}{path}"] = Page(f"<html><body><h1>{path[1:-5].title()}</h1><p>{text}</p></body></html>".encode())
    sizes = [len(site[f"{MAIN}{s.path}"].body) for s in sources]
    return site, Truth(site, label_of, lang_of, corpus.true_pairs), pairs, sizes


# --- crawling -------------------------------------------------------------------------------------------


def crawl(workdir: Path, starts: list[str], settings: dict[str, str]) -> dict[str, Any]:
    """One ``scrapy crawl site`` with :data:`CRAWL_SETTINGS` and ``settings``: its stats, with the crawl
    process's CPU time while crawling (``bench/crawl_cpu_seconds``) and :func:`benchlib.crawl.crawl_site`'s."""
    return crawl_site(workdir, starts, {**CRAWL_SETTINGS, **settings}, extension="BenchCpu")


@dataclass
class Run:
    """The numbers of one rate crawl."""

    pages: int
    seconds: float
    crawl_cpu: float
    process_cpu: float
    fingerprint: float
    reactor: float
    index: float
    checked: int
    dropped: int
    not_found: int
    in_reactor: int  # pages fingerprinted in the reactor thread while worker processes started
    worker_cpu: float  # CPU time of the crawl process after the engine stopped (exit), and of its worker processes
    server_cpu: float  # CPU time of the local site's server (this process) during the crawl
    other_cpu: float  # CPU time of the machine's other processes during the crawl
    wall: float  # the crawl's subprocess, start to exit

    @classmethod
    def of(cls, stats: dict[str, Any]) -> Run:
        return cls(
            pages=html_pages(stats),
            seconds=float(stats["elapsed_time_seconds"]),
            crawl_cpu=float(stats["bench/crawl_cpu_seconds"]),
            process_cpu=float(stats["bench/process_cpu_seconds"]),
            fingerprint=float(stats.get("simhash/fingerprint_seconds", 0.0)),
            reactor=float(stats.get("simhash/reactor_seconds", 0.0)),
            # the index checks in the reactor thread (before simhash/index_seconds: all of it but fingerprinting)
            index=float(
                stats.get("simhash/index_seconds")
                or stats.get("simhash/reactor_seconds", 0.0) - stats.get("simhash/fingerprint_seconds", 0.0)
            ),
            checked=int(stats.get("simhash/checked", 0)),
            dropped=int(stats.get("simhash/dropped", 0)),
            not_found=int(stats.get("downloader/response_status_count/404", 0)),
            in_reactor=int(stats.get("simhash/fingerprinted_in_reactor", 0)),
            worker_cpu=max(0.0, float(stats["bench/process_cpu_seconds"]) - float(stats["bench/self_cpu_seconds"])),
            server_cpu=float(stats["bench/server_cpu_seconds"]),
            other_cpu=float(stats["bench/other_cpu_seconds"]),
            wall=float(stats["bench/wall_seconds"]),
        )

    @property
    def rate(self) -> float:
        return self.pages / self.seconds

    def per_page_ms(self, seconds: float) -> float:
        return 1000 * seconds / self.pages if self.pages else 0.0


def rate_benchmark(
    server: LocalSite, workdir: Path, repeat: int, backend: str, processes: list[int] | None = None
) -> dict[str, Any]:
    start = [server.url("/", MAIN)]
    configs = {"off": {"SIMHASH_ENABLED": "False"}, "on": {"SIMHASH_BACKEND": backend}}
    for n in processes or []:
        configs[f"processes={n}"] = {"SIMHASH_BACKEND": backend, "SIMHASH_PROCESSES": str(n)}
    runs: dict[str, list[Run]] = {name: [] for name in configs}
    for i in range(repeat):
        for name, settings in configs.items():  # alternated, so that drift hits both
            run = Run.of(crawl(workdir, start, settings))
            runs[name].append(run)
            print(
                f"  crawl {i + 1}/{repeat}, filter {name}: {run.pages} pages in {run.seconds:.2f} s "
                f"({run.rate:.0f} pages/s), CPU {run.per_page_ms(run.crawl_cpu):.2f} ms/page; "
                f"other processes {run.other_cpu / run.wall:.2f} CPUs",
                flush=True,
            )
    out: dict[str, Any] = {}
    for name, rs in runs.items():
        out[name] = {
            "pages": median_by(rs, lambda r: r.pages),
            "seconds": median_by(rs, lambda r: r.seconds),
            "pages_per_s": median_by(rs, lambda r: r.rate),
            "crawl_cpu_ms_per_page": median_by(rs, lambda r: r.per_page_ms(r.crawl_cpu)),
            "process_cpu_ms_per_page": median_by(rs, lambda r: r.per_page_ms(r.process_cpu)),
            "not_found": median_by(rs, lambda r: r.not_found),
            "dropped": median_by(rs, lambda r: r.dropped),
            "fingerprinted_in_reactor": median_by(rs, lambda r: r.in_reactor),
            "worker_cpu_ms_per_page": median_by(rs, lambda r: r.per_page_ms(r.worker_cpu)),
            "server_cpu_ms_per_page": median_by(rs, lambda r: r.per_page_ms(r.server_cpu)),
            # CPUs busy on average while crawling: the crawl process, its workers and the site's server
            "cpus_busy": median_by(rs, lambda r: (r.process_cpu + r.server_cpu) / r.seconds),
            # CPUs the machine's other processes kept busy meanwhile (near 0 on a quiet machine)
            "other_cpus_busy": median_by(rs, lambda r: r.other_cpu / r.wall),
            "runs": [r.__dict__ | {"pages_per_s": r.rate} for r in rs],
        }
    for name, on in runs.items():
        if name == "off":
            continue
        c = out[name]
        c["ratio"] = c["pages_per_s"] / out["off"]["pages_per_s"]
        c["ratios"] = [a.rate / b.rate for a, b in zip(on, runs["off"], strict=True)]  # each on/off pair
        c["filter_ms_per_page"] = {
            "fingerprint": median_by(on, lambda r: r.per_page_ms(r.fingerprint)),
            # the reactor thread's time: the index checks, and the pages fingerprinted there
            "reactor": median_by(on, lambda r: r.per_page_ms(r.reactor)),
        }
        c["added_cpu_ms_per_page"] = {
            "crawl": c["crawl_cpu_ms_per_page"] - out["off"]["crawl_cpu_ms_per_page"],
            "process": c["process_cpu_ms_per_page"] - out["off"]["process_cpu_ms_per_page"],
        }
    out["ratio"] = out["on"]["ratio"]
    on_ms = out["on"]["filter_ms_per_page"]
    out["filter_ms_per_page"] = {
        "fingerprint": on_ms["fingerprint"],
        "index": median_by(runs["on"], lambda r: r.per_page_ms(r.index)),
        "reactor": on_ms["reactor"],
    }
    out["added_cpu_ms_per_page"] = out["on"]["added_cpu_ms_per_page"]
    out["variants"] = [name for name in configs if name not in ("off", "on")]
    return out


def mirror_benchmark(
    server: LocalSite, workdir: Path, backend: str, truth: Truth, pairs: list[tuple[str, str, Twin]]
) -> dict[str, Any]:
    starts = [server.url("/", host) for host in HOSTS]
    stats = crawl(workdir, starts, {"SIMHASH_ACTION": "flag", "SIMHASH_BACKEND": backend})
    items = stats["bench/items"]
    crawled = {key_of(i["url"]) for i in items}
    flags = {key_of(i["url"]): key_of(i["duplicate_of"]) for i in items if i.get("duplicate_of")}

    def right(a: str, b: str) -> bool:
        return truth.labelled(a, b) or truth.jaccard(a, b) >= NEAR_IDENTICAL

    bands = ((0.9, 1.01, "≥ 0.90"), (0.8, 0.9, "0.80-0.90"), (0.5, 0.8, "0.50-0.80"), (0.0, 0.5, "< 0.50"))
    by_band: dict[str, Counter[str]] = defaultdict(Counter)
    by_mirror: dict[str, Counter[str]] = defaultdict(Counter)
    by_edit: dict[str, Counter[str]] = defaultdict(Counter)
    missed: list[dict[str, Any]] = []
    for a, b, twin in pairs:
        j = truth.jaccard(a, b)
        caught = any(x in flags and right(x, flags[x]) for x in (a, b))
        band = next(name for lo, hi, name in bands if lo <= j < hi)
        for table, name in ((by_band, band), (by_mirror, twin.mirror), (by_edit, twin.edit)):
            table[name]["pairs"] += 1
            table[name]["flagged"] += caught
            if j >= NEAR_IDENTICAL:
                table[name]["near_identical"] += 1
                table[name]["near_identical_flagged"] += caught
        if j >= NEAR_IDENTICAL and not caught:
            missed.append(
                {
                    "page": a,
                    "twin": b,
                    "jaccard": round(j, 3),
                    "mirror": twin.mirror,
                    "edit": twin.edit,
                    "flag": {x: flags[x] for x in (a, b) if x in flags},
                }
            )
    near = sum(c["near_identical"] for c in by_band.values())
    near_caught = sum(c["near_identical_flagged"] for c in by_band.values())
    wrong: list[dict[str, Any]] = []
    strict_wrong: Counter[str] = Counter()
    for a, b in flags.items():
        j = truth.jaccard(a, b)
        if j < NEAR_IDENTICAL:
            strict_wrong["same page of the set" if truth.labelled(a, b) else "different pages"] += 1
        if not right(a, b):
            kind = "articles" if a in truth.label_of and b in truth.label_of else "other pages"
            wrong.append({"page": a, "duplicate_of": b, "jaccard": round(j, 3), "kind": kind})
    distinct = sum(1 for w in wrong if w["jaccard"] < DISTINCT)
    wrong_bands = Counter(next(name for lo, hi, name in bands if lo <= w["jaccard"] < hi) for w in wrong)
    return {
        "pages_crawled": len(crawled),
        "pairs": len(pairs),
        "pairs_crawled": sum(1 for a, b, _ in pairs if a in crawled and b in crawled),
        "near_identical": near,
        "near_identical_flagged": near_caught,
        "flagged_share": near_caught / near if near else None,
        "flags": len(flags),
        "wrong_flags": len(wrong),
        "wrong_share": len(wrong) / len(flags) if flags else 0.0,
        "wrong_by_jaccard": dict(wrong_bands),
        "wrong_by_kind": dict(Counter(w["kind"] for w in wrong)),
        "distinct_flags": distinct,
        "distinct_share": distinct / len(flags) if flags else 0.0,
        "strict_wrong_flags": sum(strict_wrong.values()),
        "strict_wrong_share": sum(strict_wrong.values()) / len(flags) if flags else 0.0,
        "strict_wrong_by_kind": dict(strict_wrong),
        "by_jaccard": {name: dict(by_band[name]) for _, _, name in bands},
        "by_mirror": {m.name: dict(by_mirror[m.name]) for m in MIRRORS},
        "by_edit": {k: dict(by_edit[k]) for k in EDIT_KINDS},
        "distance_histogram": {k.rsplit("/", 1)[1]: v for k, v in stats.items() if k.startswith("simhash/distance/")},
        "examples_missed": missed[:10],
        "wrong": wrong[:200],
    }


# --- the report -----------------------------------------------------------------------------------------


def report(result: dict[str, Any]) -> Iterator[str]:
    yield ""
    yield (
        f"Pages: {result['pages']} from the {result['source']}; HTML median {result['html_median_kib']:.1f} KiB "
        f"(total {result['html_total_mib']:.1f} MiB); {result['cpus']} CPUs; backend {result['backend']}"
    )
    if result.get("rate"):
        yield ""
        yield from report_rate(result["rate"], result["repeat"])
    yield ""
    yield from report_mirror(result["mirror"])


def report_rate(r: dict[str, Any], repeat: int) -> Iterator[str]:
    yield f"1. Rate: scrapy crawl site over one host, filter off/on alternated, median of {repeat}"
    yield f"{'':<12}{'pages':>7}{'crawl s':>9}{'pages/s':>9}{'CPU ms/page':>13}" + (
        f"{'with start-up':>15}{'404':>6}{'dropped':>9}"
    )
    for name in ("off", "on"):
        c = r[name]
        yield (
            f"{'filter ' + name:<12}{c['pages']:>7.0f}{c['seconds']:>9.2f}{c['pages_per_s']:>9.1f}"
            f"{c['crawl_cpu_ms_per_page']:>13.2f}{c['process_cpu_ms_per_page']:>15.2f}{c['not_found']:>6.0f}"
            f"{c['dropped'] if name == 'on' else '-':>9}"
        )
    ok = "met" if r["ratio"] >= TARGET_RATIO else "NOT met"
    yield f"on / off: {r['ratio']:.3f} (target ≥ {TARGET_RATIO:.2f}: {ok})"
    f, a = r["filter_ms_per_page"], r["added_cpu_ms_per_page"]
    in_workers = r["on"]["fingerprinted_in_reactor"] > 0 or f["reactor"] < f["fingerprint"]
    yield (
        f"CPU time the filter adds per page: {f['fingerprint']:.2f} ms fingerprinting"
        f"{' (in worker processes)' if in_workers else ''} + {f['index']:.3f} ms index; the reactor thread "
        f"{f['reactor']:.2f} ms (its own account); the crawl process: {a['crawl']:+.2f} ms while crawling, "
        f"{a['process']:+.2f} ms with start-up and workers (on - off, medians)"
    )
    if r.get("variants"):
        yield ""
        yield f"Filter on with SIMHASH_PROCESSES (alternated with the crawls above), median of {repeat}"
        yield (
            f"{'':<14}{'pages/s':>9}{'on/off':>8}{'pairs on/off':>22}{'fp ms/page':>12}{'reactor ms':>12}"
            f"{'+CPU crawl':>12}{'+CPU all':>10}{'after+wk':>9}{'server':>8}{'CPUs busy':>11}{'others':>8}"
            f"{'fp in reactor':>15}"
        )
        for name in ["off", "on", *r["variants"]]:
            c = r[name]
            f, a = c.get("filter_ms_per_page"), c.get("added_cpu_ms_per_page")
            if f is None or a is None:
                cells = f"{'':>8}{'':>22}{'':>12}{'':>12}{'':>12}{'':>10}"
            else:
                pairs = " ".join(f"{x:.2f}" for x in c["ratios"])
                cells = (
                    f"{c['ratio']:>8.3f}{pairs:>22}{f['fingerprint']:>12.2f}{f['reactor']:>12.2f}"
                    f"{a['crawl']:>+12.2f}{a['process']:>+10.2f}"
                )
            yield (
                f"{name:<14}{c['pages_per_s']:>9.1f}{cells}{c['worker_cpu_ms_per_page']:>9.2f}"
                f"{c['server_cpu_ms_per_page']:>8.2f}{c['cpus_busy']:>11.2f}{c['other_cpus_busy']:>8.2f}"
                f"{c['fingerprinted_in_reactor']:>15.0f}"
            )
        yield (
            "(ms per page, medians. +CPU crawl: the crawl process's CPU while crawling, its threads included, minus "
            "the filter-off crawl's; +CPU all: the same for the whole process, start-up and worker processes "
            "included; after+wk: the crawl process's CPU after the engine stopped, and its worker processes'; "
            "server: the local site's; CPUs busy: crawl process, "
            "workers and server together, CPU seconds per second of crawl; others: the machine's other processes)"
        )


def report_mirror(m: dict[str, Any]) -> Iterator[str]:
    yield (
        f"2. Mirror pair, SIMHASH_ACTION=flag: {m['pairs']} pages on {MAIN} and their twins on {MIRROR}; "
        f"{m['pages_crawled']} pages crawled, {m['pairs_crawled']} pairs complete"
    )
    yield (
        f"near-identical twins (visible-text Jaccard ≥ 0.9): {m['near_identical']}; flagged "
        f"{m['near_identical_flagged']} = {pct(m['flagged_share'])} (target ≥ {pct(TARGET_FLAGGED)})"
    )
    yield (
        f"flags: {m['flags']}; wrong {m['distinct_flags']} = {pct(m['distinct_share'])} (target ≤ {TARGET_WRONG:.1%}; "
        f"the public set's rule: wrong = not the same page of the set, not a true pair of its labels, "
        f"Jaccard < {DISTINCT}; {DISTINCT}-{NEAR_IDENTICAL} is ambiguous)"
    )
    yield (
        f"  unlabelled flags under Jaccard {NEAR_IDENTICAL} (ambiguous ones included): {m['wrong_flags']} = "
        f"{pct(m['wrong_share'])}"
        + (f"; by Jaccard: {m['wrong_by_jaccard']}; by pages: {m['wrong_by_kind']}" if m["wrong_by_kind"] else "")
    )
    yield (
        f"  strict rule (right only at Jaccard ≥ 0.9): wrong {m['strict_wrong_flags']} = "
        f"{pct(m['strict_wrong_share'])}: {m['strict_wrong_by_kind']}"
    )
    yield f"{'twin pairs by Jaccard':<44}{'pairs':>7}{'flagged':>9}{'share':>9}"
    for name, c in m["by_jaccard"].items():
        yield f"  {name:<42}{c.get('pairs', 0):>7}{c.get('flagged', 0):>9}{pct(_share(c)):>9}"
    yield f"{'by mirror (near-identical pairs flagged)':<44}{'pairs':>7}{'J ≥ 0.9':>9}{'flagged':>9}{'all':>9}"
    for name, c in [*m["by_mirror"].items(), *((f"edit: {k}", v) for k, v in m["by_edit"].items())]:
        share = c.get("near_identical_flagged", 0) / c["near_identical"] if c.get("near_identical") else None
        yield f"  {name:<42}{c.get('pairs', 0):>7}{c.get('near_identical', 0):>9}{pct(share):>9}{pct(_share(c)):>9}"
    for w in m["wrong"][:5]:
        yield f"  wrong: {w['page']} ≈ {w['duplicate_of']} (Jaccard {w['jaccard']})"
    for w in m["examples_missed"][:3]:
        yield f"  missed: {w['page']} / {w['twin']} (Jaccard {w['jaccard']}, {w['mirror']}, edit {w['edit']})"


def _share(c: dict[str, int]) -> float | None:
    return c.get("flagged", 0) / c["pairs"] if c.get("pairs") else None


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--pages", type=int, default=2000, help="pages of the site (default: 2000)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="off/on crawl pairs for the rate (default: 3; 0: mirror part only)"
    )
    parser.add_argument("--backend", default="memory://", help="SIMHASH_BACKEND of the crawls (default: memory://)")
    parser.add_argument(
        "--processes",
        default="",
        help="also crawl with the filter on and SIMHASH_PROCESSES set to each of these values (comma-separated)",
    )
    parser.add_argument(
        "--source",
        choices=("auto", "public", "demo"),
        default="auto",
        help=f"pages: the public set ({PUBLIC_SET}), the generated demo, or the first that exists",
    )
    add_settings_option(parser)
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    apply_settings(parser, args.set, CRAWL_SETTINGS)
    start = time.perf_counter()
    use_public = args.source == "public" or (args.source == "auto" and (PUBLIC_SET / "pages.jsonl.gz").exists())
    corpus = load_public(args.pages) if use_public else load_demo(args.pages)
    site, truth, pairs, sizes = build(corpus)
    print(
        f"{len(corpus.sources)} pages from the {corpus.name}; {len(site)} URLs served "
        f"(twins and sitemaps included); built in {time.perf_counter() - start:.1f} s",
        flush=True,
    )
    result: dict[str, Any] = {
        "source": corpus.name,
        "pages": len(corpus.sources),
        "html_median_kib": statistics.median(sizes) / 1024,
        "html_total_mib": sum(sizes) / 2**20,
        "cpus": os.cpu_count(),
        "backend": args.backend,
        "repeat": args.repeat,
        "settings": CRAWL_SETTINGS,
    }
    with tempfile.TemporaryDirectory() as tmp, LocalSite(site) as server:
        workdir = Path(tmp)
        processes = [int(n) for n in args.processes.split(",") if n.strip()]
        result["rate"] = (
            rate_benchmark(server, workdir, args.repeat, args.backend, processes) if args.repeat > 0 else None
        )
        print("  crawling both hosts with SIMHASH_ACTION=flag", flush=True)
        result["mirror"] = mirror_benchmark(server, workdir, args.backend, truth, pairs)
    result["targets"] = {
        "ratio": result["rate"]["ratio"] >= TARGET_RATIO if result["rate"] else None,
        "twins_flagged": (result["mirror"]["flagged_share"] or 0) >= TARGET_FLAGGED,
        "wrong_flags": result["mirror"]["distinct_share"] <= TARGET_WRONG,
    }
    result["seconds"] = time.perf_counter() - start
    print("\n".join(report(result)))
    if args.json:
        write_json(args.json, result, indent=1, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
