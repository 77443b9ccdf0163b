"""Two Scrapyd projects with a spider of the same name keep two on-disk indexes: checked against the real Scrapyd.

Under Scrapyd every project crawls in Scrapyd's working directory, where there is no ``scrapy.cfg``; the default
index is ``.scrapy/simhash/<project>/<spider>`` there, the project being the ``SCRAPY_PROJECT`` Scrapyd sets for
each job (``simhash_filter/crawl/indexpath.py``).  Before, two projects' ``static`` spiders shared
``.scrapy/simhash/static``: the second project's first crawl found the first's pages there and kept none.

This script needs ``scrapyd`` and ``scrapyd-client`` (``scrapyd-deploy``) beside the Python that runs it, and
installs nothing itself::

    .venv/bin/pip install scrapyd scrapyd-client
    .venv/bin/python -m benchmarks.checks.scrapyd_projects          # --keep: leave the temporary directory
    .venv/bin/python -m benchmarks.checks.scrapyd_projects --old-path   # both at .scrapy/simhash/static: must FAIL

It serves two generated sites with different articles (``devsites.localsite``, articles written by
``devsites/sample.py``; each site 12 articles, a start page and 4 near-duplicate copies), writes two
Scrapy projects in a temporary directory (Scrapyd projects ``alpha`` and ``beta``; one code base: the same
package and ``BOT_NAME``, so that only Scrapyd's project name tells them apart; a spider ``static`` each;
``ADDONS`` enabling the add-on as the README shows), starts ``scrapyd`` on a free port in a working directory
of its own, deploys both with ``scrapyd-deploy``, and crawls alpha then beta (``schedule.json``, waiting on
``listjobs.json``), twice: a first crawl and a recrawl.  It prints, per project, the items and filter stats of
each crawl (from the job's feed and log) and the index directories under Scrapyd's working directory, and exits
1 with a one-line message unless each project has its own index, each first crawl kept all its distinct pages
(none lost to the other project's index) and each recrawl found its own project's pages (the index of a first
crawl holds its kept pages and the near-duplicates it stored).  ``--old-path`` points both projects'
``SIMHASH_BACKEND`` at ``.scrapy/simhash/static``, the path of earlier versions: the check must then fail (beta's
first crawl finds alpha's pages).  Scrapyd (and any crawl it runs) is stopped whatever happens.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from textwrap import dedent
from typing import Any

from benchmarks.benchlib import ROOT
from devsites import sample
from devsites.localsite import LocalSite, Page

PROJECTS = {"alpha": 101, "beta": 202}  # Scrapyd project name: the seed of its site's articles
PACKAGE = BOT_NAME = "sitecrawl"  # the same in both projects: only SCRAPY_PROJECT tells them apart
SPIDER = "static"
ARTICLES, COPIES = 12, 4
DISTINCT = ARTICLES + 1  # the articles and the start page; the copies are near-duplicates
JOB_TIMEOUT = 300.0


class Failure(Exception):
    """The check failed: the one-line message the script exits with."""


# --- the sites ---


def _html(title: str, paragraphs: list[str], links: str = "", note: str = "") -> bytes:
    body = "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>'
        f'<body><header><a href="/">Home</a></header><main><article><h1>{html.escape(title)}</h1>{note}\n{body}'
        f"</article>{links}</main><footer><p>A static test site.</p></footer></body></html>"
    ).encode()


def make_site(seed: int) -> dict[str, Page]:
    """A start page (an article of its own and links), ``ARTICLES`` articles and ``COPIES`` near-duplicates."""
    rng = random.Random(seed)
    articles = [sample.make_article(rng, "en") for _ in range(ARTICLES + 1)]
    hrefs = [f"/a/{i}" for i in range(ARTICLES)] + [f"/copy/{i}" for i in range(COPIES)]
    links = "<nav><ul>" + "".join(f'<li><a href="{h}">{h}</a></li>' for h in hrefs) + "</ul></nav>"
    site = {"/": Page(_html(articles[-1].title, articles[-1].text(), links))}
    for i, article in enumerate(articles[:ARTICLES]):
        site[f"/a/{i}"] = Page(_html(article.title, article.text(), note='<p class="views">Read 12 times</p>'))
    for i in range(COPIES):  # the same article with another counter and a print note: a near-duplicate
        note = f'<p class="views">Read {4000 + i} times</p><p class="print">Printer-friendly view</p>'
        site[f"/copy/{i}"] = Page(_html(articles[i].title, articles[i].text(), note=note))
    return site


# --- the projects ---


def write_project(directory: Path, project: str, start_url: str, scrapyd_url: str, *, old_path: bool) -> None:
    files = {
        "scrapy.cfg": f"""\
            [settings]
            default = {PACKAGE}.settings

            [deploy]
            url = {scrapyd_url}
            project = {project}
            """,
        f"{PACKAGE}/__init__.py": "",
        f"{PACKAGE}/settings.py": f"""\
            BOT_NAME = "{BOT_NAME}"
            SPIDER_MODULES = ["{PACKAGE}.spiders"]
            NEWSPIDER_MODULE = "{PACKAGE}.spiders"
            ROBOTSTXT_OBEY = False
            TELNETCONSOLE_ENABLED = False
            LOG_LEVEL = "INFO"
            ADDONS = {{"simhash_filter.SimhashAddon": 0}}
            """
        + (f'SIMHASH_BACKEND = ".scrapy/simhash/{SPIDER}"\n' if old_path else ""),
        f"{PACKAGE}/spiders/__init__.py": "",
        f"{PACKAGE}/spiders/{SPIDER}.py": f"""\
            import scrapy


            class StaticSpider(scrapy.Spider):
                name = "{SPIDER}"
                start_urls = ["{start_url}"]

                def parse(self, response):
                    yield {{"url": response.url, "title": response.css("title::text").get()}}
                    yield from response.follow_all(css="a", callback=self.parse)
            """,
        "setup.py": f"""\
            from setuptools import setup, find_packages

            setup(
                name="{project}",
                version="1.0",
                packages=find_packages(),
                entry_points={{"scrapy": ["settings = {PACKAGE}.settings"]}},
            )
            """,
    }
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text), encoding="utf-8")


# --- Scrapyd ---


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def api(base: str, endpoint: str, data: dict[str, str] | None = None, query: dict[str, str] | None = None) -> Any:
    url = f"{base}{endpoint}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with urllib.request.urlopen(url, body, timeout=30) as response:
        answer = json.load(response)
    if answer.get("status") != "ok":
        raise Failure(f"Scrapyd {endpoint} answered {answer}")
    return answer


def start_scrapyd(scrapyd: Path, workdir: Path, port: int) -> subprocess.Popen[bytes]:
    workdir.mkdir(parents=True)
    (workdir / "scrapyd.conf").write_text(
        dedent(f"""\
            [scrapyd]
            bind_address = 127.0.0.1
            http_port = {port}
            eggs_dir = eggs
            logs_dir = logs
            items_dir = items
            dbs_dir = dbs
            poll_interval = 0.5
            max_proc = 2
            """),
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    with open(workdir / "scrapyd.out", "wb") as out:
        # A session of its own: the whole group (Scrapyd and the crawls it spawned) is stopped at the end.
        proc = subprocess.Popen(
            [str(scrapyd)], cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Failure(f"scrapyd exited with status {proc.returncode}: see {workdir / 'scrapyd.out'}")
        try:
            api(base, "daemonstatus.json")
            return proc
        except OSError:
            time.sleep(0.3)
    raise Failure("scrapyd did not answer daemonstatus.json within 60 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with contextlib.suppress(ProcessLookupError):  # crawls Scrapyd spawned, should any outlive it
        os.killpg(proc.pid, signal.SIGKILL)


def crawl(base: str, workdir: Path, project: str) -> dict[str, Any]:
    """Schedule ``project``'s spider, wait for the job to finish, and read its feed and log."""
    job = api(base, "schedule.json", {"project": project, "spider": SPIDER})["jobid"]
    deadline = time.monotonic() + JOB_TIMEOUT
    while True:
        jobs = api(base, "listjobs.json", query={"project": project})
        if any(j["id"] == job for j in jobs["finished"]):
            break
        if time.monotonic() > deadline:
            raise Failure(f"{project}'s job {job} did not finish within {JOB_TIMEOUT:.0f} s")
        time.sleep(0.5)
    log = (workdir / "logs" / project / SPIDER / f"{job}.log").read_text(encoding="utf-8", errors="replace")
    feed = workdir / "items" / project / SPIDER / f"{job}.jl"
    items = len(feed.read_text(encoding="utf-8").splitlines()) if feed.exists() else 0
    stats = {k: int(v) for k, v in re.findall(r"'((?:simhash/[\w/]+)|item_scraped_count)': (\d+)", log)}
    held = re.search(r"simhash: the index at (\S+) holds (\d+) pages from earlier crawls", log)
    errors = [line for line in log.splitlines() if " ERROR: " in line or "Traceback" in line]
    return {
        "job": job,
        "items": items,
        "kept": stats.get("simhash/kept", 0),
        "dropped": stats.get("simhash/dropped", 0),
        "unchanged": stats.get("simhash/unchanged", 0),
        "index_size": stats.get("simhash/index_size", 0),
        "held": (held.group(1), int(held.group(2))) if held else None,
        "errors": errors,
    }


# --- the run ---


def run(tmp: Path, *, old_path: bool = False) -> None:
    bindir = Path(sys.executable).parent
    scrapyd, deploy = bindir / "scrapyd", bindir / "scrapyd-deploy"
    if not scrapyd.exists() or not deploy.exists():
        raise Failure(f"needs scrapyd and scrapyd-deploy in {bindir}: {bindir / 'pip'} install scrapyd scrapyd-client")
    workdir, port = tmp / "scrapyd", free_port()
    base = f"http://127.0.0.1:{port}/"
    sites = [LocalSite(make_site(seed), hosts=("127.0.0.1",)) for seed in PROJECTS.values()]
    proc = None
    try:
        proc = start_scrapyd(scrapyd, workdir, port)
        for (project, _), site in zip(PROJECTS.items(), sites, strict=True):
            directory = tmp / "projects" / project
            write_project(directory, project, site.url("/"), base, old_path=old_path)
            done = subprocess.run(
                [str(deploy), "--version", "1"], cwd=directory, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise Failure(f"scrapyd-deploy of {project} failed: {(done.stderr or done.stdout).strip()[-300:]}")
        runs: dict[str, list[dict[str, Any]]] = {project: [] for project in PROJECTS}
        for _ in range(2):  # the first crawl of each project (alpha first, then beta), then a recrawl
            for project in PROJECTS:
                runs[project].append(crawl(base, workdir, project))
    finally:
        if proc is not None:
            stop(proc)
        for site in sites:
            site.close()
    report(workdir, runs)


def report(workdir: Path, runs: dict[str, list[dict[str, Any]]]) -> None:
    root = workdir / ".scrapy" / "simhash"
    print(f"Scrapyd working directory: {workdir}")
    print(f"each site: {DISTINCT} distinct pages ({ARTICLES} articles and the start page) and {COPIES} near-duplicates")
    print(f"{'project':8} {'crawl':5} {'items':>5} {'kept':>4} {'dropped':>7} {'unchanged':>9} {'index':>5}  at start")
    for project, (first, second) in runs.items():
        for n, r in enumerate((first, second), 1):
            held = f"{os.path.relpath(r['held'][0], workdir)} held {r['held'][1]}" if r["held"] else "empty"
            print(
                f"{project:8} {n:5} {r['items']:5} {r['kept']:4} {r['dropped']:7} {r['unchanged']:9} "
                f"{r['index_size']:5}  {held}"
            )
    indexes = sorted(str(p.parent.relative_to(workdir)) for p in root.rglob("CURRENT"))
    print("index directories: " + ", ".join(indexes))
    for project, crawls in runs.items():
        for n, r in enumerate(crawls, 1):
            if r["errors"]:
                raise Failure(f"{project}'s crawl {n} logged an error: {r['errors'][0].strip()[:200]}")
    for project, (first, _) in runs.items():  # the first crawls before the recrawls: the telling failure first
        if first["held"] is not None:
            raise Failure(f"{project}'s first crawl found an index of {first['held'][1]} pages at {first['held'][0]}")
        if (first["items"], first["kept"]) != (DISTINCT, DISTINCT):
            raise Failure(f"{project}'s first crawl: {first['items']} items, {first['kept']} kept, not {DISTINCT}")
    for project, (first, second) in runs.items():
        own = str(root / project / SPIDER)
        if second["held"] is None or Path(second["held"][0]).resolve() != Path(own).resolve():
            raise Failure(f"{project}'s recrawl did not find its own index at {own}: {second['held']}")
        if second["held"][1] != first["index_size"]:
            found, left = second["held"][1], first["index_size"]
            raise Failure(f"{project}'s recrawl found {found} pages, its first crawl left {left}")
    expected = [f".scrapy/simhash/{project}/{SPIDER}" for project in PROJECTS]
    if indexes != sorted(expected):
        raise Failure(f"expected the index directories {expected}, found {indexes}")
    print("OK: one index per project; each first crawl kept its site's distinct pages; each recrawl found its own")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (projects, Scrapyd's)")
    parser.add_argument(
        "--old-path", action="store_true", help="both projects at .scrapy/simhash/static, as before: must fail"
    )
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="scrapyd-projects-"))
    try:
        run(tmp, old_path=args.old_path)
    except Failure as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    assert ROOT.is_dir()
    sys.exit(main())
