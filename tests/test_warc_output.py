"""WARC output of a crawl (``SIMHASH_WARC``): the downloader middleware fed responses directly, then real crawls
of the local test site (``devsites/site_server.py``) in both actions, read back with warcio."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import gzip
import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from crawl_helpers import ROOT, Crawl, env, scrapy_crawl, start_urls, url_key
from filter_crawler import filter_crawler
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Response, TextResponse
from warcio.archiveiterator import ArchiveIterator

from devsites import pages as p
from devsites.localsite import Page
from devsites.site_server import GROUPS, INDEX_ERROR_PATH, SKIPPED, site
from simhash_filter import SimhashDownloaderMiddleware, __version__
from simhash_filter.crawl import warc as warc_module
from simhash_filter.crawl.middlewares import NearDuplicateResponse
from simhash_filter.crawl.warc import PROFILE

ARTICLE = p.gazette(p.RAINWATER).encode("utf-8")
COPY = p.ledger(p.RAINWATER).encode("utf-8")  # the same article in another site's template
OTHER = p.gazette(p.LIGHTHOUSE).encode("utf-8")
HTML = {"Content-Type": "text/html; charset=utf-8"}


@dataclass
class Record:
    """One WARC record read back: its type, WARC headers, HTTP status line and headers, and payload."""

    type: str
    headers: dict[str, str]
    status: str | None
    http: dict[str, str]
    payload: bytes
    version: str = "WARC/1.0"

    @property
    def uri(self) -> str:
        return self.headers["WARC-Target-URI"]


def read_warc(path: Path) -> list[Record]:
    """Every record of a WARC file, its digests checked (a mismatch raises)."""
    out = []
    with path.open("rb") as f:
        for rec in ArchiveIterator(f, check_digests="raise"):
            http = rec.http_headers
            out.append(
                Record(
                    rec.rec_type,
                    dict(rec.rec_headers.headers),
                    http.statusline if http else None,
                    dict(http.headers) if http else {},
                    rec.content_stream().read(),
                    rec.rec_headers.protocol,
                )
            )
    return out


def middleware(path: Path | None, **settings: Any) -> SimhashDownloaderMiddleware:
    """The downloader middleware of a crawler writing its WARC to ``path`` (None: ``SIMHASH_WARC`` unset)."""
    warc = {} if path is None else {"SIMHASH_WARC": str(path)}
    crawler = filter_crawler({**warc, **settings})
    return SimhashDownloaderMiddleware.from_crawler(crawler)


def respond(mw: SimhashDownloaderMiddleware, url: str, body: bytes, headers: dict | None = None, **kw: Any) -> Any:
    """Run ``process_response``; the response passed on, or the exception raised."""
    request = Request(url, meta=kw.pop("meta", {}))
    cls = kw.pop("cls", HtmlResponse)
    kw.setdefault("protocol", "HTTP/1.1")
    response = cls(url, body=body, headers=HTML if headers is None else headers, request=request, **kw)
    try:
        return asyncio.run(mw.process_response(request, response))
    except IgnoreRequest as exc:
        return exc


def stats(mw: SimhashDownloaderMiddleware) -> dict[str, Any]:
    return {k: v for k, v in mw.filter.stats.get_stats().items() if k.startswith("simhash/warc/")}


def sha1(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


# --- the middleware fed responses ------------------------------------------------------------------------


@pytest.mark.usefixtures("memory_index")
def test_kept_page_is_a_response_and_its_dropped_copy_a_revisit(tmp_path: Path):
    """A warcinfo record first; the kept page as a response record (status line, headers, body); its dropped copy
    as a WARC/1.1 revisit of the near-duplicate profile pointing at the kept record, with its payload digest (what
    replay tools look it up by), the distance, fingerprint and similarity, the HTTP headers only (no
    Content-Length: the body replayed is the kept page's) and the digest of the body it did not store."""
    path = tmp_path / "crawl.warc.gz"
    mw = middleware(path)
    assert isinstance(respond(mw, "http://a.test/rain", ARTICLE), HtmlResponse)
    dropped = respond(mw, "http://b.test/copy", COPY)
    assert isinstance(dropped, NearDuplicateResponse)
    mw.warc.close()
    info, kept, revisit = read_warc(path)
    assert info.type == "warcinfo"
    fields = dict(line.split(": ", 1) for line in info.payload.decode().splitlines())
    assert fields["software"] == f"simhash-filter {__version__}"
    assert fields["format"] == "WARC File Format 1.0"
    assert fields["simhash-model"] == mw.filter.options.config.fingerprint.model_id()
    assert fields["simhash-action"] == "drop"

    assert kept.type == "response" and kept.uri == "http://a.test/rain"
    assert kept.status == "200 OK" and kept.http["Content-Type"] == HTML["Content-Type"]
    assert kept.payload == ARTICLE and kept.headers["WARC-Payload-Digest"] == sha1(ARTICLE)
    assert len(kept.headers["WARC-Simhash-Fingerprint"]) == 16

    assert revisit.type == "revisit" and revisit.uri == "http://b.test/copy"
    h = revisit.headers
    assert h["WARC-Profile"] == PROFILE
    assert h["WARC-Refers-To-Target-URI"] == dropped.duplicate_of == "http://a.test/rain"
    assert h["WARC-Refers-To-Date"] == kept.headers["WARC-Date"]
    assert h["WARC-Refers-To"] == kept.headers["WARC-Record-ID"]
    assert int(h["WARC-Simhash-Distance"]) == dropped.distance
    assert h["WARC-Simhash-Fingerprint"] == dropped.fingerprint
    assert 0.75 <= float(h["WARC-Simhash-Similarity"]) <= 1
    assert h["WARC-Payload-Digest"] == kept.headers["WARC-Payload-Digest"] == sha1(ARTICLE)
    assert h["WARC-Simhash-Payload-Digest"] == sha1(COPY) and h["WARC-Simhash-Duplicate-Of"] == "http://a.test/rain"
    assert revisit.version == "WARC/1.1" and kept.version == "WARC/1.0"
    assert revisit.status == "200 OK" and revisit.http["Content-Type"] == HTML["Content-Type"]
    assert "Content-Length" not in revisit.http
    assert revisit.payload == b""
    assert stats(mw) == {"simhash/warc/responses": 1, "simhash/warc/revisits": 1}


@pytest.mark.usefixtures("memory_index")
def test_flagged_near_duplicate_is_a_revisit_too(tmp_path: Path):
    """In flag mode the near-duplicate goes on to the spider and is written as a revisit all the same."""
    path = tmp_path / "crawl.warc"
    mw = middleware(path, SIMHASH_ACTION="flag")
    respond(mw, "http://a.test/rain", ARTICLE)
    assert isinstance(respond(mw, "http://b.test/copy", COPY), HtmlResponse)
    mw.warc.close()
    assert path.read_bytes().startswith(b"WARC/1.0\r\n")  # not gzipped: the name does not end in .gz
    assert [(r.type, r.uri) for r in read_warc(path)[1:]] == [
        ("response", "http://a.test/rain"),
        ("revisit", "http://b.test/copy"),
    ]


@pytest.mark.usefixtures("memory_index")
def test_unchecked_html_is_a_plain_response_and_other_types_are_not_written(tmp_path: Path):
    """HTML pages let through unchecked (an HTTP error, an empty page, an exempt request) are response records
    naming why; images, JSON and text files are not written."""
    path = tmp_path / "crawl.warc.gz"
    mw = middleware(path)
    respond(mw, "http://a.test/missing", b"<html><body><h1>Not found</h1></body></html>", status=404)
    respond(mw, "http://a.test/empty", b"")
    respond(mw, "http://a.test/exempt", ARTICLE, meta={"dont_simhash": True})
    respond(mw, "http://a.test/logo.png", b"\x89PNG\r\n\x1a\n\x00\x00", {"Content-Type": "image/png"}, cls=Response)
    respond(mw, "http://a.test/api", b'{"a": 1}', {"Content-Type": "application/json"}, cls=TextResponse)
    respond(mw, "http://a.test/notes.txt", ARTICLE, {"Content-Type": "text/plain"}, cls=TextResponse)
    mw.warc.close()
    records = read_warc(path)[1:]
    assert [(r.uri.rsplit("/", 1)[1], r.headers["WARC-Simhash-Skipped"]) for r in records] == [
        ("missing", "http_status"),
        ("empty", "empty"),
        ("exempt", "dont_simhash"),
    ]
    assert records[0].status == "404 Not Found" and records[1].payload == b"" and records[2].payload == ARTICLE
    assert all(r.type == "response" and "WARC-Simhash-Fingerprint" not in r.headers for r in records)
    assert stats(mw) == {"simhash/warc/responses": 3}


@pytest.mark.usefixtures("memory_index")
def test_transfer_headers_that_no_longer_describe_the_body_are_renamed(tmp_path: Path):
    """The body is stored as Scrapy holds it (de-chunked, cut short): Transfer-Encoding and a Content-Length that
    differs are kept as X-Crawler-* headers, so that a reader gets the stored body back as it is."""
    path = tmp_path / "crawl.warc.gz"
    mw = middleware(path)
    headers = {**HTML, "Transfer-Encoding": "chunked", "Content-Length": str(2 * len(ARTICLE)), "X-Other": "kept"}
    respond(mw, "http://a.test/rain", ARTICLE, headers, protocol="h2")
    mw.warc.close()
    record = read_warc(path)[1]
    assert record.status == "200 OK" and record.payload == ARTICLE
    assert record.http["X-Crawler-Transfer-Encoding"] == "chunked" and "Transfer-Encoding" not in record.http
    assert record.http["X-Crawler-Content-Length"] == str(2 * len(ARTICLE))
    assert record.http["Content-Length"] == str(len(ARTICLE)) and record.http["X-Other"] == "kept"
    assert b"\r\n\r\nHTTP/2 200 OK\r\n" in gzip.decompress(path.read_bytes())  # Scrapy's protocol h2


class FullDisk:
    """A file that takes the first half of each write, then fails as a full disk does."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def write(self, data: Any) -> int:
        self.real.write(bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.mark.usefixtures("memory_index")
def test_failed_write_is_undone_counted_and_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    """A record that cannot be written is cut back out of the file, counted in simhash/warc/errors and logged
    once; the crawl goes on (the page passes, the copy is still dropped) and later records are written whole."""
    path = tmp_path / "crawl.warc.gz"
    mw = middleware(path)
    assert mw.warc is not None
    real = mw.warc._file
    mw.warc._file = FullDisk(real)
    with caplog.at_level(logging.INFO, logger="simhash_filter"):
        assert isinstance(respond(mw, "http://a.test/rain", ARTICLE), HtmlResponse)
        assert isinstance(respond(mw, "http://b.test/copy", COPY), NearDuplicateResponse)
    mw.warc._file = real
    respond(mw, "http://a.test/light", OTHER)
    mw.warc.close()
    records = read_warc(path)
    assert [(r.type, r.uri) for r in records[1:]] == [("response", "http://a.test/light")]
    # the copy's revisit cannot name the date of a kept record that was never written
    assert stats(mw) == {"simhash/warc/errors": 2, "simhash/warc/responses": 1}
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and "simhash/warc/errors" in errors[0].getMessage()
    assert "No space left on device" in errors[0].getMessage()


@pytest.mark.usefixtures("memory_index")
def test_refers_to_date_omitted_once_the_kept_page_is_forgotten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Kept pages' record dates are remembered up to a bound; a revisit of a forgotten one names its URL only."""
    monkeypatch.setattr(warc_module, "REFERS_TO_LIMIT", 1)
    path = tmp_path / "crawl.warc.gz"
    mw = middleware(path)
    respond(mw, "http://a.test/rain", ARTICLE)
    respond(mw, "http://a.test/light", OTHER)
    respond(mw, "http://b.test/copy", COPY)
    mw.warc.close()
    revisit = read_warc(path)[-1]
    assert revisit.type == "revisit" and revisit.headers["WARC-Refers-To-Target-URI"] == "http://a.test/rain"
    assert "WARC-Refers-To-Date" not in revisit.headers and "WARC-Refers-To" not in revisit.headers


@pytest.mark.usefixtures("memory_index")
def test_an_existing_file_is_appended_to(tmp_path: Path):
    """A second crawl to the same file adds its own warcinfo and records after the first crawl's."""
    path = tmp_path / "crawl.warc.gz"
    for url in ("http://a.test/rain", "http://a.test/light"):
        mw = middleware(path)
        respond(mw, url, ARTICLE if url.endswith("rain") else OTHER)
        mw.warc.close()
    assert [(r.type, r.headers.get("WARC-Target-URI")) for r in read_warc(path)] == [
        ("warcinfo", None),
        ("response", "http://a.test/rain"),
        ("warcinfo", None),
        ("response", "http://a.test/light"),
    ]


@pytest.mark.usefixtures("memory_index")
def test_unwritable_path_names_the_setting(tmp_path: Path):
    """A WARC path that cannot be created raises an error naming SIMHASH_WARC (a crawl stops at start)."""
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(ValueError, match=r"^SIMHASH_WARC='.*a-file/crawl\.warc\.gz': cannot write"):
        middleware(tmp_path / "a-file" / "crawl.warc.gz")


@pytest.mark.usefixtures("memory_index")
def test_no_warc_by_default(tmp_path: Path):
    """With SIMHASH_WARC unset (``""``) nothing is written."""
    mw = middleware(None)
    assert mw.warc is None
    respond(mw, "http://a.test/rain", ARTICLE)
    assert stats(mw) == {}


# --- real crawls ------------------------------------------------------------------------------------------

SITE = site()
NOT_FOUND = b"<html><body><h1>Not found</h1></body></html>"  # devsites/localsite.py's 404 page
MODES = {
    "drop": {"DOWNLOAD_FAIL_ON_DATALOSS": "False"},  # the truncated page too
    "flag": {"SIMHASH_ACTION": "flag"},
}


def served_page(url: str) -> Page | None:
    """The page the test site serves at ``url`` (None: its 404 page), as devsites/localsite.py finds it."""
    key = url_key(url)
    return SITE.get(key) or SITE.get("/" + key.partition("/")[2])


def served_body(url: str) -> bytes:
    """The bytes the test site serves at ``url``."""
    page = served_page(url)
    return NOT_FOUND if page is None else page.body


@dataclass
class WarcCrawl:
    mode: str
    crawl: Crawl
    path: Path
    records: list[Record]

    def of_type(self, record_type: str) -> list[Record]:
        return [r for r in self.records if r.type == record_type]


@pytest.fixture(scope="module", params=list(MODES))
def warc_crawl(request: pytest.FixtureRequest, site_port: int, tmp_path_factory: pytest.TempPathFactory) -> WarcCrawl:
    """A crawl of the local site writing ``crawl.warc.gz``, in drop mode, then in flag mode (the reactor thread
    fingerprints: one CPU less)."""
    tmp = tmp_path_factory.mktemp(f"warc-{request.param}")
    path = tmp / "crawl.warc.gz"
    crawl = scrapy_crawl(
        "site",
        tmp,
        args={"start_urls": start_urls(site_port)},
        settings={"SIMHASH_WARC": str(path), "SIMHASH_PROCESSES": 0, **MODES[request.param]},
    )
    return WarcCrawl(request.param, crawl, path, read_warc(path))


def kept_by_crawl(crawl: Crawl) -> dict[str, str]:
    """URL → fingerprint of the pages the crawl kept (stored items with a fingerprint and no duplicate_of)."""
    return {i["url"]: i["fingerprint"] for i in crawl.items if i.get("fingerprint") and not i.get("duplicate_of")}


@pytest.mark.slow
def test_crawl_warc_has_one_response_per_kept_page(warc_crawl: WarcCrawl):
    """The WARC reads back (digests checked) from a warcinfo record; each kept page is one response record with
    its fingerprint, each HTML page let through unchecked one without, and nothing else is a response."""
    records, crawl = warc_crawl.records, warc_crawl.crawl
    assert records[0].type == "warcinfo" and {r.type for r in records[1:]} == {"response", "revisit"}
    responses = warc_crawl.of_type("response")
    kept = {r.uri: r.headers["WARC-Simhash-Fingerprint"] for r in responses if "WARC-Simhash-Fingerprint" in r.headers}
    assert len(kept) == crawl.stats["simhash/kept"] == sum("WARC-Simhash-Skipped" not in r.headers for r in responses)
    assert kept == kept_by_crawl(crawl)
    unchecked = {url_key(r.uri): r.headers["WARC-Simhash-Skipped"] for r in responses if r.uri not in kept}
    for reason in ("empty", "too_few_features"):
        assert all(unchecked[key] == reason for key in SKIPPED[reason]), reason
    assert "http_status" in unchecked.values()  # the site's broken link
    assert not set(SKIPPED["not_html"]) & {url_key(r.uri) for r in records[1:]}
    assert not any(r.uri.endswith("/robots.txt") for r in records[1:])
    s = crawl.stats
    assert s["simhash/warc/responses"] == len(responses) and s["simhash/warc/errors"] == 0


@pytest.mark.slow
def test_crawl_warc_response_payloads_are_the_served_pages(warc_crawl: WarcCrawl):
    """The payload of each response record is the bytes the site served, its status line and Content-Type too."""
    for record in warc_crawl.of_type("response"):
        assert record.payload == served_body(record.uri), record.uri
        page = served_page(record.uri)
        status = page.status if page is not None else 404
        assert record.status.split()[0] == str(status), record.uri
        if page is not None and page.content_type is not None:
            assert record.http["Content-Type"] == page.content_type


#: Near-duplicate group of each page (``GROUPS``), and the page that makes the flaky test index fail (not used here):
#: a copy of the lighthouse article.
GROUP_OF = {key: group for group, keys in GROUPS.items() for key in keys}
GROUP_OF[f"127.0.0.1{INDEX_ERROR_PATH}"] = "lighthouse"


@pytest.mark.slow
def test_crawl_warc_has_one_revisit_per_near_duplicate(warc_crawl: WarcCrawl):
    """Each near-duplicate, dropped or flagged, is one revisit record of the profile that names the page it
    duplicates (the item's duplicate_of in flag mode) and refers to the response record at the root of that page's
    chain, of the same group, with its payload digest (never to another revisit); every group has exactly one
    response."""
    crawl = warc_crawl.crawl
    revisits = warc_crawl.of_type("revisit")
    action = "dropped" if warc_crawl.mode == "drop" else "flagged"
    assert len(revisits) == crawl.stats["simhash/near_duplicates"] == crawl.stats[f"simhash/{action}"]
    assert crawl.stats["simhash/warc/revisits"] == len(revisits)
    checked = {r.uri: r for r in warc_crawl.records if "WARC-Simhash-Fingerprint" in r.headers}
    by_id = {r.headers["WARC-Record-ID"]: r for r in warc_crawl.records}
    items = {i["url"]: i for i in crawl.items}
    for revisit in revisits:
        h = revisit.headers
        assert h["WARC-Profile"] == PROFILE and revisit.payload == b"" and revisit.status == "200 OK"
        assert revisit.version == "WARC/1.1" and "Content-Length" not in revisit.http
        assert h["WARC-Simhash-Payload-Digest"] == sha1(served_body(revisit.uri))
        assert 0 <= int(h["WARC-Simhash-Distance"]) <= 10 and len(h["WARC-Simhash-Fingerprint"]) == 16
        assert h["WARC-Simhash-Duplicate-Of"] in checked
        root = by_id[h["WARC-Refers-To"]]
        assert root.type == "response" and root.uri == h["WARC-Refers-To-Target-URI"]
        assert h["WARC-Refers-To-Date"] == root.headers["WARC-Date"] <= h["WARC-Date"]
        assert h["WARC-Payload-Digest"] == root.headers["WARC-Payload-Digest"]
        assert GROUP_OF[url_key(root.uri)] == GROUP_OF[url_key(revisit.uri)]
        if warc_crawl.mode == "flag":
            item = items[revisit.uri]
            assert item["duplicate_of"] == h["WARC-Simhash-Duplicate-Of"]
            assert item["distance"] == int(h["WARC-Simhash-Distance"])
            assert item["fingerprint"] == h["WARC-Simhash-Fingerprint"]
        else:
            assert revisit.uri not in items
    written = {url_key(r.uri): r.type for r in warc_crawl.records[1:]}
    for group, keys in GROUPS.items():
        assert sorted(written[k] for k in keys) == ["response"] + ["revisit"] * (len(keys) - 1), group


@pytest.mark.slow
def test_unwritable_warc_stops_the_crawl_at_start_in_one_line(tmp_path: Path, site_port: int):
    """A SIMHASH_WARC that cannot be written: one ERROR line naming it, no traceback, closed before any request,
    exit status 1."""
    from test_errors import crawl_run

    (tmp_path / "a-file").write_text("not a directory")
    warc = tmp_path / "a-file" / "crawl.warc.gz"
    log, status = crawl_run(tmp_path, site_port, str(tmp_path / "index"), SIMHASH_WARC=str(warc), SIMHASH_PROCESSES="0")
    assert status == 1, (status, log)  # scripts see the failure
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and f"SIMHASH_WARC={str(warc)!r}: cannot write the WARC file" in errors[0], log
    assert "Traceback" not in log and "Closing spider (simhash_start_failed)" in log, log
    assert "downloader/request_count" not in log, log


@pytest.mark.slow
@pytest.mark.parametrize("warc_crawl", ["flag"], indirect=True)
def test_dedup_of_the_flag_crawl_warc_keeps_the_pages_the_crawl_kept(warc_crawl: WarcCrawl, tmp_path: Path):
    """``simhash-filter dedup crawl.warc.gz`` (which skips revisit records) keeps the pages the crawl kept."""
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "simhash_filter", "dedup", str(warc_crawl.path), "--output", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = {r["url"] for r in rows if r["fingerprint"] and r["duplicate_of"] is None and "status" not in r}
    assert kept == set(kept_by_crawl(warc_crawl.crawl))


# --- replay in pywb ---------------------------------------------------------------------------------------

#: pywb, installed by the test into a virtualenv of its own (its dependencies are not the project's).
PYWB_REQUIREMENT = "pywb>=2.8,<3"


def pywb_bin(cache_dir: Path) -> Path:
    """The ``bin`` directory of a virtualenv with pywb under ``cache_dir``, made once (``pip install pywb``);
    the test fails under CI and is skipped elsewhere when pywb cannot be installed."""
    return tool_bin(cache_dir / "pywb-venv", PYWB_REQUIREMENT, "wayback")


def tool_bin(venv: Path, requirement: str, script: str) -> Path:
    """The ``bin`` directory of the virtualenv *venv* with *requirement* installed (made once: when its *script* is
    missing); the test fails under CI and is skipped elsewhere when it cannot be installed."""
    bin_dir = venv / "bin"
    if not (bin_dir / script).exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True)
            subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", requirement],
                           check=True, capture_output=True, timeout=900)  # fmt: skip
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            message = f"cannot install {requirement}: {getattr(exc, 'stderr', b'') or exc}"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
    return bin_dir


@contextlib.contextmanager
def wayback(bin_dir: Path, warc: Path, directory: Path) -> Iterator[str]:
    """pywb's ``wayback`` on loopback serving a collection of ``warc``; its base URL (``.../coll/``)."""
    directory.mkdir(parents=True, exist_ok=True)
    for args in (["init", "coll"], ["add", "coll", str(warc)]):
        subprocess.run([str(bin_dir / "wb-manager"), *args], cwd=directory, check=True, capture_output=True,
                       timeout=300)  # fmt: skip
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (directory / "wayback.log").open("wb")
    proc = subprocess.Popen([str(bin_dir / "wayback"), "-p", str(port), "-b", "127.0.0.1"], cwd=directory,
                            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert proc.poll() is None, (directory / "wayback.log").read_text(errors="replace")
                assert time.monotonic() < deadline, "wayback did not start within 60 s"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/coll/"
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def fetch(url: str) -> tuple[int, bytes]:
    """Status and body of a GET (an HTTP error's too)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.slow
def test_pywb_replays_every_revisit_with_the_kept_pages_body(
    warc_crawl: WarcCrawl, tmp_path: Path, request: pytest.FixtureRequest
):
    """pywb (a real ``wayback`` on loopback, the crawl's WARC added to a collection) replays every near-duplicate's
    revisit record of a crawl of two mirror hosts with status 200 and the body of the kept page it refers to,
    revisits of revisits included."""
    bin_dir = pywb_bin(request.config.cache.mkdir("pywb"))
    by_id = {r.headers["WARC-Record-ID"]: r for r in warc_crawl.records}
    revisits = warc_crawl.of_type("revisit")
    assert revisits
    failed = []
    with wayback(bin_dir, warc_crawl.path, tmp_path / "pywb") as base:
        for revisit in revisits:
            timestamp = "".join(c for c in revisit.headers["WARC-Date"] if c.isdigit())[:14]
            status, body = fetch(f"{base}{timestamp}id_/{revisit.uri}")
            kept = by_id[revisit.headers["WARC-Refers-To"]]
            if status != 200 or body != kept.payload:
                failed.append((revisit.uri, status, body[:200]))
    assert not failed, f"{len(failed)} of {len(revisits)} revisits not replayed: {failed[:5]}"
