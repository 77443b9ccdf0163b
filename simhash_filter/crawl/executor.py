"""Where pages are fingerprinted, behind one call (:meth:`FingerprintExecutor.fingerprint`): in the reactor
thread, in worker threads (``SIMHASH_THREADS``) or in worker processes (``SIMHASH_PROCESSES``: pages go to the
reactor thread while they start, or once they are given up).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from simhash_filter.config import FingerprintConfig
from simhash_filter.crawl.report import Report, logger
from simhash_filter.crawl.stats import PageWork
from simhash_filter.crawl.waiting import in_executor
from simhash_filter.crawl.workers import (
    WARM_UP,
    FingerprintJob,
    JobResult,
    WorkerError,
    WorkerLost,
    WorkerPool,
    WorkerProcess,
    from_worker,
)
from simhash_filter.model.fingerprint import Fingerprint, Fingerprinter

__all__ = ["FingerprintExecutor", "Fingerprinted", "WorkerDied"]

#: A page fingerprinted: its fingerprint, what that measured, and whether its bytes were invalid in its charset.
Fingerprinted = tuple[Fingerprint, PageWork, bool]

#: After this many replacements of dead worker processes, pages are fingerprinted in the reactor thread.
MAX_WORKER_RESTARTS = 10
#: Worker processes that are not ready after this many seconds are given up (they take about 0.3 s).
WORKER_START_SECONDS = 60.0


class WorkerDied(Exception):
    """The worker process fingerprinting a page died, twice (it was replaced in between)."""


class FingerprintExecutor:
    """Fingerprints pages in the reactor thread, in ``threads`` worker threads or in ``processes`` worker
    processes (at most one of the two is not 0)."""

    def __init__(self, config: FingerprintConfig, report: Report, *, threads: int = 0, processes: int = 0) -> None:
        self.config = config
        self.report = report
        self.threads = threads
        self.processes = processes
        # the reactor thread's fingerprinter (with SIMHASH_PROCESSES: while the workers start)
        self._job = FingerprintJob(Fingerprinter(config))
        self._job(WARM_UP, None)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="simhash") if threads else None
        self._pool: WorkerPool | None = None  # SIMHASH_PROCESSES: started by start()
        self._pool_ready = False  # a worker has answered (logged once per pool)
        self._processes_failed = False  # the workers could not start, or died too often: the reactor thread
        self._worker_restarts = 0
        self._workers_started = False
        self.closed = False

    async def fingerprint(self, body: bytes | str, encoding: str | None) -> Fingerprinted:
        """Fingerprint one page where pages are fingerprinted now; raises :class:`WorkerDied`."""
        if self._executor is not None:
            return _measured(await in_executor(self._executor, self._job, body, encoding))
        pool = self._pool
        if pool is not None:
            # a pool started in another event loop cannot hear its workers here (a filter used outside a crawl)
            if pool.usable and self._is_ready(pool):
                return await self._in_processes(body, encoding)
            return self._in_reactor(body, encoding, instead_of_workers=True)  # while the workers start
        # after the workers were given up, or none asked for
        return self._in_reactor(body, encoding, instead_of_workers=self._processes_failed)

    def _in_reactor(self, body: bytes | str, encoding: str | None, *, instead_of_workers: bool) -> Fingerprinted:
        """Fingerprint a page in the reactor thread (*instead_of_workers*: worker processes were asked for); its
        reactor time is counted with its decision, or here when fingerprinting fails."""
        start = time.perf_counter()
        try:
            fingerprint, seconds, charset_error = self._job(body, encoding)
        except BaseException:
            if instead_of_workers:
                self.report.count.in_reactor()
            self.report.count.reactor_time(time.perf_counter() - start)
            raise
        work = PageWork(seconds, instead_of_workers, time.perf_counter() - start)
        return fingerprint, work, charset_error

    def where(self, planned: bool = False) -> str:
        """Where pages are fingerprinted (``planned``: before the spider opens)."""
        if self.threads:
            return f"in {self.threads} worker thread(s)"
        if self.processes and (planned or self._workers_started) and not self._processes_failed:
            return f"in {self.processes} worker process(es)"
        return "in the reactor thread"

    @property
    def workers(self) -> list[WorkerProcess]:
        """The worker processes running now (none before :meth:`start`, after :meth:`close` or once given up)."""
        return [] if self._pool is None else list(self._pool.workers)

    @property
    def workers_ready(self) -> bool:
        """Whether a worker process is ready to take pages now (checked without waiting)."""
        return self._pool is not None and self._pool.ready

    def start(self) -> None:
        """Start the worker processes (``SIMHASH_PROCESSES``) without waiting for them."""
        if not self.processes or self._pool is not None or self._processes_failed or self.closed:
            return
        try:
            self._pool = WorkerPool(self.config, self.processes, on_lost=self._worker_lost)
            self._workers_started = True
        except Exception:
            self._give_up_processes("could not start the worker processes", exc_info=True)
        self._pool_ready = False

    def _is_ready(self, pool: WorkerPool) -> bool:
        """Whether a worker is ready now (checked without waiting); gives up on workers that never start."""
        if pool.ready:
            if not self._pool_ready:
                self._pool_ready = True
                logger.info(
                    "simhash: %d worker process(es) fingerprinting, the first ready %.2f s after the start",
                    self.processes,
                    time.monotonic() - pool.started,
                )
            return True
        if not self._pool_ready and time.monotonic() - pool.started > WORKER_START_SECONDS:
            self._give_up_processes(f"the worker processes were not ready within {WORKER_START_SECONDS:g} s")
        return False

    async def _in_processes(self, body: bytes | str, encoding: str | None) -> Fingerprinted:
        """Fingerprint a page in the least busy worker process; if it dies, once more in another (the page may
        have killed it: a second death skips it)."""
        body = self._job.for_worker(body)
        for attempt in range(2):
            worker = self._pool.pick(ready_only=attempt == 0) if self._pool is not None else None
            if worker is None:  # the workers are gone for good: the reactor thread
                return self._in_reactor(body, encoding, instead_of_workers=True)
            try:
                return _measured(from_worker(await worker.fingerprint(body, encoding)))
            except WorkerLost:
                continue
            except WorkerError as exc:  # the fingerprinter raised in the worker: reported like in this thread
                raise RuntimeError(f"in worker process {worker.pid}:\n{exc}") from None
        raise WorkerDied("the worker process died while fingerprinting this page, twice")

    def _worker_lost(self, worker: WorkerProcess) -> None:
        """A worker process died: start another in its place, or give up on workers that cannot start."""
        pool = self._pool
        if pool is None or self.closed:
            return
        if worker.stopped:  # told to stop (a stop signal to the process group): the crawl is ending, not a crash
            logger.info("simhash: %s; not replaced", worker.lost)
            return
        if not worker.ready and not self._pool_ready:
            self._give_up_processes(f"the worker processes did not start ({worker.lost})")
            return
        if self._worker_restarts >= MAX_WORKER_RESTARTS:
            self._give_up_processes(f"worker processes died {self._worker_restarts + 1} times ({worker.lost})")
            return
        self._worker_restarts += 1
        self.report.worker_restarted(worker.lost)
        try:
            pool.replace(worker)
        except Exception:
            self._give_up_processes("could not start a worker process", exc_info=True)

    def _give_up_processes(self, why: str, exc_info: bool | BaseException = False) -> None:
        self._processes_failed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        logger.error("simhash: %s; fingerprinting in the reactor thread from now on", why, exc_info=exc_info)

    def close(self) -> None:
        """Stop the worker threads (pages not started are cancelled) and end the worker processes."""
        self.closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def _measured(result: JobResult) -> Fingerprinted:
    """A page fingerprinted off the reactor thread, with the seconds it took."""
    fingerprint, seconds, charset_error = result
    return fingerprint, PageWork(seconds), charset_error
