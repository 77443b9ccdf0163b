"""Real crawlers outside Scrapy calling ``simhash-filter serve`` over a local site of the demo's kind: a Crawlee
crawler from npm (``clients/crawlee``) that skips the near-duplicates the service reports, and warcprox from PyPI
with ``clients/warcprox``'s plugin, whose WARC has each near-duplicate as a revisit of the capture kept, replayed by
pywb.  Each one's decisions are ``simhash-filter dedup``'s on the pages in the order they were decided.

Node.js and npm come from ``make system`` (Debian's ``nodejs`` and ``npm``); Crawlee's packages are installed with
``npm ci`` from ``clients/crawlee/package-lock.json`` into pytest's cache, once per lockfile; warcprox and pywb into
virtualenvs of their own there.  Where one cannot be installed the test is skipped, or fails under CI.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from test_warc_output import fetch, pywb_bin, tool_bin, wayback
from warcio.archiveiterator import ArchiveIterator

from devsites.demosite import build_site
from devsites.localsite import HOSTS, LocalSite
from devsites.serve_server import REPO, Server, free_port
from simhash_filter.cli.main import main as cli

pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")

pytestmark = pytest.mark.slow
CRAWLEE = REPO / "clients" / "crawlee"
WARCPROX_REQUIREMENT = "warcprox>=2.6,<3"


def _unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _key(url: str) -> str:
    """The local site's key of *url*: host + path (with its query), percent-decoded."""
    host, _, path = url.split("://", 1)[1].partition("/")
    return f"{host.split(':', 1)[0]}/{unquote(path)}"


def _served(url: str) -> bytes:
    """The body the local site serves at *url*."""
    with urllib.request.urlopen(url, timeout=60) as answer:
        return answer.read()


def _dedup(pages: list[tuple[str, bytes]], tmp_path: Path) -> list[dict]:
    """``simhash-filter dedup``'s records for *pages* (URL, UTF-8 body) in this order."""
    source, out = tmp_path / "decided.jsonl", tmp_path / "dedup.jsonl"
    source.write_text("".join(json.dumps({"url": u, "html": b.decode("utf-8")}) + "\n" for u, b in pages), "utf-8")
    assert cli(["dedup", str(source), "--output", str(out), "--workers", "1", "--no-progress"]) == 0
    return [json.loads(line) for line in out.read_text("utf-8").splitlines()]


def _keys(records: list[dict]) -> list[tuple]:
    return [(r["url"], r["fingerprint"], r["duplicate_of"], r["distance"]) for r in records]


def crawlee_dir(cache: Path) -> Path:
    """A directory with the Crawlee example and its packages (``npm ci`` into pytest's cache, once per lockfile)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        _unavailable("Node.js and npm are not installed (make system installs Debian's nodejs and npm)")
    lock = (CRAWLEE / "package-lock.json").read_bytes()
    stamp = hashlib.sha256(lock + (CRAWLEE / "package.json").read_bytes()).hexdigest()
    target = cache / "crawlee"
    if (target / ".stamp").exists() and (target / ".stamp").read_text() == stamp:
        shutil.copy(CRAWLEE / "crawl.mjs", target)
        return target
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in ("package.json", "package-lock.json", "crawl.mjs"):
        shutil.copy(CRAWLEE / name, target)
    try:
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--cache", str(cache / "npm-cache")], cwd=target,
                       check=True, capture_output=True, timeout=900)  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        _unavailable(f"npm ci of clients/crawlee failed: {getattr(exc, 'stderr', b'') or exc}")
    (target / ".stamp").write_text(stamp)
    return target


def test_a_crawlee_crawler_skips_the_near_duplicates_the_service_reports(request, tmp_path):
    """Crawlee's CheerioCrawler crawls the demo site and its mirror, posting each page to the service: the pages the
    service calls near-duplicates are skipped (not saved, their links not followed), and its decisions are dedup's
    on the same pages in the order they were crawled."""
    folder = crawlee_dir(request.config.cache.mkdir("serve-clients"))
    site, truth = build_site(10, seed=48)
    decided = tmp_path / "decided.jsonl"
    with LocalSite(site) as web, Server("--index", "memory://", log=tmp_path / "serve.log") as service:
        env = {**os.environ, "FILTER_URL": f"http://127.0.0.1:{service.port}", "CRAWL_OUTPUT": str(decided),
               "CRAWL_CONCURRENCY": "1", "CRAWLEE_STORAGE_DIR": str(tmp_path / "storage")}  # fmt: skip
        done = subprocess.run(["node", "crawl.mjs", web.url("/"), web.url("/", host=HOSTS[1])], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        records = [json.loads(line) for line in decided.read_text("utf-8").splitlines()]
        bodies = [(r["url"], _served(r["url"])) for r in records]
    skipped = [r for r in records if r["duplicate_of"]]
    assert len(skipped) >= 5 and len(records) - len(skipped) >= 10
    assert f"near-duplicate of {skipped[0]['duplicate_of']}" in done.stdout + done.stderr
    assert _keys(records) == _keys(_dedup(bodies, tmp_path))
    crawled = {_key(r["url"]) for r in records}
    assert len(crawled & set(truth)) >= 15 and {k.split("/", 1)[0] for k in crawled & set(truth)} == set(HOSTS)


def _through(proxy: str, url: str) -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy}))
    with opener.open(url, timeout=60) as answer:
        return answer.read()


def test_warcprox_writes_near_duplicates_as_revisits_that_pywb_replays(request, tmp_path):
    """warcprox records a crawl of the demo site through ``clients/warcprox``'s plugin: each page the service calls
    a near-duplicate is a revisit record pointing at the capture kept (its URL, date and payload digest), the others
    responses; the decisions are dedup's on the same pages in order; pywb replays every revisit with the kept page's
    body."""
    cache = request.config.cache.mkdir("serve-clients")
    bin_dir = tool_bin(cache / "warcprox-venv", WARCPROX_REQUIREMENT, "warcprox")
    # warcprox refuses to fetch from 127.0.0.1 (and ::1): the site is served on 127.0.0.3 and its mirror 127.0.0.2
    built, truth = build_site(6, seed=48)
    site = {key.replace(f"{HOSTS[0]}/", "127.0.0.3/", 1) if key.startswith(f"{HOSTS[0]}/") else key: page
            for key, page in built.items()}  # fmt: skip
    articles = sorted(key.replace(f"{HOSTS[0]}/", "127.0.0.3/", 1) for key in truth)  # host + path, a fixed order
    warcs = tmp_path / "warcs"
    service = Server("--index", "memory://", log=tmp_path / "serve.log")
    with LocalSite(site, hosts=("127.0.0.3", HOSTS[1])) as web, service:
        port = free_port()
        env = {**os.environ, "FILTER_URL": f"http://127.0.0.1:{service.port}",
               "PYTHONPATH": str(REPO / "clients" / "warcprox")}  # fmt: skip
        log = (tmp_path / "warcprox.log").open("wb")
        proxy = subprocess.Popen([str(bin_dir / "warcprox"), "-p", str(port), "-b", "127.0.0.1", "-d", str(warcs),
                                  "-z", "--dedup-db-file", "/dev/null", "--certs-dir", str(tmp_path / "certs"),
                                  "-c", str(tmp_path / "ca.pem"), "--plugin", "simhash_revisits.NearDuplicateRevisits"],
                                 cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            urls = [f"http://{key.split('/', 1)[0]}:{web.port}/{quote(key.split('/', 1)[1], safe='/?=&')}"
                    for key in articles]
            for n, url in enumerate(urls):
                for _ in range(600 if n == 0 else 1):  # the first once warcprox listens
                    try:
                        _through(f"http://127.0.0.1:{port}", url)
                        break
                    except OSError:
                        assert proxy.poll() is None, (tmp_path / "warcprox.log").read_text(errors="replace")
                        time.sleep(0.1)
        finally:
            proxy.send_signal(signal.SIGTERM)
            proxy.wait(120)
            log.close()
        served = service.request("GET", "/v1/stats").json()["counters"]
        bodies = {u: _served(u) for u in urls}
    files = sorted(warcs.glob("*.warc.gz"))
    assert files, (tmp_path / "warcprox.log").read_text(errors="replace")
    responses, revisits, order = {}, {}, []
    for path in files:
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                uri = record.rec_headers.get_header("WARC-Target-URI")
                if record.rec_type == "response":
                    responses[uri] = record.rec_headers
                    order.append(uri)
                elif record.rec_type == "revisit":
                    revisits[uri] = record.rec_headers
                    order.append(uri)
    assert served["simhash/checked"] == len(urls) == len(order)
    expected = _dedup([(u, bodies[u]) for u in urls], tmp_path)
    assert {r["url"] for r in expected if r["duplicate_of"]} == set(revisits)
    assert len(revisits) >= 3
    for uri, headers in revisits.items():
        target = headers.get_header("WARC-Refers-To-Target-URI")
        assert target in responses, (uri, target)  # the capture kept, not another revisit
        assert headers.get_header("WARC-Refers-To-Date") == responses[target].get_header("WARC-Date")
        assert headers.get_header("WARC-Payload-Digest") == responses[target].get_header("WARC-Payload-Digest")
    with wayback(pywb_bin(request.config.cache.mkdir("pywb")), files[0], tmp_path / "pywb") as base:
        for uri, headers in revisits.items():
            kept = bodies[headers.get_header("WARC-Refers-To-Target-URI")]
            timestamp = "".join(c for c in headers.get_header("WARC-Date") if c.isdigit())[:14]
            # mp_: the page rewritten for replay (warcprox keeps the near-duplicate's own Content-Length in the
            # revisit, which is not the kept body's: pywb's identity mode, id_, serves the body under it)
            status, body = fetch(f"{base}{timestamp}mp_/{uri}")
            title = re.search(rb"<title>(.*?)</title>", kept, re.S)
            assert status == 200 and title is not None and title.group(0) in body, uri
