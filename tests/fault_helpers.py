"""Helpers of the fault-injection suite (``tests/test_fault_injection.py``): a process's children (from
``/proc``), a small tmpfs mounted for one test, a JSON Lines input of small seeded pages, a local site of
hostile pages (a gzip bomb among them, which ``devsites.localsite`` cannot serve: it sends no
Content-Encoding), and a Scrapy extension that records the crawl process's peak memory in its stats."""

from __future__ import annotations

import contextlib
import gzip
import html
import json
import os
import random
import resource
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from scrapy import signals

from devsites import pages as p

#: Why the small-filesystem tests cannot run here, or None if they can (root, and ``mount -t tmpfs`` works).
_TMPFS_PROBLEM: list[str | None] = []


def children(pid: int) -> list[int]:
    """The pids of the live children of process *pid* (read from ``/proc/*/stat``: this kernel may lack
    ``/proc/PID/task/*/children``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return sorted(found)


def cmdline(pid: int) -> str:
    """The command line of process *pid* ("" if it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def tmpfs_problem() -> str | None:
    """Why a tmpfs cannot be mounted here (not root, no ``mount``, or the kernel refuses), or None; probed
    once per session."""
    if not _TMPFS_PROBLEM:
        _TMPFS_PROBLEM.append(_probe_tmpfs())
    return _TMPFS_PROBLEM[0]


def _probe_tmpfs() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "no mount/umount command"
    import tempfile

    with tempfile.TemporaryDirectory() as probe:
        try:
            with small_filesystem(Path(probe), 64 * 1024):
                pass
        except (OSError, subprocess.SubprocessError) as exc:
            return f"mount -t tmpfs failed: {exc}"
    return None


@contextlib.contextmanager
def small_filesystem(path: Path, size: int) -> Iterator[Path]:
    """A tmpfs of *size* bytes mounted on *path* (created) for the block; unmounted on exit, whatever happens."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if mounted.returncode != 0:
        raise OSError(f"mount: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)  # busy: detach it


def fill(directory: Path, leave: int) -> Path:
    """Write a file in *directory* until its filesystem has at most *leave* bytes free; the file's path."""
    filler = directory / "filler"
    with open(filler, "wb") as f:
        while True:
            stat = os.statvfs(directory)
            free = stat.f_bavail * stat.f_frsize
            if free <= leave:
                break
            try:
                f.write(bytes(min(free - leave, 1 << 20)))
                f.flush()
            except OSError:
                break
    return filler


def page_lines(n: int, seed: int) -> list[bytes]:
    """*n* JSON Lines of small pages (``{"url", "html"}``, ~0.6 kB of made-up words each), about a third of
    them near-duplicates (one word changed) of an earlier one, seeded."""
    rng = random.Random(seed)
    syllables = "ka lo mi ne ru ta so vi de po gu ba fe zi cho wa".split()
    vocabulary = ["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(5000)]
    originals: list[list[str]] = []
    lines = []
    for i in range(n):
        if originals and rng.random() < 0.3:
            words = list(rng.choice(originals))
            words[rng.randrange(len(words))] = rng.choice(vocabulary)
        else:
            words = [rng.choice(vocabulary) for _ in range(rng.randint(60, 150))]
            originals.append(words)
        page = f"<html><body><article><h1>{words[0]}</h1><p>{' '.join(words)}</p></article></body></html>"
        lines.append(json.dumps({"url": f"https://s.example/{i}", "html": page}).encode() + b"\n")
    return lines


# --- a site of hostile pages ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    body: bytes
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/html; charset=utf-8"),)


def _gzip_bomb(size: int) -> bytes:
    """An HTML page of about *size* bytes (``<p>`` and spaces) gzip-compressed to about a thousandth of that: gzip
    members of 1 MiB of spaces, back to back (a gzip stream may hold many members, read as one)."""
    spaces = gzip.compress(b" " * (1 << 20), 9, mtime=0)
    head = gzip.compress(b"<!DOCTYPE html><html><body><p>", 9, mtime=0)
    return head + spaces * (size >> 20) + gzip.compress(b"</p></body></html>", 9, mtime=0)


#: The ordinary pages of :func:`hostile_site`: distinct articles, and a near-duplicate of the first.
ORDINARY = {
    "/news/rainwater": p.gazette(p.RAINWATER),
    "/news/lighthouse": p.gazette(p.LIGHTHOUSE),
    "/news/backups": p.gazette(p.BACKUPS),
    "/zh/library": p.portal(p.LIBRARY),
    "/blog/rainwater": p.ledger(p.RAINWATER),  # a copy of /news/rainwater in another template: dropped
}
GZIP = (("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip"))


def hostile_site() -> dict[str, Response]:
    """The pages by path: the ordinary pages (``ORDINARY``) and hostile pages beside them, all linked from
    ``/``."""
    rng = random.Random(17)
    hostile = {
        # 1 GiB of HTML in a 1 MB gzip response: past DOWNLOAD_MAXSIZE (32 MiB), Scrapy stops decompressing it
        "/hostile/gzip-bomb": Response(_gzip_bomb(1 << 30), GZIP),
        # 20 MB of HTML in a 50 kB gzip response, within DOWNLOAD_MAXSIZE: read up to the 4 MB work cap
        "/hostile/gzip-huge": Response(
            gzip.compress(b"<html><body><p>" + b"lantern quarry meadow " * 900_000 + b"</p></body></html>"), GZIP
        ),
        "/hostile/deep-nesting": Response(b"<html><body>" + b"<div>" * 200_000 + b"deep text" + b"</div>" * 200_000),
        # 10 MB of distinct words: fingerprinted up to the work cap
        "/hostile/huge-text": Response(
            b"<html><body><p>"
            + " ".join(f"w{rng.getrandbits(40):x}" for _ in range(900_000)).encode()
            + b"</p></body></html>"
        ),
        "/hostile/binary": Response(rng.randbytes(200_000)),  # served as text/html
        "/hostile/bad-charset": Response(
            p.portal(p.TEA_GARDEN).encode(), (("Content-Type", "text/html; charset=x-no-such-charset-9"),)
        ),
        "/hostile/empty": Response(b""),
    }
    paths = [*ORDINARY, *hostile]
    links = "".join(f'<li><a href="{path}">{html.escape(path)}</a></li>' for path in paths)
    front = "<!DOCTYPE html><html><head><title>Hostile test site</title></head><body><h1>Hostile test site</h1>"
    front += "<p>Every page of this site is linked below: ordinary articles, and pages made to hurt a crawler.</p>"
    front += f"<ul>{links}</ul></body></html>"
    pages = {"/": Response(front.encode()), **{path: Response(text.encode()) for path, text in ORDINARY.items()}}
    return {**pages, **hostile}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        page = self.server.pages.get(self.path)
        if page is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        for name, value in page.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(page.body)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the crawler may give up on a large body
            self.wfile.write(page.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pages: dict[str, Response]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.pages = pages


@contextlib.contextmanager
def serve(pages: dict[str, Response]) -> Iterator[int]:
    """Serve *pages* on 127.0.0.1 in a thread; yield the port."""
    server = _Server(pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class PeakMemory:
    """Sets the stat ``fault/peak_rss_mb`` (this process's peak resident memory) when the spider closes
    (enabled in tests only, before ``crawl_helpers.StatsToJson`` writes the stats)."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> PeakMemory:
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_closed(self, spider: Any) -> None:
        peak_kb = _peak_kb()
        self.crawler.stats.set_value("fault/peak_rss_mb", round(peak_kb / 1024, 1))


def _peak_kb() -> int:
    """This process's own peak resident memory, in kilobytes: ``VmHWM`` (reset by exec) where Linux has it, since
    ``ru_maxrss`` keeps the peak of the process it was forked from (a crawl started late in the suite reported the
    pytest process's 1.1-1.4 GB, alone its own 0.47 GB)."""
    with contextlib.suppress(OSError, StopIteration), open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
