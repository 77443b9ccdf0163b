"""Tests of WARC input (simhash_filter.batch.warc, ``simhash-filter dedup`` of WARC files), on WARC files written here
with warcio's own writer."""

from __future__ import annotations

import gzip
import io
import json
import re
import sys
import zlib
from pathlib import Path

import pytest
from scrapy.http import HtmlResponse
from test_cli import read_records
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from simhash_filter import fingerprint
from simhash_filter.batch.dedup import Outcome
from simhash_filter.batch.inputs import JSONL, WARC, input_files, kind
from simhash_filter.batch.warc import WarcCounts, WarcPage, iter_warc_stream
from simhash_filter.cli.main import main
from simhash_filter.crawl.policy import Policy

#: Makes records (each is written once: its payload is a stream).
BUILDER = WARCWriter(None)
HTML_UTF8 = "text/html; charset=utf-8"
DNS = b"20240514082107\na.example. 60 IN A 10.0.0.1\n"


def response(
    url: str,
    body: bytes,
    *,
    status: str = "200 OK",
    content_type: str | None = HTML_UTF8,
    headers: tuple[tuple[str, str], ...] = (),
    date: str | None = None,
):
    """A ``response`` record of an HTTP response with ``body`` as its payload (as sent: compressed or chunked
    when ``headers`` say so)."""
    fields = ([("Content-Type", content_type)] if content_type is not None else []) + list(headers)
    http = StatusAndHeaders(status, fields, protocol="HTTP/1.1")
    return BUILDER.create_warc_record(url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http,
                                      warc_headers_dict={"WARC-Date": date} if date else None)  # fmt: skip


def request(url: str):
    http = StatusAndHeaders("GET / HTTP/1.1", [("Host", "a.example")], is_http_request=True)
    return BUILDER.create_warc_record(url, "request", payload=io.BytesIO(b""), length=0, http_headers=http)


def metadata(url: str):
    fields = b"fetchTimeMs: 120\r\n"
    return BUILDER.create_warc_record(url, "metadata", payload=io.BytesIO(fields), length=len(fields),
                                      warc_content_type="application/warc-fields")  # fmt: skip


def write_warc(path: Path, records: list, *, compress: bool = True) -> list[int]:
    """Write ``records`` (gzip per record, or uncompressed); the offset of each in the file."""
    offsets = []
    with open(path, "wb") as f:
        writer = WARCWriter(f, gzip=compress)
        for record in records:
            offsets.append(f.tell())
            writer.write_record(record)
    return offsets


def page_responses(pages: list[tuple[str, str]]) -> list:
    return [response(url, html.encode("utf-8")) for url, html in pages]


@pytest.mark.parametrize("compress", [True, False], ids=["gzip", "plain"])
def test_pages_reach_the_output_with_their_uri_date_and_record_id(corpus, tmp_path, capsys, compress):
    """Each HTML response is one output line, in order, with its WARC-Target-URI as url and its WARC-Date and
    WARC-Record-ID after the other keys."""
    dates = ["2024-05-14T08:21:07Z", "2024-05-14T08:21:09Z", "2024-05-15T10:00:00Z"]
    records = [response(url, html.encode(), date=d) for (url, html), d in zip(corpus, dates, strict=False)]
    ids = [r.rec_headers.get_header("WARC-Record-ID") for r in records]
    src = tmp_path / ("in.warc.gz" if compress else "in.warc")
    write_warc(src, records, compress=compress)
    assert main(["dedup", str(src), "--output", str(tmp_path / "out.jsonl")]) == 0
    out = read_records((tmp_path / "out.jsonl").read_text())
    assert [(r["url"], r["warc_date"], r["warc_record_id"]) for r in out] == [
        (url, d, i) for (url, _), d, i in zip(corpus, dates, ids, strict=False)
    ]
    assert list(out[0]) == ["url", "fingerprint", "duplicate_of", "distance", "warc_date", "warc_record_id"]
    assert out[0]["fingerprint"] == fingerprint(corpus[0][1].encode()).hex
    assert "dedup: 3 pages of 3 WARC records in 1 files" in capsys.readouterr().err


def test_near_duplicates_are_those_of_the_same_pages_as_json_lines(corpus, tmp_path, capsys):
    """The same pages as WARC records and as JSON lines get the same fingerprints and the same decisions."""
    warc = tmp_path / "in.warc.gz"
    write_warc(warc, page_responses(corpus))
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps({"url": u, "html": h}) + "\n" for u, h in corpus), encoding="utf-8")
    assert main(["dedup", str(warc)]) == 0
    from_warc = read_records(capsys.readouterr().out)
    assert main(["dedup", str(jsonl)]) == 0
    from_jsonl = read_records(capsys.readouterr().out)
    keys = ("url", "fingerprint", "duplicate_of", "distance")
    assert [tuple(r[k] for k in keys) for r in from_warc] == [tuple(r[k] for k in keys) for r in from_jsonl]
    assert [r["duplicate_of"] for r in from_warc if r["duplicate_of"]] == [
        "https://a.example/garden",
        "https://a.example/library",
    ]


def test_records_that_are_not_pages_are_skipped_and_counted(pages, tmp_path, capsys):
    """warcinfo, request, metadata and revisit records, non-HTML responses, a non-2xx response and a response
    without HTTP are not in the output; the summary counts them by reason.  A response without a Content-Type
    whose payload starts like HTML is a page."""
    html = pages["en_article"].encode()
    revisit_http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
    digest, date = "sha1:2Z4ZMBDBOIH2ERWKUGAWDU4BHLA2RXYD", "2024-05-14T08:21:07Z"
    revisit = BUILDER.create_revisit_record("https://a.example/garden", digest, "https://a.example/garden", date,
                                            http_headers=revisit_http)  # fmt: skip
    dns = BUILDER.create_warc_record("dns:a.example", "response", payload=io.BytesIO(DNS), length=len(DNS),
                                     warc_content_type="text/dns")  # fmt: skip
    records = [
        BUILDER.create_warcinfo_record("in.warc.gz", {"software": "simhash-filter tests"}),
        request("https://a.example/garden"),
        response("https://a.example/garden", html),
        metadata("https://a.example/garden"),
        response("https://a.example/gone", html, status="404 Not Found"),
        response("https://a.example/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(200), content_type="image/png"),
        response("https://a.example/notes", b"just some words, no markup", content_type=None),
        response("https://a.example/sniffed", pages["zh_article"].encode(), content_type=None),
        revisit,
        dns,
    ]
    src = tmp_path / "in.warc.gz"
    write_warc(src, records)
    assert main(["dedup", str(src)]) == 0
    out, err = capsys.readouterr()
    assert [r["url"] for r in read_records(out)] == ["https://a.example/garden", "https://a.example/sniffed"]
    assert "2 pages of 10 WARC records in 1 files" in err
    assert "; 8 records skipped (http_status 1, not_html 2, not_http 1, not_response 4), 0 damaged" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(("compress", "cut"), [(True, 100), (True, 3), (False, 100)],
                         ids=["gzip-payload", "gzip-trailer", "plain-payload"])  # fmt: skip
def test_a_truncated_last_record_keeps_what_came_before(corpus, tmp_path, capsys, compress, cut):
    """A file whose last bytes are cut: the pages before the last record are written, the damage is one line
    on stderr naming the file and the record's offset, the summary counts it; exit status 2."""
    src = tmp_path / ("cut.warc.gz" if compress else "cut.warc")
    offsets = write_warc(src, page_responses(corpus[:3]), compress=compress)
    src.write_bytes(src.read_bytes()[:-cut])
    assert main(["dedup", str(src), "--output", str(tmp_path / "out.jsonl")]) == 2
    out = read_records((tmp_path / "out.jsonl").read_text())
    assert [r["url"] for r in out] == [url for url, _ in corpus[:2]]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert err[0].startswith(f"simhash-filter: {src}: damaged at offset {offsets[2]}: ")
    assert err[0].endswith("the rest of the file is not read")
    assert "2 pages of 3 WARC records in 1 files" in err[1] and err[1].endswith(", 1 damaged")


def test_a_damaged_gzip_member_keeps_the_pages_before_it_and_the_next_file_is_read(corpus, tmp_path, capsys):
    """Bytes changed inside a record's gzip member: the pages before it are written, the damage is named
    with its offset, and the files after it are read; exit status 2."""
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    first = crawl / "a.warc.gz"
    offsets = write_warc(first, page_responses(corpus[:4]))
    write_warc(crawl / "b.warc.gz", page_responses(corpus[4:]))
    data = bytearray(first.read_bytes())
    middle = (offsets[2] + offsets[3]) // 2
    data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    first.write_bytes(bytes(data))
    assert main(["dedup", str(crawl), "--output", str(tmp_path / "out.jsonl")]) == 2
    out = read_records((tmp_path / "out.jsonl").read_text())
    assert [r["url"] for r in out] == [url for url, _ in corpus[:2] + corpus[4:]]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert err[0].startswith(f"simhash-filter: {first}: damaged at offset {offsets[2]}: ")
    assert "in 2 files" in err[1] and err[1].endswith(", 1 damaged")


@pytest.mark.parametrize("change", ["shorter", "longer", "missing", "cut-in-headers"])
def test_a_record_with_a_wrong_or_no_content_length_is_damage(corpus, tmp_path, capsys, change):
    """A Content-Length shorter or longer than the record, none, or a record cut inside its WARC headers: the
    pages before it are written, one line names the damage; exit status 2."""
    src = tmp_path / "bad.warc"
    offsets = write_warc(src, page_responses(corpus[:3]), compress=False)
    data = src.read_bytes()
    start = data.index(b"Content-Length: ", offsets[1])
    end = data.index(b"\r\n", start)
    length = int(data[start + 16 : end])
    header = {"shorter": b"Content-Length: %d" % (length - 10), "longer": b"Content-Length: %d" % (length + 10),
              "missing": b"X-Length: none"}  # fmt: skip
    if change == "cut-in-headers":
        src.write_bytes(data[: offsets[2] + 40])
        damaged, kept = offsets[2], 2
    else:
        src.write_bytes(data[:start] + header[change] + data[end:])
        damaged, kept = offsets[1], 1
    assert main(["dedup", str(src)]) == 2
    out, err = capsys.readouterr()
    assert [r["url"] for r in read_records(out)] == [url for url, _ in corpus[:kept]]
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"simhash-filter: {src}: damaged at offset {damaged}: "), lines


def test_the_progress_bar_counts_the_bytes_of_all_files(corpus, tmp_path, capsys, monkeypatch):
    """On a terminal, the bar of a WARC input counts the bytes read of all its files."""
    from tqdm import tqdm

    crawl = tmp_path / "crawl"
    crawl.mkdir()
    write_warc(crawl / "a.warc.gz", page_responses(corpus[:3]))
    write_warc(crawl / "b.warc", page_responses(corpus[3:]), compress=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["dedup", str(crawl), "--output", str(tmp_path / "out.jsonl")]) == 0
    bar = capsys.readouterr().err.split("dedup:")[0].split("\r")[-1]
    size = tqdm.format_sizeof(sum(p.stat().st_size for p in crawl.iterdir()))
    assert re.search(rf"100%\|.*\| {re.escape(size)}/{re.escape(size)} .*6 pages\]", bar), bar


def test_bytes_that_are_no_warc_record_are_damage_not_a_crash(tmp_path, capsys):
    """A file named .warc that holds no WARC records is one damage line (offset 0) and exit status 2."""
    src = tmp_path / "notes.warc"
    src.write_text('{"url": "https://a.example/", "html": "<p>JSON, not WARC</p>"}\n')
    assert main(["dedup", str(src)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[0].startswith(f"simhash-filter: {src}: damaged at offset 0: not a WARC record")


def _gbk(pages) -> bytes:
    return pages["zh_article"].replace('charset="utf-8"', 'charset="gbk"').encode("gb18030")


def test_bad_charsets_fingerprint_as_in_a_crawl_and_do_not_crash(pages, tmp_path, capsys):
    """An unknown charset name, a name of no text encoding, and bytes invalid in the declared charset: each
    page gets the fingerprint the crawl would give it (the same body and Content-Type), and the run goes on."""
    utf8 = pages["en_article"].encode()
    invalid_utf8 = utf8.replace(b"gravel lot", b"gravel \xff\xfe\xc3 lot")
    invalid_gbk = _gbk(pages).replace("图书馆".encode("gb18030"), b"\x81\x20\xfe\xff", 1)
    cases = [
        ("https://a.example/unknown", _gbk(pages), "text/html; charset=x-no-such-charset"),
        ("https://a.example/not-text", utf8, "text/html; charset=base64"),
        ("https://a.example/rot13", utf8, 'text/html; charset="rot13"'),
        ("https://a.example/invalid-utf8", invalid_utf8, "text/html; charset=utf-8"),
        ("https://a.example/invalid-gbk", invalid_gbk, "text/html; charset=GBK"),
        ("https://a.example/empty-charset", utf8, "text/html; charset="),
    ]
    src = tmp_path / "charsets.warc.gz"
    write_warc(src, [response(url, body, content_type=ct) for url, body, ct in cases])
    assert main(["dedup", str(src)]) == 0
    out = read_records(capsys.readouterr().out)
    assert [r["url"] for r in out] == [url for url, _, _ in cases]
    for record, (url, body, ct) in zip(out, cases, strict=True):
        crawled = HtmlResponse(url, headers={"Content-Type": ct}, body=body)
        assert record["fingerprint"] == fingerprint(body, Policy.encoding(crawled)).hex, url
    assert out[0]["fingerprint"] == fingerprint(pages["zh_article"]).hex  # the page's own <meta charset>


def test_content_encodings_and_chunks_are_decoded(pages, tmp_path):
    """gzip, deflate and br payloads and chunked transfer are decoded to the page's bytes; a Content-Encoding
    that cannot be decoded skips the record (content_encoding)."""
    brotli = pytest.importorskip("brotli")
    body = pages["en_article"].encode()

    def chunked(data: bytes) -> bytes:
        parts = [data[i : i + 1000] for i in range(0, len(data), 1000)]
        return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"

    both = (("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip"))
    records = [
        response("https://a.example/gzip", gzip.compress(body), headers=(("Content-Encoding", "gzip"),)),
        response("https://a.example/deflate", zlib.compress(body), headers=(("Content-Encoding", "deflate"),)),
        response("https://a.example/br", brotli.compress(body), headers=(("Content-Encoding", "br"),)),
        response("https://a.example/chunked", chunked(body), headers=(("Transfer-Encoding", "chunked"),)),
        response("https://a.example/both", chunked(gzip.compress(body)), headers=both),
        response("https://a.example/compress", body, headers=(("Content-Encoding", "compress"),)),
    ]
    src = tmp_path / "encodings.warc.gz"
    write_warc(src, records)
    counts = WarcCounts()
    with open(src, "rb") as f:
        got = list(iter_warc_stream(f, str(src), counts))
    assert [(p.url, p.html) for p in got] == [(f"https://a.example/{n}", body)
                                              for n in ("gzip", "deflate", "br", "chunked", "both")]  # fmt: skip
    assert dict(counts.skipped) == {"content_encoding": 1} and counts.damaged == []


def test_a_warc_gz_compressed_as_one_gzip_stream_is_read(corpus, tmp_path, capsys):
    """A .warc.gz made by gzipping a whole .warc (not per record) is read through, page by page."""
    plain = tmp_path / "in.warc"
    write_warc(plain, page_responses(corpus), compress=False)
    src = tmp_path / "whole.warc.gz"
    src.write_bytes(gzip.compress(plain.read_bytes()))
    assert main(["dedup", str(src)]) == 0
    out, err = capsys.readouterr()
    assert [r["url"] for r in read_records(out)] == [url for url, _ in corpus]
    assert "0 damaged" in err and len(err.splitlines()) == 1


def test_a_directory_and_a_glob_are_read_in_name_order(corpus, tmp_path, capsys):
    """A directory's .warc and .warc.gz files at any depth, and a glob's matches, are read in path order; other
    files in the directory are left alone."""
    crawl = tmp_path / "crawl"
    (crawl / "sub").mkdir(parents=True)
    write_warc(crawl / "sub" / "c.warc.gz", page_responses(corpus[4:]))
    write_warc(crawl / "b.warc.gz", page_responses(corpus[2:4]))
    write_warc(crawl / "a.warc", page_responses(corpus[:2]), compress=False)
    (crawl / "notes.txt").write_text("not a WARC file\n")
    urls = [url for url, _ in corpus]
    assert main(["dedup", str(crawl)]) == 0
    out, err = capsys.readouterr()
    assert [r["url"] for r in read_records(out)] == urls
    assert "6 pages of 6 WARC records in 3 files" in err
    assert main(["dedup", str(crawl / "*.warc*")]) == 0
    assert [r["url"] for r in read_records(capsys.readouterr().out)] == urls[:4]
    assert main(["dedup", str(crawl / "**" / "*.warc.gz")]) == 0
    assert [r["url"] for r in read_records(capsys.readouterr().out)] == urls[2:]
    expected = [str(crawl / "a.warc"), str(crawl / "b.warc.gz"), str(crawl / "sub" / "c.warc.gz")]
    assert input_files([str(crawl)]) == expected


def test_an_input_with_no_warc_files_is_one_line(tmp_path, capsys):
    """A missing .warc.gz file, a glob that matches nothing and a directory without WARC files cannot be
    opened: one line, exit status 1."""
    gone = tmp_path / "gone.warc.gz"
    assert main(["dedup", str(gone)]) == 1
    assert capsys.readouterr().err == f"simhash-filter: cannot open {gone}: No such file or directory\n"
    assert main(["dedup", str(tmp_path / "none-*.warc.gz")]) == 1
    assert "no files match" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["dedup", str(tmp_path / "empty")]) == 1
    assert "no .jsonl or .warc files" in capsys.readouterr().err


def test_the_input_kind_is_chosen_by_the_name():
    """A file ending with .warc or .warc.gz (any case) is WARC input; anything else is JSON Lines."""
    for name in ("a.warc", "a.WARC.GZ", "crawl/part-0.warc.gz"):
        assert kind(name) == WARC, name
    for name in ("pages.jsonl", "pages.jsonl.gz", "part-0.gz", "odd*name.jsonl"):
        assert kind(name) == JSONL, name


def test_workers_give_the_same_output(pages, tmp_path, capsys):
    """``--workers 2`` writes exactly what ``--workers 1`` writes, over several chunks of WARC pages."""
    records = []
    for i in range(45):
        name = ("en_article", "en_other", "zh_article", "zh_other", "image_only")[i % 5]
        html = pages[name] if i % 3 else pages[name].replace("</article>", f"<p>Update {i}: corrected.</p></article>")
        records.append(response(f"https://x.example/{i}", html.encode()))
        if i % 7 == 0:
            records.append(request(f"https://x.example/{i}"))
    src = tmp_path / "many.warc.gz"
    write_warc(src, records)
    assert main(["dedup", str(src), "--workers", "1"]) == 0
    one = capsys.readouterr().out
    assert main(["dedup", str(src), "--workers", "2"]) == 0
    two = capsys.readouterr().out
    assert len(one.splitlines()) == 45
    assert one == two


def test_iter_warc_stream_reads_a_stream_and_counts_what_it_skips(pages, tmp_path):
    """iter_warc_stream (the Spark job's reader) reads an open stream: pages with their
    bytes, the declared charset (as the crawl reads it), WARC-Date and WARC-Record-ID; the rest counted by
    reason."""
    body = _gbk(pages)
    page = response("https://a.example/library", body, content_type="text/html; charset=GBK",
                    date="2024-05-14T08:21:07Z")  # fmt: skip
    record_id = page.rec_headers.get_header("WARC-Record-ID")
    src = tmp_path / "in.warc.gz"
    write_warc(src, [request("https://a.example/library"), page, metadata("https://a.example/library")])
    counts = WarcCounts()
    with open(src, "rb") as f:
        got = list(iter_warc_stream(io.BytesIO(f.read()), str(src), counts))
    crawled = HtmlResponse("https://a.example/library", headers={"Content-Type": "text/html; charset=GBK"}, body=body)
    assert got == [WarcPage("https://a.example/library", body, Policy.encoding(crawled), "2024-05-14T08:21:07Z",
                            record_id)]  # fmt: skip
    assert (counts.pages, dict(counts.skipped), counts.records) == (1, {"not_response": 2}, 3)
    assert list(iter_warc_stream(io.BytesIO(src.read_bytes()), str(src))) == got
    assert dict(got[0].record_fields()) == {"warc_date": "2024-05-14T08:21:07Z", "warc_record_id": record_id}


def test_an_outcome_carries_its_pages_fields_last():
    """An outcome's record has the contract's keys, then the page's own fields."""
    outcome = Outcome(1, "u", 0xAB, fields=(("warc_date", "d"), ("warc_record_id", "<urn:uuid:x>")))
    assert outcome.record() == {"url": "u", "fingerprint": "00000000000000ab", "duplicate_of": None,
                                "distance": None, "warc_date": "d", "warc_record_id": "<urn:uuid:x>"}  # fmt: skip
    assert re.fullmatch(r"[0-9a-f]{16}", outcome.record()["fingerprint"])


def test_the_private_warcio_methods_batch_warc_overrides_are_those_of_the_pinned_warcio():
    """batch/warc.py overrides private methods of warcio 1.8.1 (pyproject pins it): each is still there with the
    parameters it was written for, so that a warcio that renames or changes one fails here, not in a user's dedup."""
    import inspect
    from importlib.metadata import version

    from warcio.archiveiterator import WARCIterator
    from warcio.bufferedreaders import BufferedReader

    assert version("warcio") == "1.8.1"
    overridden = {
        (WARCIterator, "_raise_invalid_gzip_err"): ["self"],
        (WARCIterator, "_consume_blanklines"): ["self"],
        (WARCIterator, "_next_record"): ["self", "next_line"],
        (BufferedReader, "_init_decomp"): ["self", "decomp_type"],
        (BufferedReader, "_decompress"): ["self", "data"],
        (BufferedReader, "_fillbuff"): ["self", "block_size"],
    }
    for (cls, name), parameters in overridden.items():
        assert list(inspect.signature(getattr(cls, name)).parameters) == parameters, (cls.__name__, name)
