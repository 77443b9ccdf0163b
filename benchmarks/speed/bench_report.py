"""Size and build time of ``simhash-filter report`` at 10k and 100k pages, and how soon Chromium shows it.

For each size, a generated sample (``devsites/sample.py``: originals, copies in another template,
ad/counter variants, one-sentence edits, mirrors; about 2.5 pages per article) goes through ``simhash-filter
dedup`` once (untimed, cached in ``--work``); then ``simhash-filter report OUTPUT --pages SAMPLE`` is timed
(wall, and CPU seconds of its process tree), ``--repeat`` times, with ``--workers`` processes and the default
``--max-pairs``.  With ``--browser``, the report is opened in headless Chromium (Debian's ``chromium``, through
Playwright): the seconds until it is rendered (``data-ready``), and until a pair of the largest cluster shows
its texts and differences.

    python -m benchmarks.speed.bench_report --pages 10000 100000 --repeat 3 --workers 2 --browser [--json OUT.json]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.benchlib import ROOT
from benchmarks.benchlib.measure import timed_run
from benchmarks.benchlib.report import make_parser, write_json
from benchmarks.speed.bench_dedup import our_command

ARTICLES_PER_1000_PAGES = 404  # devsites/sample.py's mix of variants: about 2.5 pages an article


def prepare(pages: int, work: Path) -> tuple[Path, Path]:
    """The sample of about ``pages`` pages and its dedup output (made once, kept in ``work``)."""
    sample, output = work / f"sample-{pages}.jsonl.gz", work / f"sample-{pages}.dedup.jsonl"
    if not output.exists():
        articles = max(1, pages * ARTICLES_PER_1000_PAGES // 1000)
        subprocess.run([sys.executable, "-m", "devsites.sample", "--articles", str(articles),
                        str(sample)], check=True)  # fmt: skip
        subprocess.run([*our_command(), "dedup", str(sample), "--output", str(output), "--no-progress"], check=True)
    return sample, output


def open_in_browser(report: Path) -> dict[str, float]:
    """Seconds until Chromium has rendered the report, and until a pair view shows its differences."""
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"]  # fmt: skip
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        start = time.perf_counter()
        page.goto(report.resolve().as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=120_000)
        ready = time.perf_counter() - start
        start = time.perf_counter()
        page.evaluate("location.hash = '#pair-0'")
        page.wait_for_selector("#pair .side-b ins, #pair .side-a del, #pair .side-a", timeout=60_000)
        pair = time.perf_counter() - start
        browser.close()
    return {"ready_s": round(ready, 2), "pair_s": round(pair, 2)}


def main() -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--pages", type=int, nargs="+", default=[10_000, 100_000], help="sample sizes")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--browser", action="store_true", help="also time the report's opening in Chromium")
    parser.add_argument("--work", type=Path, default=ROOT / "out" / "bench-report", help="samples and reports")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    print("| pages | clusters | pairs with texts | report size | build wall s | build CPU s | open s | pair s |")
    print("|---|---|---|---|---|---|---|---|")
    for pages in args.pages:
        sample, output = prepare(pages, args.work)
        report = args.work / f"report-{pages}.html"
        cmd = [*our_command(), "report", str(output), "--pages", str(sample), "--output", str(report),
               "--workers", str(args.workers)]  # fmt: skip
        walls, cpus, line = [], [], ""
        for _ in range(args.repeat):
            proc, used = timed_run(cmd, capture_output=True, text=True, check=True)
            walls.append(used.wall)
            cpus.append(used.cpu)
            line = proc.stderr.strip().splitlines()[-1]
        row: dict[str, Any] = {
            "pages": pages,
            "summary": line,
            "bytes": report.stat().st_size,
            "wall_s": round(statistics.median(walls), 2),
            "cpu_s": round(statistics.median(cpus), 2),
        }
        if args.browser:
            row.update(open_in_browser(report))
        results.append(row)
        clusters = line.split(" clusters")[0].rsplit(" ", 1)[-1]
        detailed = line.split(" pairs with texts")[0].rsplit(" ", 1)[-1]
        print(f"| {line.split(' pages')[0].split()[-1]} | {clusters} | {detailed} | {row['bytes'] / 1e6:.1f} MB "
              f"| {row['wall_s']:.1f} | {row['cpu_s']:.1f} | {row.get('ready_s', '-')} | {row.get('pair_s', '-')} |",
              flush=True)  # fmt: skip
    if args.json:
        write_json(args.json, results, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
