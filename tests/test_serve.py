"""``simhash-filter serve``: a real server process on loopback, called as a crawler in another language would call
it.  Its decisions on a stream are ``simhash-filter dedup``'s on the same stream, in order, whether the pages come
one by one, in batches or as WARC records; the token, the limits and back-pressure refuse with a clear 4xx; a stop
answers the requests it holds; an on-disk index killed mid-stream keeps every page the server acknowledged; two
servers on one Redis index decide as one."""

from __future__ import annotations

import gzip
import io
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from devsites.sample import sample
from devsites.serve_server import Server
from simhash_filter.cli.main import main as cli

pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")

DEDUP_KEYS = ("url", "fingerprint", "duplicate_of", "distance")


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, str]], list[dict[str, object]]]:
    """A stream of generated pages with near-duplicates (English and Chinese), and dedup's records for it."""
    rows = [{"url": r["url"], "html": r["html"]} for r in sample(12, seed=48)]
    folder = tmp_path_factory.mktemp("stream")
    pages, out = folder / "pages.jsonl", folder / "dedup.jsonl"
    pages.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert cli(["dedup", str(pages), "--output", str(out), "--workers", "1", "--no-progress"]) == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert any(r["duplicate_of"] for r in records) and any(not r["duplicate_of"] for r in records)
    return rows, records


def _dedup_part(record: dict[str, object]) -> dict[str, object]:
    return {key: record[key] for key in DEDUP_KEYS}


def _ndjson(rows: list[dict[str, str]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


@pytest.fixture
def server(tmp_path: Path) -> Server:
    with Server("--index", "memory://", log=tmp_path / "serve.log") as s:
        yield s


def test_pages_one_by_one_then_a_batch_get_dedups_decisions_in_order(server, stream):
    """The first half of the stream posted page by page (its bytes, its charset in Content-Type), the rest as one
    batch of JSON Lines: every decision is dedup's for the whole stream, in order; each answer also says whether
    the page was stored and how similar it is to the page it duplicates."""
    rows, expected = stream
    half = len(rows) // 2
    got = []
    for row in rows[:half]:
        answer = server.post_page(row["url"], row["html"])
        assert answer.status == 200, answer.body
        got.append(answer.json())
    answer = server.request("POST", "/v1/batch", _ndjson(rows[half:]), {"Content-Type": "application/x-ndjson"})
    assert answer.status == 200, answer.body
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    got += answer.lines()
    assert [_dedup_part(r) for r in got] == [_dedup_part(r) for r in expected]
    assert all(r["status"] == "ok" and r["stored"] for r in got)
    assert all((r["similarity"] is None) == (r["duplicate_of"] is None) for r in got)


def test_a_check_stores_nothing_and_the_index_answers_queries(server, stream):
    """``/v1/pages/check`` decides without storing; a page stored is found by its fingerprint at distance 0, and a
    page posted again is a near-duplicate of itself (unchanged), not stored twice."""
    rows, _ = stream
    first = rows[0]
    checked = server.post_page(first["url"], first["html"], check=True).json()
    assert checked["duplicate_of"] is None and not checked["stored"]
    assert server.request("GET", "/v1/stats").json()["pages"] == 0
    stored = server.post_page(first["url"], first["html"]).json()
    assert stored["stored"] and stored["fingerprint"] == checked["fingerprint"]
    again = server.post_page(first["url"], first["html"]).json()
    assert again["duplicate_of"] == first["url"] and again["distance"] == 0 and not again["stored"]
    found = server.request("GET", f"/v1/fingerprints/{stored['fingerprint']}").json()
    assert found["matches"][0] == {"url": first["url"], "fingerprint": stored["fingerprint"], "distance": 0}
    assert server.request("GET", f"/v1/fingerprints/{stored['fingerprint']}?k=99").status == 400
    assert server.request("GET", "/v1/fingerprints/nothex").status == 400
    stats = server.request("GET", "/v1/stats").json()
    assert stats["pages"] == 1 and stats["counters"]["simhash/checked"] == 3  # the check too, as in a crawl
    assert stats["counters"]["simhash/unchanged"] + stats["counters"]["simhash/refetched"] == 1


def _warc(rows: list[dict[str, str]], charset: str = "utf-8") -> bytes:
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    for row in rows:
        body = row["html"].encode(charset)
        http = StatusAndHeaders("200 OK", [("Content-Type", f"text/html; charset={charset}")], protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(row["url"], "response", payload=io.BytesIO(body),
                                                      length=len(body), http_headers=http))  # fmt: skip
    return out.getvalue()


def test_warc_records_get_dedups_decisions(server, stream):
    """WARC response records (gzipped per record, GB18030 bodies): one record to ``/v1/pages``, the rest to
    ``/v1/batch``; the decisions are dedup's on the same stream, with the records' date and id."""
    rows, expected = stream
    first = server.request("POST", "/v1/pages", _warc(rows[:1], "gb18030"), {"Content-Type": "application/warc"})
    assert first.status == 200, first.body
    rest = server.request("POST", "/v1/batch", _warc(rows[1:], "gb18030"), {"Content-Type": "application/warc"})
    assert rest.status == 200, rest.body
    got = [first.json(), *rest.lines()]
    assert [_dedup_part(r) for r in got] == [_dedup_part(r) for r in expected]
    assert all(r["warc_record_id"].startswith("<urn:uuid:") for r in got)


def test_bad_input_gets_a_clear_4xx_and_the_server_stays_up(tmp_path, stream):
    """Each bad request is refused with its status and a one-line JSON error: no URL, an unknown charset, a body
    over the limit (said by its Content-Length, or found while reading), a gzip bomb, a gzip body cut short, a
    batch over its page limit, a WARC body without a page; a malformed batch line is reported in its place, as
    dedup reports it.  The server answers normally after all of them."""
    rows, _ = stream
    with Server("--index", "memory://", "--max-body", "200000", "--max-batch", "5", log=tmp_path / "s.log") as s:
        html = rows[0]["html"].encode("utf-8")

        def refused(status: int, answer) -> str:
            assert answer.status == status, (answer.status, answer.body)
            message = answer.json()["error"]
            assert message and "\n" not in message
            return message

        refused(400, s.request("POST", "/v1/pages", html, {"Content-Type": "text/html"}))
        assert "x-no-such" in refused(415, s.post_page("https://a.example/", html, "text/html; charset=x-no-such"))
        refused(413, s.post_page("https://a.example/", b"<p>" + b"a" * 300_000))
        bomb = gzip.compress(b"\0" * 50_000_000)
        assert "decompresses" in refused(413, s.request("POST", "/v1/pages?url=https://a.example/", bomb,
                                                        {"Content-Encoding": "gzip"}))  # fmt: skip
        refused(400, s.request("POST", "/v1/pages?url=https://a.example/", gzip.compress(html)[:-20],
                               {"Content-Encoding": "gzip"}))  # fmt: skip
        refused(415, s.request("POST", "/v1/pages?url=https://a.example/", html, {"Content-Encoding": "br"}))
        refused(413, s.request("POST", "/v1/batch", _ndjson(rows[:6])))
        refused(422, s.request("POST", "/v1/batch", b"WARC/1.0\r\n\r\n", {"Content-Type": "application/warc"}))
        refused(400, s.request("POST", "/v1/batch?store=maybe", _ndjson(rows[:1])))
        assert s.request("GET", "/v1/nowhere").status == 404
        lines = s.request("POST", "/v1/batch", b'{"url": "https://a.example/"}\nnot json\n' + _ndjson(rows[:1]))
        got = lines.lines()
        assert [r["status"] for r in got] == ["malformed", "malformed", "ok"]
        assert got[0]["reason"] == 'missing "html"' and got[1]["url"] is None
        gzipped = s.request("POST", f"/v1/pages?url={rows[1]['url']}", gzip.compress(rows[1]["html"].encode()),
                            {"Content-Encoding": "gzip", "Content-Type": "text/html; charset=utf-8"})  # fmt: skip
        assert gzipped.status == 200 and gzipped.json()["status"] == "ok"
        assert s.request("GET", "/healthz").status == 200


def _partial_request(port: int, path: str, body: bytes, headers: dict[str, str]) -> socket.socket:
    """A request whose headers and the first half of whose body are sent; the rest is not (yet)."""
    sock = socket.create_connection(("127.0.0.1", port))
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(head.encode() + b"\r\n" + body[: len(body) // 2])
    return sock


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    sock.settimeout(120)
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    sock.close()
    return int(data.split(b" ", 2)[1]), data.split(b"\r\n\r\n", 1)[1]


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def test_a_slow_body_times_out_and_a_full_server_says_429_with_retry_after(tmp_path, stream):
    """A client that never finishes its body gets 408 after the request's time; while it holds the only request the
    server takes, another request is refused at once with 429 and Retry-After, not queued."""
    rows, _ = stream
    body = rows[0]["html"].encode("utf-8")
    args = ("--index", "memory://", "--max-requests", "1", "--request-timeout", "5")
    with Server(*args, log=tmp_path / "s.log") as s:
        slow = _partial_request(s.port, "/v1/pages?url=https://a.example/", body, {"Content-Type": "text/html"})
        deadline = time.monotonic() + 60
        while (busy := s.request("GET", "/v1/stats")).status == 200 and time.monotonic() < deadline:
            time.sleep(0.01)  # until the server has read the slow request's headers (it holds it from then on)
        assert busy.status == 429, busy.body
        assert busy.headers["retry-after"] == "1" and "busy" in busy.json()["error"]
        status, answer = _answer(slow)
        assert status == 408 and "did not arrive" in json.loads(answer)["error"]
        assert s.post_page("https://c.example/", body).status == 200


def test_a_stop_answers_the_request_it_holds_and_a_restart_finds_its_page(tmp_path, stream):
    """SIGTERM while a request is half sent: the server takes no new connection, waits for the rest of the body,
    answers it (its page stored), closes the on-disk index; restarted on it, it finds the page."""
    rows, _ = stream
    index = tmp_path / "index"
    row = rows[0]
    server = Server("--index", str(index), log=tmp_path / "s.log").start()
    from urllib.parse import quote

    sock = _partial_request(server.port, "/v1/pages?url=" + quote(row["url"], safe=""), row["html"].encode(),
                            {"Content-Type": "text/html; charset=utf-8"})  # fmt: skip
    time.sleep(0.5)  # the server has read the headers (the outcome is the same if it has not: it waits for them)
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    sock.sendall(row["html"].encode()[len(row["html"].encode()) // 2 :])
    status, answer = _answer(sock)
    assert status == 200, answer
    fingerprint = json.loads(answer)["fingerprint"]
    assert server.stop() in (0, -signal.SIGTERM)  # uvicorn ends by the signal it was stopped with
    with Server("--index", str(index), log=tmp_path / "s2.log") as again:
        matches = again.request("GET", f"/v1/fingerprints/{fingerprint}").json()["matches"]
        assert {"url": row["url"], "fingerprint": fingerprint, "distance": 0} in matches


@pytest.mark.slow
def test_kill_9_mid_stream_loses_no_acknowledged_page(tmp_path, stream):
    """Pages posted to a server on an on-disk index while it is killed with SIGKILL: every page it answered is in
    the index when a server is started on it again."""
    rows, _ = stream
    index = tmp_path / "index"
    server = Server("--index", str(index), log=tmp_path / "s.log").start()
    acknowledged = []
    for n, row in enumerate(rows):
        if n == len(rows) // 2:
            assert server.process is not None
            server.process.kill()
        try:
            answer = server.post_page(row["url"], row["html"])
        except OSError:
            continue
        if answer.status == 200:
            acknowledged.append(answer.json())
    server.stop()
    assert len(acknowledged) >= len(rows) // 2
    with Server("--index", str(index), log=tmp_path / "s2.log") as again:
        for record in acknowledged:
            matches = again.request("GET", f"/v1/fingerprints/{record['fingerprint']}?k=0").json()["matches"]
            assert any(m["url"] == record["url"] for m in matches), record


def test_a_token_is_asked_for_and_never_printed(tmp_path):
    """With a token every route but /healthz and /openapi.json asks for it (401 with WWW-Authenticate without it or
    with a wrong one); it is never in the log; without a token the server refuses to listen beyond loopback."""
    token = "s3cret-token-for-the-test"
    log = tmp_path / "s.log"
    with Server("--index", "memory://", "--host", "127.0.0.1", log=log, env={"SIMHASH_SERVE_TOKEN": token},
                token=token) as s:  # fmt: skip
        assert s.request("GET", "/v1/stats", token=False).status == 401
        wrong = s.request("GET", "/v1/stats", headers={"Authorization": "Bearer nope"})
        assert wrong.status == 401 and wrong.headers["www-authenticate"] == "Bearer"
        assert s.request("GET", "/metrics", token=False).status == 401
        assert s.request("GET", "/v1/stats").status == 200
        assert s.request("GET", "/healthz", token=False).status == 200
        doc = s.request("GET", "/openapi.json", token=False).json()
        assert doc["security"] == [{"token": []}]
    assert token not in log.read_text()
    refused = subprocess.run([sys.executable, "-m", "simhash_filter", "serve", "--host", "0.0.0.0"],
                             capture_output=True, text=True, env={k: v for k, v in _env().items()
                                                                  if k != "SIMHASH_SERVE_TOKEN"})  # fmt: skip
    assert refused.returncode == 2 and "needs a token" in refused.stderr


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_metrics_and_the_near_duplicate_log_line_are_the_crawls(server, stream):
    """``/metrics`` holds the crawl's counters in Prometheus' text format, and the server logs one line per
    near-duplicate in the crawl's words."""
    rows, expected = stream
    answer = server.request("POST", "/v1/batch", _ndjson(rows))
    assert answer.status == 200
    text = server.request("GET", "/metrics").body.decode()
    near = sum(1 for r in expected if r["duplicate_of"])
    assert f"simhash_near_duplicates_total {float(near)}" in text
    assert f"simhash_checked_total {float(len(rows))}" in text
    assert 'simhash_serve_requests_total{route="batch",status="200"} 1.0' in text
    assert "simhash_index_size " in text and 'simhash_distance_total{distance="' in text
    server.stop()
    lines = [line for line in server.output().splitlines() if ": near-duplicate of " in line]
    assert len(lines) == near
    first = next(r for r in expected if r["duplicate_of"])
    assert any(f"simhash: flagged {first['url']}: near-duplicate of {first['duplicate_of']} (distance "
               f"{first['distance']}, fingerprint {first['fingerprint']})" in line for line in lines)  # fmt: skip


def test_the_description_names_every_route(server):
    """``/openapi.json`` is an OpenAPI 3.1 document, and every route it describes is one the server answers."""
    doc = server.request("GET", "/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    for path, operations in doc["paths"].items():
        for method in operations:
            answer = server.request(method.upper(), path.replace("{fingerprint}", "0" * 16))
            assert answer.status not in (404, 405), (method, path)


def test_two_servers_on_one_redis_index_decide_as_one(tmp_path, redis_server, stream):
    """Two servers and a dedup run share one Redis index: a page stored through one is the page its near-duplicates
    are matched to through the other, and by dedup."""
    rows, expected = stream
    uri = f"{redis_server.url}?prefix=serve48"
    first_dup = next(n for n, r in enumerate(expected) if r["duplicate_of"])
    original = next(n for n, r in enumerate(rows) if r["url"] == expected[first_dup]["duplicate_of"])
    with Server("--index", uri, log=tmp_path / "a.log") as a, Server("--index", uri, log=tmp_path / "b.log") as b:
        assert a.post_page(rows[original]["url"], rows[original]["html"]).json()["stored"]
        dup = b.post_page(rows[first_dup]["url"], rows[first_dup]["html"]).json()
        assert dup["duplicate_of"] is not None
        assert b.request("GET", "/v1/stats").json()["pages"] == 2
    pages = tmp_path / "one.jsonl"
    pages.write_text(json.dumps(rows[original]) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert cli(["dedup", str(pages), "--index", uri, "--output", str(out), "--no-progress"]) == 0
    assert json.loads(out.read_text())["duplicate_of"] == rows[original]["url"]


def test_without_the_serve_extra_the_command_says_how_to_install_it():
    """With the server's packages missing, ``serve`` exits 1 with the pip line that installs them."""
    code = ("import sys; sys.modules['uvicorn'] = None; from simhash_filter.cli.main import main; "
            "sys.exit(main(['serve']))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1 and "pip install 'simhash-filter[serve]'" in done.stderr
