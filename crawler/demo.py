"""The demo: a generated website with near-duplicates, crawled by ``scrapy crawl site``, and a report.

    python -m crawler.demo [--articles 120] [--seed 7] [--action drop|flag] [--out out/demo]

The site is :mod:`devsites.demosite`'s (every word generated in :mod:`devsites.sample`: English and Chinese
articles in eight site templates), served on this machine only: originals, copies in another
site's template, ad/visit-counter/session-id variants (``?utm_source=...``) and one-sentence edits on
http://127.0.0.1:PORT/, and mirrors (the same pages in another site's chrome) on
http://127.0.0.2:PORT/ (the same port), next to pages that must not stop a crawl (an image, JSON, an
empty page, an image-only page, redirects, a path robots.txt forbids).  Then ``scrapy crawl site``
runs over both hosts in a subprocess with ``SIMHASH_DEBUG``, and the report says what was kept, what
was dropped (near-duplicate of which page, at which distance) and whether that was right: the
generator knows which pages tell the same article.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from devsites.demosite import MIRROR, Truth, build_site, key_of
from devsites.localsite import HOSTS, LocalSite
from simhash_filter.index.bound import DEFAULT_DUPLICATES

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("original", "mirror", "copy", "ads", "edit")
_DROPPED = re.compile(r"simhash: dropped (?P<url>\S+): near-duplicate of (?P<of>\S+) \(distance (?P<distance>\d+)")
_SUMMARY = re.compile(r"simhash: (?P<checked>\d+) pages checked: .*; index size (?P<size>\d+);.*")


def crawl(server: LocalSite, out: Path, action: str) -> tuple[list[dict], str, float]:
    """``scrapy crawl site`` over both hosts; the stored items, the log and the crawl's seconds."""
    out.mkdir(parents=True, exist_ok=True)
    feed, log = out / "pages.jsonl", out / "crawl.log"
    log.unlink(missing_ok=True)  # Scrapy appends to LOG_FILE (LOG_FILE_APPEND=False would cut its first lines)
    index = out / "index"  # a fresh on-disk index: every demo starts from nothing
    shutil.rmtree(index, ignore_errors=True)
    starts = ",".join(server.url("/", host) for host in HOSTS)
    cmd = [
        sys.executable, "-m", "scrapy.cmdline", "crawl", "site", "-a", f"start_urls={starts}",
        "-O", f"{feed}:jsonlines", "-s", f"SIMHASH_ACTION={action}", "-s", "SIMHASH_DEBUG=True",
        "-s", f"LOG_FILE={log}", "-s", "LOG_LEVEL=DEBUG", "-s", f"SIMHASH_BACKEND={index}",
    ]  # fmt: skip
    if action == "flag":  # every page stored with its HTML: the feed the report reads
        cmd += ["-a", "store=both"]
    print("$ scrapy crawl site -a start_urls=" + starts + f" -O {feed} -s SIMHASH_ACTION={action} ...", flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    text = log.read_text(encoding="utf-8") if log.exists() else ""
    if proc.returncode != 0:
        raise SystemExit(f"the crawl failed ({proc.returncode}):\n{proc.stderr[-3000:]}{text[-3000:]}")
    items = [json.loads(line) for line in feed.read_text(encoding="utf-8").splitlines() if line.strip()]
    return items, text, seconds


def report(items: list[dict], log: str, truth: dict[str, Truth], action: str) -> list[str]:
    """What was kept, what was dropped (or flagged) and why, judged against the generator's truth."""
    if action == "drop":
        near = {m["url"]: (m["of"], int(m["distance"])) for m in _DROPPED.finditer(log)}
        kept = [key_of(i["url"]) for i in items]
    else:
        near = {i["url"]: (i["duplicate_of"], i["distance"]) for i in items if i.get("duplicate_of")}
        kept = [key_of(i["url"]) for i in items if not i.get("duplicate_of")]
    lines: list[str] = []
    summary = _SUMMARY.search(log)
    if summary:
        lines += [summary.group(0), *_index_size_note(int(summary["checked"]), int(summary["size"])), ""]
    kept_groups = Counter(truth[k].group for k in kept if k in truth)
    groups = {t.group for t in truth.values()}
    # per variant: pages, kept as the first page of their article, rightly near-dup, missed, wrong
    table: dict[str, Counter[str]] = defaultdict(Counter)
    wrong: list[str] = []
    missed: list[str] = []
    seen_first: set[str] = set()
    for k in kept:
        t = truth.get(k)
        if t is None:
            continue
        cell = table[t.variant]
        cell["pages"] += 1
        if t.group in seen_first:
            cell["missed"] += 1
            missed.append(f"  {t.variant:<8} {k} (article {t.group} was already kept)")
        else:
            seen_first.add(t.group)
            cell["kept first"] += 1
    examples: dict[str, list[str]] = defaultdict(list)
    for url, (of, distance) in near.items():
        t, t_of = truth.get(key_of(url)), truth.get(key_of(of))
        if t is None:
            continue
        cell = table[t.variant]
        cell["pages"] += 1
        line = f"  {t.variant:<8} {key_of(url)}\n           ≈ {key_of(of)} (distance {distance})"
        if t_of is not None and t_of.group == t.group:
            cell["near-dup"] += 1
            examples[t.variant].append(line)
        else:
            cell["wrong"] += 1
            wrong.append(line + "  <- a different article!")
    word = "dropped" if action == "drop" else "flagged"
    unchecked = sum(1 for i in items if not i.get("fingerprint"))
    why = _stored_pages(len(kept) - unchecked, unchecked)
    near_words = f"; dropped {len(near)}" if action == "drop" else f", and {len(near)} flagged"
    lines.append(
        f"Stored {len(items)} pages: {why}{near_words} near-duplicates. Of {len(groups)} articles, "
        f"{sum(1 for g in groups if kept_groups[g] == 1)} are stored exactly once"
        + (" (the others also as a near-duplicate that was missed)." if action == "drop" else " unflagged.")
    )
    lines.append("")
    lines.append(f"{'variant':<10}{'pages':>7}{'kept (first)':>14}{f'{word} ok':>12}{'missed':>8}{'wrong':>7}")
    for variant in VARIANTS:
        c = table.get(variant, Counter())
        lines.append(
            f"{variant:<10}{c['pages']:>7}{c['kept first']:>14}{c['near-dup']:>12}{c['missed']:>8}{c['wrong']:>7}"
        )
    lines.append("")
    lines.append(f"Examples of {word} pages (why: the page each one nearly duplicates, and the distance):")
    for variant in VARIANTS[1:]:
        lines += examples[variant][:2]
    lines.append(f"Wrongly {word} (false positives): {len(wrong)}")
    lines += wrong[:5]
    lines.append(f"Near-duplicates stored anyway (missed): {len(missed)}")
    lines += missed[:5]
    return lines


def _stored_pages(kept: int, unchecked: int) -> str:
    """Why the feed holds more pages than the filter kept: the pages it could not check are let through too."""
    if not unchecked:
        return f"the {kept} the filter kept"
    return f"the {kept} the filter kept and {unchecked} it let through unchecked (empty, or too little text)"


def _index_size_note(checked: int, size: int) -> list[str]:
    """Why the index holds fewer pages than were checked, when it does (the demo's index starts empty)."""
    if size >= checked:
        return [f"(Index size {size}: every checked page is stored, none had {DEFAULT_DUPLICATES} near-duplicates "
                "stored already.)"]  # fmt: skip
    return [
        f"(The index holds {size} of the {checked} checked pages: a page is stored unless {DEFAULT_DUPLICATES} "
        "near-duplicates of it are stored already, so a flood's copies beyond that many are checked, not stored.)"
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--articles", type=int, default=120, help="distinct articles (default: 120)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated site (default: 7)")
    parser.add_argument("--action", choices=("drop", "flag"), default="drop", help="SIMHASH_ACTION (default: drop)")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "demo", help="feed and log (default: out/demo)")
    args = parser.parse_args(argv)
    site, truth = build_site(args.articles, args.seed)
    variants = Counter(t.variant for t in truth.values())
    print(
        f"Generated {len(truth)} article pages of {args.articles} articles ("
        + ", ".join(f"{variants[v]} {v}" for v in VARIANTS)
        + f") and {len(site) - len(truth)} other pages.",
        flush=True,
    )
    with LocalSite(site) as server:
        print(f"Serving them on {server.url('/')} and {server.url('/', MIRROR)} (mirrors).", flush=True)
        items, log, seconds = crawl(server, args.out, args.action)
    print(f"Crawled in {seconds:.1f} s. Feed: {args.out / 'pages.jsonl'}, log: {args.out / 'crawl.log'}\n")
    print("\n".join(report(items, log, truth, args.action)))
    if args.action == "flag":
        html = args.out / "pages.report.html"
        cmd = [sys.executable, "-m", "simhash_filter", "report", str(args.out / "pages.jsonl"), "--output", str(html)]
        print(f"\n$ simhash-filter report {args.out / 'pages.jsonl'} --output {html}", flush=True)
        subprocess.run(cmd, check=True)
        print(f"Open {html} in a browser: the clusters, each pair's differences, the hosts, the skipped pages.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
