"""Fingerprinting pages off the crawl's reactor thread: :class:`FingerprintJob` (thread-safe), and
:class:`WorkerPool`, worker processes (``python -m simhash_filter.crawl.workers``: a fresh interpreter, never a
fork of a process that runs a reactor) that answer length-prefixed pickles of ``(body, encoding)`` in order over
their stdin/stdout.  The pipes are non-blocking and watched by the running event loop: no thread in the parent
(docs/speed.md, "Where pages are fingerprinted").  POSIX only.  No Scrapy here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO

from simhash_filter.config import FingerprintConfig
from simhash_filter.model.fingerprint import Fingerprint, Fingerprinter, Status

try:
    import fcntl
except ImportError:  # Windows: no worker processes (WorkerPool refuses to start)
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "STOP_SIGNALS",
    "WARM_UP",
    "FingerprintJob",
    "JobResult",
    "WorkerError",
    "WorkerLost",
    "WorkerPool",
    "WorkerProcess",
    "fingerprint_in_worker",
    "from_worker",
    "serve",
]

#: Fingerprinted once when a fingerprinter starts, so that loading the word tables does not stall the first page.
WARM_UP = (
    "<html><body><article><p>Loading the word tables before the crawl starts, once.</p>"
    "<p>在抓取开始之前加载词表。</p></article></body></html>"
)

#: A page's fingerprint, the seconds it took, and whether its bytes were invalid in the charset it was decoded with.
JobResult = tuple[Fingerprint, float, bool]
#: The same as plain values, as it comes back from a worker process (cheap to pickle on every Python).
WorkerResult = tuple[int | None, str, int, bool, str | None, float, bool, bytes | None, int]

_HEADER = struct.Struct("<I")  # the length of the pickle that follows
#: Seconds a closing worker gets to exit before it is killed.
EXIT_SECONDS = 5.0
#: Pipe buffer asked for on Linux (the default 64 KiB holds ten pages of 6 KiB).
PIPE_BYTES = 1 << 20
#: The module a worker process runs (``python -m WORKER_MODULE``).
WORKER_MODULE = "simhash_filter.crawl.workers"


class FingerprintJob:
    """Fingerprint one page; thread-safe (one :class:`Fingerprinter` per thread)."""

    def __init__(self, fingerprinter: Fingerprinter) -> None:
        self.config = fingerprinter.config
        self._local = threading.local()
        self._local.fingerprinter = fingerprinter  # the creating thread's

    def __call__(self, body: bytes | str, encoding: str | None) -> JobResult:
        """``(fingerprint, seconds, charset_error)``."""
        fingerprinter = getattr(self._local, "fingerprinter", None)
        if fingerprinter is None:
            fingerprinter = self._local.fingerprinter = Fingerprinter(self.config)
        start = time.perf_counter()
        fp = fingerprinter.fingerprint(body, encoding)
        charset_error = False
        if fp.ok and isinstance(body, bytes) and fp.encoding:
            try:
                body[: self.config.max_bytes].decode(fp.encoding)
            except UnicodeDecodeError as exc:
                charset_error = exc.start < self.config.max_bytes - 4  # not a character cut at the cap
            except LookupError:
                pass
        return fp, time.perf_counter() - start, charset_error

    def for_worker(self, body: bytes | str) -> bytes | str:
        """What of ``body`` a worker needs: up to one unit past the work cap (so it still sees the page as
        truncated), not the rest of a 30 MB download."""
        return body[: self.config.max_bytes + 1]


def fingerprint_in_worker(job: FingerprintJob, body: bytes | str, encoding: str | None) -> WorkerResult:
    """:class:`FingerprintJob` of one page, as plain values."""
    fp, seconds, charset_error = job(body, encoding)
    return (fp.value, fp.status.value, fp.features, fp.truncated, fp.encoding, seconds, charset_error, fp.sketch,
            fp.prose_bytes)  # fmt: skip


def from_worker(result: WorkerResult) -> JobResult:
    """:func:`fingerprint_in_worker`'s tuple back as ``(Fingerprint, seconds, charset_error)``."""
    value, status, features, truncated, encoding, seconds, charset_error, sketch, prose_bytes = result
    fp = Fingerprint(value, Status(status), features, truncated, encoding, sketch, prose_bytes)
    return fp, seconds, charset_error


# --- the worker process ---------------------------------------------------------------------------------


def _read_frame(stream: BinaryIO) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None  # the parent closed the pipe (or died): stop
    (size,) = _HEADER.unpack(header)
    return pickle.loads(stream.read(size))


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """A worker's life: a :class:`FingerprintConfig`, then ``(body, encoding)`` requests until end of input;
    answers ``("ready", pid)``, then per request ``("ok", WorkerResult)`` or ``("error", traceback)``."""
    config = _read_frame(stdin)
    if config is None:
        return
    job = FingerprintJob(Fingerprinter(config))
    job(WARM_UP, None)
    stdout.write(_frame(("ready", os.getpid())))
    stdout.flush()
    while (request := _read_frame(stdin)) is not None:
        try:
            answer: tuple[str, Any] = ("ok", fingerprint_in_worker(job, *request))
        except Exception:  # a bug in the fingerprinter: the parent counts it and lets the page through
            answer = ("error", traceback.format_exc())
        stdout.write(_frame(answer))
        stdout.flush()


#: Signals by which a whole process group is told to stop (Ctrl-C, ``timeout``, ``systemctl stop``, ``kill -- -PGID``).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _main() -> None:
    # a stop signal to the process group: the workers end when the crawl closes their pipes, not before
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the parent closed its end: just stop
        serve(sys.stdin.buffer, sys.stdout.buffer)
        sys.stdout.flush()
    os._exit(0)  # nothing to clean up: skip the interpreter's teardown


# --- the parent's side: event loop glue -------------------------------------------------------------------


class _Loop:
    """The running event loop's file watchers and futures: asyncio's loop if one runs in this thread (the
    asyncio reactor, or Scrapy without a reactor), else the Twisted reactor."""

    def __init__(self) -> None:
        try:
            self.asyncio: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.asyncio = None
        self._descriptors: dict[tuple[int, str], Any] = {}

    def is_current(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.asyncio
        except RuntimeError:
            return self.asyncio is None

    def watch(self, fd: int, kind: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever ``fd`` is readable (``kind="r"``) or writable (``"w"``)."""
        if self.asyncio is not None:
            (self.asyncio.add_reader if kind == "r" else self.asyncio.add_writer)(fd, callback)
            return
        from twisted.internet import reactor as installed

        reactor: Any = installed  # its methods are zope interfaces', which mypy does not read
        descriptor = _Descriptor(fd, callback)
        self._descriptors[fd, kind] = descriptor
        (reactor.addReader if kind == "r" else reactor.addWriter)(descriptor)

    def unwatch(self, fd: int, kind: str) -> None:
        if self.asyncio is not None:
            if not self.asyncio.is_closed():
                (self.asyncio.remove_reader if kind == "r" else self.asyncio.remove_writer)(fd)
            return
        from twisted.internet import reactor as installed

        reactor: Any = installed  # its methods are zope interfaces', which mypy does not read
        descriptor = self._descriptors.pop((fd, kind), None)
        if descriptor is not None:
            (reactor.removeReader if kind == "r" else reactor.removeWriter)(descriptor)

    def future(self) -> tuple[Awaitable[Any], Callable[[Any], None], Callable[[BaseException], None]]:
        """Something to await, and the functions that give it its result or its exception."""
        if self.asyncio is not None:
            f = self.asyncio.create_future()

            def resolve(value: Any) -> None:
                if not f.done():
                    f.set_result(value)

            def reject(exc: BaseException) -> None:
                if not f.done():
                    f.set_exception(exc)

            return f, resolve, reject
        from twisted.internet.defer import Deferred

        d: Deferred[Any] = Deferred()
        def fire(value: Any) -> None:
            if not d.called:
                d.callback(value)

        def fail(exc: BaseException) -> None:
            if not d.called:
                d.errback(exc)

        return d, fire, fail


class _Descriptor:
    """A file descriptor for the Twisted reactor's ``addReader``/``addWriter``."""

    def __init__(self, fd: int, callback: Callable[[], None]) -> None:
        self.fd = fd
        self.callback = callback

    def fileno(self) -> int:
        return self.fd

    def doRead(self) -> None:
        self.callback()

    def doWrite(self) -> None:
        self.callback()

    def connectionLost(self, reason: Any) -> None:
        pass

    def logPrefix(self) -> str:
        return "simhash-worker"


class WorkerError(Exception):
    """Fingerprinting raised in the worker (the message holds its traceback)."""


class WorkerLost(Exception):
    """The worker process died (or closed its pipe) before it answered."""


# --- the parent's side: the workers -----------------------------------------------------------------------


class WorkerProcess:
    """One worker process, its pipes watched by the event loop; answers come back in request order."""

    def __init__(self, config: FingerprintConfig, loop: _Loop, on_lost: Callable[[WorkerProcess], None]) -> None:
        self.loop = loop
        self.on_lost = on_lost
        self.started = time.monotonic()
        self.ready = False
        self.lost: str | None = None  # why it is gone
        self.pending: deque[tuple[Callable[[Any], None], Callable[[BaseException], None]]] = deque()
        path = [p or os.getcwd() for p in sys.path]  # the parent's modules, this package included
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
        self.popen = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        assert self.popen.stdin is not None and self.popen.stdout is not None
        self.pid = self.popen.pid
        self._in, self._out = self.popen.stdin.fileno(), self.popen.stdout.fileno()
        for fd in (self._in, self._out):
            os.set_blocking(fd, False)
            if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux: room for more pages in flight without waiting
                with contextlib.suppress(OSError):
                    fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self._unsent = bytearray()
        self._received = bytearray()
        loop.watch(self._out, "r", self._readable)
        self._send(_frame(config))

    def fingerprint(self, body: bytes | str, encoding: str | None) -> Awaitable[WorkerResult]:
        """Send one page; await its :data:`WorkerResult` (raises :class:`WorkerLost`, :class:`WorkerError`)."""
        awaitable, resolve, reject = self.loop.future()
        if self.lost:
            reject(WorkerLost(self.lost))
            return awaitable
        self.pending.append((resolve, reject))
        self._send(_frame((body, encoding)))
        return awaitable

    def _send(self, data: bytes) -> None:
        if self._unsent:
            self._unsent += data
            return
        try:
            written = os.write(self._in, data)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._gone(f"could not be written to ({exc})")
            return
        if written < len(data):
            self._unsent += data[written:]
            self.loop.watch(self._in, "w", self._writable)

    def _writable(self) -> None:
        try:
            written = os.write(self._in, self._unsent)
        except BlockingIOError:
            return
        except OSError as exc:
            self._gone(f"could not be written to ({exc})")
            return
        del self._unsent[:written]
        if not self._unsent:
            self.loop.unwatch(self._in, "w")

    def _readable(self) -> None:
        try:
            data = os.read(self._out, 1 << 20)
        except BlockingIOError:
            return
        except OSError as exc:
            self._gone(f"could not be read from ({exc})")
            return
        if not data:
            self._gone("exited")
            return
        self._received += data
        answers = []
        while len(self._received) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._received)
            if len(self._received) < _HEADER.size + size:
                break
            answers.append(pickle.loads(self._received[_HEADER.size : _HEADER.size + size]))
            del self._received[: _HEADER.size + size]
        for kind, value in answers:
            if self.lost:  # closed meanwhile by what an answer set off (the crawl ended)
                return
            if kind == "ready":
                self.ready = True
                continue
            if not self.pending:
                self._gone("answered a request it was not sent")
                return
            resolve, reject = self.pending.popleft()
            if kind == "ok":
                resolve(value)
            else:
                reject(WorkerError(value))

    def _gone(self, why: str) -> None:
        if self.lost:
            return
        self._stop()
        code = self.popen.returncode
        self.lost = f"worker process {self.pid} {why}" + ("" if code is None else f", exit status {code}")
        pending, self.pending = self.pending, deque()
        for _, reject in pending:
            reject(WorkerLost(self.lost))
        self.on_lost(self)

    @property
    def stopped(self) -> bool:
        """Whether it ended by a stop signal (:data:`STOP_SIGNALS`): told to stop, not crashed."""
        code = self.popen.returncode
        return code is not None and -code in {int(s) for s in STOP_SIGNALS}

    def close(self) -> None:
        """End the worker (it exits when its input ends) and wait for it; pages still pending fail."""
        if self.lost:
            return
        self.lost = f"worker process {self.pid} closed"
        self._stop()
        pending, self.pending = self.pending, deque()
        for _, reject in pending:
            reject(WorkerLost(self.lost))

    def _stop(self) -> None:
        self.loop.unwatch(self._out, "r")
        if self._unsent:
            self.loop.unwatch(self._in, "w")
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            self.popen.wait(EXIT_SECONDS)  # at once: it exits when its input ends, or has exited already
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


class WorkerPool:
    """``processes`` worker processes, started without waiting for them; ``on_lost(worker)`` is called when one
    dies, and :meth:`replace` starts another in its place."""

    def __init__(
        self, config: FingerprintConfig, processes: int, on_lost: Callable[[WorkerProcess], None] | None = None
    ) -> None:
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes!r}")
        if sys.platform == "win32":
            raise OSError("worker processes need POSIX pipes: not on Windows")
        self.config = config
        self.loop = _Loop()
        self._on_lost = on_lost
        self.started = time.monotonic()
        self.workers: list[WorkerProcess] = []
        # a pool never closed ends its workers when Python exits (killed, they exit as their input ends)
        weakref.finalize(self, _close_all, self.workers)
        try:
            for _ in range(processes):
                self.workers.append(WorkerProcess(config, self.loop, self._lost))
        except BaseException:
            self.close()
            raise

    @property
    def ready(self) -> bool:
        return any(w.ready for w in self.workers)

    @property
    def usable(self) -> bool:
        """Whether the pool runs on this thread's event loop (a pool started in another loop is deaf here)."""
        return self.loop.is_current()

    def pick(self, ready_only: bool = True) -> WorkerProcess | None:
        """The worker with the fewest pages pending: among the ready ones, or (``ready_only=False``) among
        all (a page then waits for a starting worker)."""
        candidates = [w for w in self.workers if w.ready or not ready_only]
        return min(candidates, key=lambda w: len(w.pending), default=None)

    def replace(self, worker: WorkerProcess) -> WorkerProcess:
        """Start another worker in place of ``worker`` (dead, already out of :attr:`workers`)."""
        new = WorkerProcess(self.config, self.loop, self._lost)
        self.workers.append(new)
        return new

    def _lost(self, worker: WorkerProcess) -> None:
        if worker in self.workers:
            self.workers.remove(worker)
        if self._on_lost is not None:
            self._on_lost(worker)

    def close(self) -> None:
        _close_all(self.workers)


def _close_all(workers: list[WorkerProcess]) -> None:
    closing = list(workers)
    workers.clear()
    for worker in closing:
        worker.close()


if __name__ == "__main__":
    _main()
