"""``simhash-filter serve`` against ``simhash-filter dedup`` on the same stream, and the service under stress.

Parts (``--parts``, all by default):

- ``throughput``: ``dedup INPUT --workers W`` (its whole process, start-up included), then the same stream posted
  to a warm server with ``--workers W`` as batches of ``--batch`` pages by one client over loopback; pages/s of each,
  their ratio, and whether the decisions are the same;
- ``latency``: ``--clients`` threads each posting single pages (``/v1/pages``, keep-alive) to a fresh server:
  p50/p99 of a request's time, beside the median of fingerprinting and checking the same pages in this process;
- ``kill``: pages posted one by one to a server on an on-disk index that is killed with SIGKILL halfway; a server
  restarted on the index is asked for every page acknowledged before the kill;
- ``stop``: ``--clients`` threads posting pages while the server is sent SIGTERM: each request is answered (200),
  refused with a status, or refused at connect; a request sent whose answer never came would be counted as lost;
- ``hostile``: a 100 MB body, a gzip bomb (1 GiB of zeros), an unknown charset, a wrong and a missing token, 64
  clients that never finish their bodies, and a flood of tiny requests (as many as ``--flood-clients`` connections
  send for ``--flood-seconds``): the statuses, whether the server still answers, its memory (VmHWM, the server's
  process and its workers) before and after.

    python -m benchmarks.speed.bench_serve [--input PAGES.jsonl[.gz]] [--pages 2000] [--workers 2] [--json OUT]
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from benchmarks.benchlib.data import PUBLIC_PAGES, read_jsonl
from benchmarks.benchlib.measure import percentile, timed_run
from benchmarks.benchlib.report import make_parser, write_json
from benchmarks.speed.bench_dedup import our_command
from devsites.sample import sample
from devsites.serve_server import Server

PARTS = ("throughput", "latency", "kill", "stop", "hostile")
TOKEN = "bench-token"


def load_pages(path: Path | None, limit: int) -> list[dict[str, str]]:
    """The first *limit* pages of *path* (JSON Lines), else of the public set when it is there, else generated."""
    source = path or (PUBLIC_PAGES if PUBLIC_PAGES.exists() else None)
    if source is None:
        rows = sample(max(1, limit // 8), seed=48)
    else:
        rows = []
        for row in read_jsonl(source):
            rows.append({"url": row["url"], "html": row["html"]})
            if len(rows) >= limit:
                break
    return [{"url": r["url"], "html": r["html"]} for r in rows[:limit]]


def ndjson(rows: list[dict[str, str]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


def vm_hwm_kib(pid: int) -> int:
    """Peak resident memory of *pid* and its children (KiB, Linux)."""
    total = 0
    pids = [pid]
    with contextlib.suppress(OSError):
        pids += [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def keys(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["url"], r["fingerprint"], r["duplicate_of"], r["distance"]) for r in records]


def throughput(pages: list[dict[str, str]], workers: int, batch: int, tmp: Path) -> dict[str, Any]:
    source, out = tmp / "pages.jsonl", tmp / "dedup.jsonl"
    source.write_bytes(ndjson(pages))
    proc, usage = timed_run([*our_command(), "dedup", str(source), "--output", str(out), "--workers", str(workers),
                             "--no-progress"], capture_output=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    expected = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    with Server("--index", "memory://", "--workers", str(workers), "--max-batch", str(batch),
                log=tmp / "throughput.log") as server:  # fmt: skip
        got: list[dict[str, Any]] = []
        start = time.perf_counter()
        for n in range(0, len(pages), batch):
            answer = server.request("POST", "/v1/batch", ndjson(pages[n : n + batch]))
            assert answer.status == 200, answer.body[:300]
            got += answer.lines()
        wall = time.perf_counter() - start
    return {"pages": len(pages), "workers": workers, "batch": batch, "dedup_seconds": round(usage.wall, 2),
            "dedup_pages_per_s": round(len(pages) / usage.wall, 1), "serve_seconds": round(wall, 2),
            "serve_pages_per_s": round(len(pages) / wall, 1), "ratio": round(usage.wall / wall, 2),
            "same_decisions": keys(got) == keys(expected)}  # fmt: skip


def latency(pages: list[dict[str, str]], workers: int, clients: int, tmp: Path) -> dict[str, Any]:
    from simhash_filter import DEFAULTS, fingerprint, open_index

    index = open_index(DEFAULTS)
    local = []
    for row in pages:
        start = time.perf_counter()
        fp = fingerprint(row["html"])
        if fp.ok:
            index.check_and_add(fp.value, row["url"], fp.sketch)
        local.append(time.perf_counter() - start)
    times: list[float] = []
    lock = threading.Lock()
    with Server("--index", "memory://", "--workers", str(workers), log=tmp / "latency.log") as server:

        def client(share: list[dict[str, str]]) -> None:
            conn = server.connection()
            mine = []
            for row in share:
                body = row["html"].encode("utf-8")
                start = time.perf_counter()
                conn.request("POST", "/v1/pages?url=" + quote(row["url"], safe=""), body,
                             {"Content-Type": "text/html; charset=utf-8"})  # fmt: skip
                answer = conn.getresponse()
                answer.read()
                mine.append(time.perf_counter() - start)
                assert answer.status == 200
            conn.close()
            with lock:
                times.extend(mine)

        threads = [threading.Thread(target=client, args=(pages[i::clients],)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return {"pages": len(pages), "clients": clients, "workers": workers,
            "p50_ms": round(1000 * percentile(times, 0.5), 2), "p99_ms": round(1000 * percentile(times, 0.99), 2),
            "in_process_median_ms": round(1000 * statistics.median(local), 2)}  # fmt: skip


def kill(pages: list[dict[str, str]], workers: int, tmp: Path) -> dict[str, Any]:
    index = tmp / "kill-index"
    server = Server("--index", str(index), "--workers", str(workers), log=tmp / "kill.log").start()
    acknowledged = []
    for n, row in enumerate(pages):
        if n == len(pages) // 2:
            assert server.process is not None
            os.kill(server.process.pid, signal.SIGKILL)
        try:
            answer = server.post_page(row["url"], row["html"])
        except OSError:
            continue
        if answer.status == 200 and answer.json()["status"] == "ok":
            acknowledged.append(answer.json())
    server.stop()
    found = 0
    with Server("--index", str(index), "--workers", "0", log=tmp / "kill2.log") as again:
        for record in acknowledged:
            matches = again.request("GET", f"/v1/fingerprints/{record['fingerprint']}?k=0").json()["matches"]
            found += any(m["url"] == record["url"] for m in matches)
    return {"acknowledged": len(acknowledged), "found_after_restart": found}


def stop(pages: list[dict[str, str]], workers: int, clients: int, tmp: Path) -> dict[str, Any]:
    counts: dict[str, int] = {}
    lock = threading.Lock()
    server = Server("--index", "memory://", "--workers", str(workers), log=tmp / "stop.log").start()
    halt = threading.Event()

    def count(what: str) -> None:
        with lock:
            counts[what] = counts.get(what, 0) + 1

    def client(share: list[dict[str, str]]) -> None:
        for row in share:
            if halt.is_set():
                return
            try:
                conn = server.connection(timeout=60)
                conn.connect()
            except OSError:
                count("refused at connect")
                halt.set()
                return
            try:
                conn.request("POST", "/v1/pages?url=" + quote(row["url"], safe=""), row["html"].encode(),
                             {"Content-Type": "text/html; charset=utf-8"})  # fmt: skip
                answer = conn.getresponse()
                answer.read()
                count("answered 200" if answer.status == 200 else f"refused with {answer.status}")
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as exc:
                count(f"lost ({type(exc).__name__})")
            finally:
                conn.close()

    threads = [threading.Thread(target=client, args=(pages[i::clients] * 20,)) for i in range(clients)]
    for t in threads:
        t.start()
    time.sleep(3)
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    code = server.process.wait(120)
    halt.set()
    for t in threads:
        t.join()
    server.stop()
    return {"clients": clients, "exit": code, **counts}


def _send_raw(port: int, data: bytes, read: bool = True) -> int | None:
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        if not read:
            return None
        answer = b""
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    return int(answer.split(b" ", 2)[1]) if answer else None


def hostile(pages: list[dict[str, str]], workers: int, flood_clients: int, flood_seconds: float,
            tmp: Path) -> dict[str, Any]:  # fmt: skip
    html = pages[0]["html"].encode("utf-8")
    out: dict[str, Any] = {}
    env = {"SIMHASH_SERVE_TOKEN": TOKEN}
    with Server("--index", "memory://", "--workers", str(workers), "--request-timeout", "5", log=tmp / "hostile.log",
                env=env, token=TOKEN) as server:  # fmt: skip
        assert server.process is not None
        pid = server.process.pid
        out["memory_before_kib"] = vm_hwm_kib(pid)
        # 100 MB in chunks (no Content-Length: found while reading), then with a Content-Length
        conn = server.connection()
        conn.putrequest("POST", "/v1/pages?url=https://a.example/")
        conn.putheader("Authorization", f"Bearer {TOKEN}")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        status = None
        try:
            for _ in range(100):
                piece = b"a" * 1_000_000
                conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            status = conn.getresponse().status
        except (ConnectionResetError, http.client.RemoteDisconnected):
            status = "reset"
        conn.close()
        out["100MB chunked body"] = status
        head = (f"POST /v1/pages?url=https://a.example/ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                f"Content-Length: {100_000_000}\r\n\r\n").encode()  # fmt: skip
        out["100MB Content-Length"] = _send_raw(server.port, head + b"a" * 65536)
        bomb = gzip.compress(b"\0" * (1 << 30), compresslevel=9)
        out["gzip bomb (1 GiB)"] = server.request("POST", "/v1/pages?url=https://a.example/", bomb,
                                                  {"Content-Encoding": "gzip"}).status  # fmt: skip
        out["unknown charset"] = server.post_page("https://a.example/", html, "text/html; charset=x-nothing").status
        out["missing token"] = server.request("GET", "/v1/stats", token=False).status
        out["wrong token"] = server.request("GET", "/v1/stats", headers={"Authorization": "Bearer wrong"}).status
        # 64 clients that never finish their bodies: each answered 408 (or 429 past the request limit)
        slow_socks = []
        for _ in range(64):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(head.replace(b"100000000", b"5000") + b"a" * 100)
            slow_socks.append(sock)
        statuses: dict[str, int] = {}
        for sock in slow_socks:
            sock.settimeout(60)
            try:
                data = sock.recv(4096)
                key = data.split(b" ", 2)[1].decode() if data else "closed"
            except OSError:
                key = "timeout"
            statuses[key] = statuses.get(key, 0) + 1
            sock.close()
        out["64 slow bodies"] = statuses
        # a flood of tiny requests
        sent = [0]
        answered: dict[str, int] = {}
        lock = threading.Lock()
        deadline = time.monotonic() + flood_seconds

        def flood() -> None:
            conn = server.connection(timeout=30)
            mine: dict[str, int] = {}
            n = 0
            while time.monotonic() < deadline:
                try:
                    conn.request("POST", "/v1/pages/check?url=https://t.example/", b"<p>tiny</p>",
                                 {"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/html"})  # fmt: skip
                    answer = conn.getresponse()
                    answer.read()
                    key = str(answer.status)
                except (OSError, http.client.HTTPException) as exc:
                    key = type(exc).__name__
                    conn.close()
                    conn = server.connection(timeout=30)
                mine[key] = mine.get(key, 0) + 1
                n += 1
            with lock:
                sent[0] += n
                for k, v in mine.items():
                    answered[k] = answered.get(k, 0) + v

        threads = [threading.Thread(target=flood) for _ in range(flood_clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out["flood"] = {"requests_per_s": round(sent[0] / flood_seconds), "statuses": answered}
        out["health after"] = server.request("GET", "/healthz").status
        out["memory_after_kib"] = vm_hwm_kib(pid)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--input", type=Path, help="JSON Lines pages (default: the public set, else generated)")
    parser.add_argument("--pages", type=int, default=2000, help="pages of the stream (default: 2000)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes, dedup's and the server's")
    parser.add_argument("--batch", type=int, default=200, help="pages per batch request (default: 200)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default: 8)")
    parser.add_argument("--flood-clients", type=int, default=32)
    parser.add_argument("--flood-seconds", type=float, default=5.0)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    pages = load_pages(args.input, args.pages)
    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    results: dict[str, Any] = {}
    try:
        for part in args.parts.split(","):
            if part == "throughput":
                results[part] = throughput(pages, args.workers, args.batch, tmp)
            elif part == "latency":
                results[part] = latency(pages[: min(len(pages), 800)], args.workers, args.clients, tmp)
            elif part == "kill":
                results[part] = kill(pages[: min(len(pages), 200)], args.workers, tmp)
            elif part == "stop":
                results[part] = stop(pages[: min(len(pages), 200)], args.workers, args.clients, tmp)
            elif part == "hostile":
                results[part] = hostile(pages, args.workers, args.flood_clients, args.flood_seconds, tmp)
            else:
                parser.error(f"unknown part {part!r}")
            print(part, json.dumps(results[part]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        write_json(args.json, results, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
