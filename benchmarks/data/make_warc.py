"""Write a WARC file of a given size from a JSON Lines set of pages, repeated: the input of the WARC reader's
measurements (docs/speed.md, "Batch paths").  Records are gzipped one by one, as crawlers write them: a
``warcinfo`` record, then for each page a ``request`` and a ``response`` record (HTTP/1.1 200, ``text/html;
charset=utf-8``).  Pass ``n`` after the first gives each URL a ``simhash_pass=n`` query parameter.  The same input
and options always give the same bytes (record ids and dates are derived, not random).

    python -m benchmarks.data.make_warc /tmp/big.warc.gz --bytes 1e9            # the public set, repeated to ~1 GB
    python -m benchmarks.data.make_warc out/small.warc.gz --bytes 5e7 --pages out/sample.jsonl

The file is written as it grows; the last pass may stop part way (at the size asked for).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from benchmarks.benchlib.data import PUBLIC_PAGES

PUBLIC = PUBLIC_PAGES
START = datetime(2026, 11, 1, tzinfo=timezone.utc)


def read_pages(path: Path) -> list[tuple[str, bytes]]:
    """``(url, html as UTF-8)`` of each good line of a JSON Lines file (gzipped or not)."""
    opener = gzip.open if path.suffix == ".gz" else open
    pages = []
    with opener(path, "rb") as f:
        for line in f:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("url"), str) and isinstance(obj.get("html"), str):
                pages.append((obj["url"], obj["html"].encode("utf-8", "surrogatepass")))
    return pages


def with_pass(url: str, n: int) -> str:
    if n == 0:
        return url
    base, _, fragment = url.partition("#")
    joined = f"{base}{'&' if '?' in base else '?'}simhash_pass={n}"
    return f"{joined}#{fragment}" if fragment else joined


def records(writer: WARCWriter, pages: list[tuple[str, bytes]]) -> Iterator[object]:
    """The records, without end: each page once per pass, passes numbered from 0."""
    number = 0
    n = 0
    while True:
        for url, html in pages:
            url = with_pass(url, n)
            date = (START + timedelta(seconds=number)).strftime("%Y-%m-%dT%H:%M:%SZ")
            number += 1
            host = url.split("/")[2] if url.count("/") >= 2 else "localhost"
            request = StatusAndHeaders("GET / HTTP/1.1", [("Host", host), ("User-Agent", "make_warc")],
                                       is_http_request=True)  # fmt: skip
            yield writer.create_warc_record(url, "request", payload=io.BytesIO(b""), length=0, http_headers=request,
                                            warc_headers_dict=_headers(url, date, "request"))  # fmt: skip
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                               ("Content-Length", str(len(html)))], protocol="HTTP/1.1")  # fmt: skip
            yield writer.create_warc_record(url, "response", payload=io.BytesIO(html), length=len(html),
                                            http_headers=http,
                                            warc_headers_dict=_headers(url, date, "response"))  # fmt: skip
        n += 1


def _headers(url: str, date: str, kind: str) -> dict[str, str]:
    record_id = uuid.uuid5(uuid.NAMESPACE_URL, f"{kind} {date} {url}")
    return {"WARC-Date": date, "WARC-Record-ID": f"<urn:uuid:{record_id}>"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path, help="the WARC file to write (.warc.gz)")
    parser.add_argument("--bytes", type=float, default=1e9, help="stop when the file holds this many bytes")
    parser.add_argument("--pages", type=Path, default=PUBLIC, help=f"JSON Lines of url and html (default {PUBLIC})")
    args = parser.parse_args(argv)
    pages = read_pages(args.pages)
    if not pages:
        parser.error(f"no pages in {args.pages}")
    target = int(args.bytes)
    written = 0
    with open(args.output, "wb") as f:
        writer = WARCWriter(f, gzip=True)
        info = writer.create_warcinfo_record(os.path.basename(args.output), {"software": "make_warc"})
        for name, value in _headers("", START.strftime("%Y-%m-%dT%H:%M:%SZ"), "warcinfo").items():
            info.rec_headers.replace_header(name, value)
        writer.write_record(info)
        for record in records(writer, pages):
            writer.write_record(record)
            if record.rec_type == "response":  # type: ignore[attr-defined]
                written += 1
                if f.tell() >= target:
                    break
        size = f.tell()
    print(f"{args.output}: {size} bytes, {written} pages ({len(pages)} distinct)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
