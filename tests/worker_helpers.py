"""A worker process for the tests (``python -m worker_helpers``, run by the filter when
``simhash_filter.crawl.workers.WORKER_MODULE`` names it): the real worker, but it dies on pages containing
``POISON`` (as a crash in a C extension, or the OOM killer, would kill it) and takes half a second over
pages containing ``SLOW``; and inputs that kill ``dedup``'s worker processes (:class:`PoisonPage`,
:class:`DyingConfig`)."""

from __future__ import annotations

import os
import time
from typing import Any

from simhash_filter.batch.dedup import Page
from simhash_filter.config import FingerprintConfig
from simhash_filter.crawl import workers

POISON = b"<!-- kill the worker -->"
SLOW = b"<!-- take your time -->"

_fingerprint = workers.fingerprint_in_worker


def fingerprint_or_die(job: Any, body: bytes | str, encoding: str | None) -> Any:
    if isinstance(body, bytes) and POISON in body:
        os._exit(70)
    if isinstance(body, bytes) and SLOW in body:
        time.sleep(0.5)
    return _fingerprint(job, body, encoding)


if __name__ == "__main__":
    workers.fingerprint_in_worker = fingerprint_or_die
    workers._main()


class PoisonPage(Page):
    """A ``dedup`` input page whose worker process dies as it receives it (unpickling it exits)."""

    __slots__ = ()

    def __reduce__(self) -> Any:
        return os._exit, (70,)


class DyingConfig(FingerprintConfig):
    """A model configuration whose worker processes die as they start (unpickling it exits)."""

    def __reduce__(self) -> Any:
        return os._exit, (71,)


def fail_to_start(*args: Any) -> None:
    """A worker initializer that kills its process (a worker that cannot start)."""
    os._exit(71)
