"""A real ``simhash-filter serve`` process on a free loopback port, and a plain HTTP client for it (http.client:
what any crawler's client sends): for the tests (tests/test_serve*.py) and the service's benchmark
(benchmarks/speed/bench_serve.py).

    with Server("--index", "memory://", log=Path("serve.log")) as server:
        print(server.post_page("https://a.example/", "<html>...</html>").json())
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: Seconds a server may take to answer its first /healthz (it loads the word tables in its workers first).
START_SECONDS = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.body.splitlines()]


class Server:
    """``simhash-filter serve ARGS`` started on a free port; stopped (SIGTERM) on exit.  Its log is kept in
    :attr:`log` (a file), read by :meth:`output`."""

    def __init__(self, *args: str, log: Path, env: dict[str, str] | None = None, token: str | None = None,
                 port: int | None = None, cwd: Path = REPO) -> None:  # fmt: skip
        self.port = port or free_port()
        self.args = [*args, "--port", str(self.port)]
        if "--workers" not in args:
            self.args += ["--workers", "1"]
        self.log_path = log
        self.env = {**os.environ, **(env or {})}
        self.token = token
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True) -> Server:
        self.log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, "-m", "simhash_filter", "serve", *self.args]
        self.process = subprocess.Popen(cmd, stdout=self.log_file, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited with {self.process.returncode}:\n{self.output()}")
            try:
                if self.request("GET", "/healthz").status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"the server did not answer within {START_SECONDS} s:\n{self.output()}")

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def connection(self, timeout: float = 120.0) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                token: bool = True) -> Answer:  # fmt: skip
        headers = dict(headers or {})
        if token and self.token is not None:
            headers.setdefault("Authorization", f"Bearer {self.token}")
        conn = self.connection()
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            conn.close()

    def post_page(self, url: str, html: bytes | str, content_type: str = "text/html; charset=utf-8",
                  check: bool = False) -> Answer:  # fmt: skip
        from urllib.parse import quote

        body = html.encode("utf-8") if isinstance(html, str) else html
        path = ("/v1/pages/check" if check else "/v1/pages") + "?url=" + quote(url, safe="")
        return self.request("POST", path, body, {"Content-Type": content_type})

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(60)
        finally:
            self.log_file.close()
        return code

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.stop()
        elif self.process is not None:
            self.log_file.close()
