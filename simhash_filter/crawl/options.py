"""The filter's options from a crawl's ``SIMHASH_*`` settings: read, defaulted and checked, each error naming
its setting.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from simhash_filter.config import FilterConfig, available_cpus
from simhash_filter.crawl import settings as defaults
from simhash_filter.crawl.avoid import check_avoid_options
from simhash_filter.crawl.indexpath import default_index_path
from simhash_filter.index.backends import with_uri_option
from simhash_filter.index.backends.file import parse_age

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = [
    "ACTIONS",
    "avoid_options",
    "backend_uri",
    "check_options",
    "filter_config",
    "known_max_age",
    "processes_setting",
    "worker_processes",
]

ACTIONS = ("drop", "flag")


def _setting_name(message: str) -> str:
    names = ("structure_weight", "dom_decay", "max_distance", "min_similarity", "candidates_per_table",
             "block_duplicates", "expected_pages")  # fmt: skip
    for name in names:
        message = message.replace(name, f"SIMHASH_{name.upper()}")
    return message


def filter_config(settings: BaseSettings) -> FilterConfig:
    """The :class:`FilterConfig` described by the ``SIMHASH_*`` settings (defaults: ``DEFAULTS``)."""
    try:
        fingerprint = FilterConfig().fingerprint.with_options(
            structure_weight=settings.getfloat("SIMHASH_STRUCTURE_WEIGHT", defaults.SIMHASH_STRUCTURE_WEIGHT),
            dom_decay=settings.getfloat("SIMHASH_DOM_DECAY", defaults.SIMHASH_DOM_DECAY),
        )
        return FilterConfig(
            fingerprint,
            settings.getint("SIMHASH_MAX_DISTANCE", defaults.SIMHASH_MAX_DISTANCE),
            settings.getfloat("SIMHASH_MIN_SIMILARITY", defaults.SIMHASH_MIN_SIMILARITY),
            settings.getint("SIMHASH_CANDIDATES_PER_TABLE", defaults.SIMHASH_CANDIDATES_PER_TABLE),
            settings.getint("SIMHASH_BLOCK_DUPLICATES", defaults.SIMHASH_BLOCK_DUPLICATES),
            settings.getint("SIMHASH_EXPECTED_PAGES", defaults.SIMHASH_EXPECTED_PAGES),
        )
    except ValueError as exc:
        raise ValueError(_setting_name(str(exc))) from None


def processes_setting(settings: BaseSettings) -> int | None:
    """``SIMHASH_PROCESSES``: a number, or None (also written ``""``, ``"none"``, ``"auto"``)."""
    value = settings.get("SIMHASH_PROCESSES", defaults.SIMHASH_PROCESSES)
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "auto")):
        return None
    try:
        return settings.getint("SIMHASH_PROCESSES")
    except ValueError:
        raise ValueError(f"SIMHASH_PROCESSES must be a number of processes or None, got {value!r}") from None


def backend_uri(settings: BaseSettings, spider_name: str | None = None) -> str:
    """The index backend URI of a crawl: ``SIMHASH_BACKEND``, else the on-disk default (``JOBDIR/simhash``,
    or ``.scrapy/simhash/<project>/<spider name>`` in the project's data directory: :mod:`.indexpath`), with
    ``SIMHASH_MAX_AGE`` added as the URI's ``max_age`` option."""
    uri = settings.get("SIMHASH_BACKEND", defaults.SIMHASH_BACKEND) or ""
    if not uri:
        uri = str(default_index_path(settings, spider_name))
    max_age = settings.get("SIMHASH_MAX_AGE", defaults.SIMHASH_MAX_AGE)
    try:
        seconds = parse_age(max_age or 0)
    except ValueError as exc:
        raise ValueError(f"SIMHASH_MAX_AGE: {exc}") from None
    return with_uri_option(uri, "max_age", f"{seconds:g}") if seconds else uri


def worker_processes(processes: int | None, threads: int = 0) -> int:
    """The number of worker processes for ``SIMHASH_PROCESSES``: as given, or for ``None`` one on a POSIX
    machine with two CPUs or more (measured: the crawl goes faster, see docs/speed.md), else none."""
    if processes is not None:
        return processes
    return 1 if os.name == "posix" and available_cpus() >= 2 and not threads else 0


#: The values of ``SIMHASH_ON_INDEX_ERROR``.
ON_INDEX_ERROR = ("pass", "stop")


def check_options(action: str, threads: int, processes: int | None, index_retry_seconds: float) -> int:
    """Raise ``ValueError`` (naming the setting) for a bad ``SIMHASH_ACTION``, ``SIMHASH_THREADS``,
    ``SIMHASH_PROCESSES`` or ``SIMHASH_INDEX_RETRY_SECONDS``; returns the number of worker processes."""
    if action not in ACTIONS:
        raise ValueError(f"SIMHASH_ACTION must be 'drop' or 'flag', got {action!r}")
    if threads < 0:
        raise ValueError(f"SIMHASH_THREADS must be >= 0, got {threads!r}")
    processes = worker_processes(processes, threads)
    if processes < 0:
        raise ValueError(f"SIMHASH_PROCESSES must be >= 0, got {processes!r}")
    if threads and processes:
        raise ValueError(
            f"SIMHASH_THREADS={threads} and SIMHASH_PROCESSES={processes}: fingerprint in threads or in "
            "processes, not both (set one of them to 0)"
        )
    if not index_retry_seconds >= 0:
        raise ValueError(f"SIMHASH_INDEX_RETRY_SECONDS must be >= 0, got {index_retry_seconds!r}")
    return processes


def avoid_options(settings: BaseSettings) -> dict[str, Any] | None:
    """The ``SIMHASH_AVOID_*`` settings as :class:`~simhash_filter.crawl.avoid.Avoider` options (None when
    ``SIMHASH_AVOID`` is off), checked: a wrong value raises ``ValueError`` naming its setting."""
    if not settings.getbool("SIMHASH_AVOID", defaults.SIMHASH_AVOID):
        return None
    options: dict[str, Any] = {
        "action": settings.get("SIMHASH_AVOID_ACTION", defaults.SIMHASH_AVOID_ACTION),
        "mirrors": settings.get("SIMHASH_AVOID_MIRRORS", defaults.SIMHASH_AVOID_MIRRORS),
    }
    for name, key, read in (("min_examples", "SIMHASH_AVOID_MIN_EXAMPLES", settings.getint),
                            ("min_precision", "SIMHASH_AVOID_MIN_PRECISION", settings.getfloat),
                            ("validate", "SIMHASH_AVOID_VALIDATE", settings.getfloat)):  # fmt: skip
        try:
            options[name] = read(key, getattr(defaults, key))
        except ValueError:
            raise ValueError(f"{key} must be a number, got {settings.get(key)!r}") from None
    check_avoid_options(**options)  # before the index is opened: a wrong value stops the crawl at once
    options["known_max_age"] = known_max_age(settings)
    return options


def known_max_age(settings: BaseSettings) -> float:
    """Seconds a record of a near-duplicate dropped by an earlier crawl is acted on: ``SIMHASH_AVOID_KNOWN_MAX_AGE``,
    capped by ``SIMHASH_MAX_AGE`` when that is set (a page the index forgets is not skipped on an older word);
    0: records are not acted on."""
    ages = []
    for key in ("SIMHASH_AVOID_KNOWN_MAX_AGE", "SIMHASH_MAX_AGE"):
        try:
            ages.append(parse_age(settings.get(key, getattr(defaults, key)) or 0))
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    known, index = ages
    return min(known, index) if known and index else known
