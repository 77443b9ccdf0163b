"""The ``SIMHASH_*`` Scrapy settings with their defaults (docs/settings.md says what each does), and the filter's
options read from a crawl's settings (:class:`FilterOptions`), checked, each error naming its setting.  The model's
and the index's defaults come from :data:`simhash_filter.config.DEFAULTS`, shared with the command line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from simhash_filter.config import DEFAULTS, FilterConfig, available_cpus
from simhash_filter.index.backends import with_uri_option
from simhash_filter.index.backends.file import parse_age

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

SIMHASH_ENABLED = True
SIMHASH_ACTION = "drop"  # or "flag"
SIMHASH_AVOID = False
SIMHASH_AVOID_ACTION = "drop"  # or "deprioritize"
SIMHASH_AVOID_MIN_EXAMPLES = 5
SIMHASH_AVOID_MIN_PRECISION = 0.8
SIMHASH_AVOID_KNOWN_MAX_AGE = "7d"
SIMHASH_AVOID_MIRRORS = "paths"  # or "all", "off"
SIMHASH_AVOID_VALIDATE = 0.05
SIMHASH_BACKEND = ""  # on disk: JOBDIR/simhash, else .scrapy/simhash/<project>/<spider name>
SIMHASH_BACKENDS: dict[str, str | None] = {}
SIMHASH_BLOCK_DUPLICATES = DEFAULTS.block_duplicates
SIMHASH_CANDIDATES_PER_TABLE = DEFAULTS.candidates_per_table
SIMHASH_EXPECTED_PAGES = DEFAULTS.expected_pages
SIMHASH_DEBUG = False
SIMHASH_DOM_DECAY = DEFAULTS.fingerprint.dom_decay
SIMHASH_INDEX_RETRY_SECONDS = 0.0
SIMHASH_INSPECT = "auto"  # or "read", "skip", "crawl"
SIMHASH_ITEM_FIELDS: list[str] = []
SIMHASH_MAX_AGE = 0
SIMHASH_MAX_DISTANCE = DEFAULTS.max_distance
SIMHASH_MIN_SIMILARITY = DEFAULTS.min_similarity
SIMHASH_ON_INDEX_ERROR = "pass"  # or "stop"
SIMHASH_PROCESSES: int | None = None  # None: one on a POSIX machine with two CPUs or more
SIMHASH_STRUCTURE_WEIGHT = DEFAULTS.fingerprint.structure_weight
SIMHASH_THREADS = 0
SIMHASH_WARC = ""


def default_settings() -> dict[str, Any]:
    """Every ``SIMHASH_*`` setting with its default value (fresh copies of mutable values)."""
    return {
        name: (value.copy() if isinstance(value, (dict, list)) else value)
        for name, value in globals().items()
        if name.startswith("SIMHASH_")
    }

#: The values of ``SIMHASH_ACTION``, ``SIMHASH_ON_INDEX_ERROR``, ``SIMHASH_AVOID_ACTION`` and ``SIMHASH_AVOID_MIRRORS``.
ACTIONS = ("drop", "flag")
ON_INDEX_ERROR = ("pass", "stop")
AVOID_ACTIONS = ("drop", "deprioritize")
AVOID_MIRRORS = ("paths", "all", "off")


def _one_of(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


@dataclass(frozen=True)
class AvoidOptions:
    """The ``SIMHASH_AVOID_*`` settings (:class:`~simhash_filter.crawl.avoid.Avoider`), checked when made."""

    action: str = SIMHASH_AVOID_ACTION
    mirrors: str = SIMHASH_AVOID_MIRRORS
    min_examples: int = SIMHASH_AVOID_MIN_EXAMPLES
    min_precision: float = SIMHASH_AVOID_MIN_PRECISION
    validate: float = SIMHASH_AVOID_VALIDATE
    #: Seconds a record of a near-duplicate dropped by an earlier crawl is acted on (0: never).
    known_max_age: float = 0.0

    def __post_init__(self) -> None:
        _one_of("SIMHASH_AVOID_ACTION", self.action, AVOID_ACTIONS)
        _one_of("SIMHASH_AVOID_MIRRORS", self.mirrors, AVOID_MIRRORS)
        if not 0.0 <= self.validate <= 1.0:
            raise ValueError(f"SIMHASH_AVOID_VALIDATE must be a share in [0, 1], got {self.validate!r}")
        if self.min_examples < 1:
            raise ValueError(f"SIMHASH_AVOID_MIN_EXAMPLES must be at least 1, got {self.min_examples!r}")
        if not 0.0 < self.min_precision < 1.0:
            raise ValueError(f"SIMHASH_AVOID_MIN_PRECISION must be a share in (0, 1), got {self.min_precision!r}")

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> AvoidOptions | None:
        """The ``SIMHASH_AVOID_*`` settings (None when ``SIMHASH_AVOID`` is off)."""
        if not settings.getbool("SIMHASH_AVOID", SIMHASH_AVOID):
            return None
        numbers: dict[str, Any] = {}
        for name, key, read in (("min_examples", "SIMHASH_AVOID_MIN_EXAMPLES", settings.getint),
                                ("min_precision", "SIMHASH_AVOID_MIN_PRECISION", settings.getfloat),
                                ("validate", "SIMHASH_AVOID_VALIDATE", settings.getfloat)):  # fmt: skip
            try:
                numbers[name] = read(key, globals()[key])
            except ValueError:
                raise ValueError(f"{key} must be a number, got {settings.get(key)!r}") from None
        return cls(settings.get("SIMHASH_AVOID_ACTION", SIMHASH_AVOID_ACTION),
                   settings.get("SIMHASH_AVOID_MIRRORS", SIMHASH_AVOID_MIRRORS),
                   known_max_age=known_max_age(settings), **numbers)  # fmt: skip


@dataclass(frozen=True)
class FilterOptions:
    """What a crawl's filter does: its configuration, its index's URI, and how it fingerprints, checks and acts;
    checked when made (a wrong value raises ``ValueError`` naming its setting)."""

    config: FilterConfig = field(default_factory=FilterConfig)
    #: The index's URI (``SIMHASH_BACKEND``, the on-disk default filled in) and more stores by scheme.
    backend: str = "memory://"
    backends: Mapping[str, Any] = field(default_factory=dict)
    action: str = SIMHASH_ACTION
    item_fields: tuple[str, ...] = ()
    threads: int = SIMHASH_THREADS
    #: Worker processes (None: :func:`worker_processes` decides).
    processes: int | None = SIMHASH_PROCESSES
    debug: bool = SIMHASH_DEBUG
    index_retry_seconds: float = SIMHASH_INDEX_RETRY_SECONDS
    avoid: AvoidOptions | None = None
    on_index_error: str = SIMHASH_ON_INDEX_ERROR
    #: Read the index, never write it, and flag rather than drop: an inspection command (:meth:`read_only`).
    readonly: bool = False

    def __post_init__(self) -> None:
        _one_of("SIMHASH_ACTION", self.action, ACTIONS)
        _one_of("SIMHASH_ON_INDEX_ERROR", self.on_index_error, ON_INDEX_ERROR)
        if self.threads < 0:
            raise ValueError(f"SIMHASH_THREADS must be >= 0, got {self.threads!r}")
        processes = self.worker_processes
        if processes < 0:
            raise ValueError(f"SIMHASH_PROCESSES must be >= 0, got {processes!r}")
        if self.threads and processes:
            raise ValueError(
                f"SIMHASH_THREADS={self.threads} and SIMHASH_PROCESSES={processes}: fingerprint in threads or in "
                "processes, not both (set one of them to 0)"
            )
        if not self.index_retry_seconds >= 0:
            raise ValueError(f"SIMHASH_INDEX_RETRY_SECONDS must be >= 0, got {self.index_retry_seconds!r}")

    @property
    def worker_processes(self) -> int:
        """``SIMHASH_PROCESSES`` as given, or for ``None`` one on a POSIX machine with two CPUs or more, else 0."""
        if self.processes is not None:
            return self.processes
        return 1 if os.name == "posix" and available_cpus() >= 2 and not self.threads else 0

    def read_only(self, backend: str) -> FilterOptions:
        """These options for an inspection command reading the index at *backend*: nothing is stored, the page
        asked for reaches the spider (flagged, not dropped), no rule is learned nor request avoided."""
        return replace(self, backend=backend, readonly=True, action="flag", avoid=None)

    @classmethod
    def from_settings(cls, settings: BaseSettings, spider_name: str | None = None) -> FilterOptions:
        """The options the ``SIMHASH_*`` settings describe (defaults: this module's)."""
        return cls(
            filter_config(settings),
            backend=backend_uri(settings, spider_name),
            backends=settings.getdict("SIMHASH_BACKENDS", SIMHASH_BACKENDS),
            action=settings.get("SIMHASH_ACTION", SIMHASH_ACTION),
            item_fields=tuple(settings.getlist("SIMHASH_ITEM_FIELDS", SIMHASH_ITEM_FIELDS)),
            threads=settings.getint("SIMHASH_THREADS", SIMHASH_THREADS),
            processes=processes_setting(settings),
            debug=settings.getbool("SIMHASH_DEBUG", SIMHASH_DEBUG),
            index_retry_seconds=settings.getfloat("SIMHASH_INDEX_RETRY_SECONDS", SIMHASH_INDEX_RETRY_SECONDS),
            avoid=AvoidOptions.from_settings(settings),
            on_index_error=settings.get("SIMHASH_ON_INDEX_ERROR", SIMHASH_ON_INDEX_ERROR),
        )


#: The :class:`FilterConfig` fields and the settings that set them (an error names the setting).
_CONFIG_SETTINGS = {name: f"SIMHASH_{name.upper()}" for name in (
    "structure_weight", "dom_decay", "max_distance", "min_similarity", "candidates_per_table", "block_duplicates",
    "expected_pages")}  # fmt: skip


def filter_config(settings: BaseSettings) -> FilterConfig:
    """The :class:`FilterConfig` described by the ``SIMHASH_*`` settings (defaults: this module's)."""
    try:
        fingerprint = FilterConfig().fingerprint.with_options(
            structure_weight=settings.getfloat("SIMHASH_STRUCTURE_WEIGHT", SIMHASH_STRUCTURE_WEIGHT),
            dom_decay=settings.getfloat("SIMHASH_DOM_DECAY", SIMHASH_DOM_DECAY),
        )
        return FilterConfig(
            fingerprint,
            settings.getint("SIMHASH_MAX_DISTANCE", SIMHASH_MAX_DISTANCE),
            settings.getfloat("SIMHASH_MIN_SIMILARITY", SIMHASH_MIN_SIMILARITY),
            settings.getint("SIMHASH_CANDIDATES_PER_TABLE", SIMHASH_CANDIDATES_PER_TABLE),
            settings.getint("SIMHASH_BLOCK_DUPLICATES", SIMHASH_BLOCK_DUPLICATES),
            settings.getint("SIMHASH_EXPECTED_PAGES", SIMHASH_EXPECTED_PAGES),
        )
    except ValueError as exc:
        message = str(exc)
        for name, setting in _CONFIG_SETTINGS.items():
            message = message.replace(name, setting)
        raise ValueError(message) from None


def processes_setting(settings: BaseSettings) -> int | None:
    """``SIMHASH_PROCESSES``: a number, or None (also written ``""``, ``"none"``, ``"auto"``)."""
    value = settings.get("SIMHASH_PROCESSES", SIMHASH_PROCESSES)
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
    uri = settings.get("SIMHASH_BACKEND", SIMHASH_BACKEND) or ""
    if not uri:
        from simhash_filter.crawl.indexpath import default_index_path  # Scrapy's project data path: imports Scrapy

        uri = str(default_index_path(settings, spider_name))
    max_age = settings.get("SIMHASH_MAX_AGE", SIMHASH_MAX_AGE)
    try:
        seconds = parse_age(max_age or 0)
    except ValueError as exc:
        raise ValueError(f"SIMHASH_MAX_AGE: {exc}") from None
    return with_uri_option(uri, "max_age", f"{seconds:g}") if seconds else uri


def known_max_age(settings: BaseSettings) -> float:
    """Seconds a record of a near-duplicate dropped by an earlier crawl is acted on: ``SIMHASH_AVOID_KNOWN_MAX_AGE``,
    capped by ``SIMHASH_MAX_AGE`` when that is set (0: never)."""
    ages = []
    for key in ("SIMHASH_AVOID_KNOWN_MAX_AGE", "SIMHASH_MAX_AGE"):
        try:
            ages.append(parse_age(settings.get(key, globals()[key]) or 0))
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    known, index = ages
    return min(known, index) if known and index else known
