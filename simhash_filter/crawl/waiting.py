"""Waiting in the crawl's event loop (asyncio's, or the Twisted reactor's) without blocking it: for a call in
worker threads (:func:`in_executor`), for a while (:func:`sleep`), or for one's turn (:class:`InOrder`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy.utils.asyncio import is_asyncio_available

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

__all__ = ["InOrder", "in_executor", "sleep"]

_T = TypeVar("_T")


def _future_to_deferred(future: Future[_T]) -> Deferred[_T]:
    from twisted.internet.defer import Deferred


    d: Deferred[_T] = Deferred()

    def fire(f: Future[_T]) -> None:
        if f.cancelled():  # the executor was shut down (the crawl ended) before it ran
            d.cancel()
            return
        exc = f.exception()
        if exc is None:
            d.callback(f.result())
        else:
            d.errback(exc)

    future.add_done_callback(lambda f: twisted_reactor().callFromThread(fire, f))
    return d


def twisted_reactor() -> Any:
    """The installed Twisted reactor, untyped: its methods are declared by zope interfaces, which mypy does not
    read without a plugin."""
    from twisted.internet import reactor

    return reactor


async def in_executor(executor: Executor, func: Callable[..., _T], *args: Any) -> _T:
    """Run ``func(*args)`` in *executor* (worker threads) and wait for it without blocking the reactor."""
    future = executor.submit(func, *args)
    if is_asyncio_available():
        return await asyncio.wrap_future(future)
    return await _future_to_deferred(future)


async def sleep(seconds: float) -> None:
    """Wait without blocking the reactor."""
    if is_asyncio_available():
        await asyncio.sleep(seconds)
        return
    from twisted.internet.defer import Deferred

    d: Deferred[None] = Deferred()
    twisted_reactor().callLater(seconds, d.callback, None)
    await d


def _waiter() -> tuple[Awaitable[None], Callable[[], None]]:
    """Something to wait on, and a function that wakes its waiter on the reactor's next turn (not at once:
    the caller goes on first)."""
    if is_asyncio_available():
        future = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)  # the waiting coroutine resumes on the loop's next turn

        return future, wake
    from twisted.internet.defer import Deferred

    d: Deferred[None] = Deferred()

    def fire() -> None:
        if not d.called:
            d.callback(None)

    def wake_later() -> None:
        twisted_reactor().callLater(0, fire)

    return d, wake_later


class InOrder:
    """Lets pages into the index one by one in the order they arrived (their tickets), whatever order their
    fingerprints come back in from worker threads or processes: the same pages arriving in the same order
    get the same decisions wherever they were fingerprinted.

    A page takes a ticket when it arrives, waits for its turn once it has its fingerprint, starts its index
    check and calls :meth:`done` (also when it is skipped, fails or is cancelled, so that nobody waits for it).
    """

    def __init__(self) -> None:
        self._issued = 0
        self._turn = 0  # the ticket whose turn it is
        self._done: set[int] = set()  # tickets done before their turn
        self._waiting: dict[int, Callable[[], None]] = {}

    def ticket(self) -> int:
        self._issued += 1
        return self._issued - 1

    async def wait(self, ticket: int) -> None:
        """Return when every page that arrived before ``ticket`` is done."""
        if ticket == self._turn:
            return
        waiter, wake = _waiter()
        self._waiting[ticket] = wake
        await waiter

    def done(self, ticket: int) -> None:
        self._waiting.pop(ticket, None)
        self._done.add(ticket)
        while self._turn in self._done:
            self._done.discard(self._turn)
            self._turn += 1
        wake = self._waiting.pop(self._turn, None)
        if wake is not None:
            wake()
