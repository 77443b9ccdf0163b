"""The ``SIMHASH_*`` Scrapy settings: their default values, and the filter's options read from a crawl's settings
(:class:`FilterOptions`), defaulted and checked, each error naming its setting.  No Scrapy import here.

The fingerprint and threshold defaults are computed from :data:`simhash_filter.config.DEFAULTS`, the
one source of defaults shared with the command line.  The enabling flag comes first, the rest are
alphabetical, as in ``scrapy/settings/default_settings.py``.
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

#: Turn the filter on or off (the components raise ``NotConfigured`` when False).
SIMHASH_ENABLED = True

#: What to do with a near-duplicate: ``"drop"`` (the response is ignored before the spider parses it,
#: so its links are not followed; items are dropped) or ``"flag"`` (it goes through, and its items
#: carry ``duplicate_of`` and ``distance``).
SIMHASH_ACTION = "drop"

#: Leave requests unsent that the URL rules learned from this crawl's near-duplicates (and the last crawl's, kept
#: with the index) say fetch a page already fetched or queued: a URL variant (session ids, tracking parameters,
#: print views, ``index.html``, case and slash variants) or the same path on a confirmed mirror host.
SIMHASH_AVOID = False

#: What to do with such a request: ``"drop"`` (``simhash/avoided/<reason>``) or ``"deprioritize"`` (sent back to
#: the scheduler once with a lower priority, ``simhash/deprioritized/<reason>``).
SIMHASH_AVOID_ACTION = "drop"

#: A rule (or mirror) acts only with at least this many examples (pairs of stored pages whose URLs differ by it and
#: that are the same page), and with its precision bound (``SIMHASH_AVOID_MIN_PRECISION``) reached.
SIMHASH_AVOID_MIN_EXAMPLES = 5

#: A rule (or mirror) acts once the lower one-sided 95 % Wilson bound of its precision (examples / (examples +
#: pairs against it)) reaches this share: 11 examples without one against, 19 against one; a rule whose pairs
#: disagree more than rarely never acts, and one that meets such pairs later is withdrawn.
SIMHASH_AVOID_MIN_PRECISION = 0.8

#: A URL that an earlier crawl dropped as a near-duplicate of a page the index still holds is not downloaded again
#: while that record is younger than this (seconds, or ``"12h"``, ``"7d"``, ``"2w"``; capped by ``SIMHASH_MAX_AGE``
#: when set): an older one is fetched and checked again, as pages change.  ``0``: every such URL is fetched.
SIMHASH_AVOID_KNOWN_MAX_AGE = "7d"

#: Confirmed mirror hosts: ``"paths"`` leaves unsent the paths its partner host already has, ``"all"`` every
#: request to the host found second, ``"off"`` none (URL rules only).
SIMHASH_AVOID_MIRRORS = "paths"

#: Share of the requests a rule would avoid that are fetched all the same to validate it (one that shows
#: another page counts against the rule; a rule whose precision bound falls below ``SIMHASH_AVOID_MIN_PRECISION``
#: is withdrawn and what it avoided queued again).
SIMHASH_AVOID_VALIDATE = 0.05

#: Index backend URI: ``""`` (the default) keeps the index on disk in ``JOBDIR/simhash`` when ``JOBDIR`` is
#: set, else in the project's data directory (``.scrapy/simhash/<project>/<spider name>``, the project being
#: Scrapyd's or ``BOT_NAME``; an index at the old ``.scrapy/simhash/<spider name>`` is moved there), so the next
#: crawl remembers this one; a directory path or ``file:///path`` puts it elsewhere; ``memory://`` forgets it at
#: the end of the crawl; ``redis://host:port/db`` shares it between crawl processes.
SIMHASH_BACKEND = ""

#: More backends by URI scheme (dotted path of a ``simhash_filter.index.backends.Backend`` subclass),
#: merged over ``simhash_filter.index.backends.BACKENDS_BASE``; ``None`` disables a scheme.
SIMHASH_BACKENDS: dict[str, str | None] = {}

#: The bound on a check's work (docs/how-it-works.md): a table's block of the index takes no more pages that
#: this many of the page's candidates from that table verify (a flood's pages, a crawler trap's, are still
#: decided, but stop filling the index); at most ``SIMHASH_CANDIDATES_PER_TABLE``.
SIMHASH_BLOCK_DUPLICATES = DEFAULTS.block_duplicates

#: The bound on a check's work: at most this many candidates of each of the index's tables are verified, the
#: nearest (so at most five times as many a page); the stat ``simhash/candidates/max`` is the most one page had.
SIMHASH_CANDIDATES_PER_TABLE = DEFAULTS.candidates_per_table

#: The pages the index is built for: its tables follow (five up to 4,194,304 pages, then 15 up to 2**30, then
#: 56), so that a check's work stays bounded whatever the index holds; an index takes at most twice what its
#: tables are built for, then lets pages through unchecked (``simhash/index_full``) until it is rebuilt for more
#: (``simhash-filter index rebuild INDEX --expected-pages N``).  A stored index keeps the design it was built with.
SIMHASH_EXPECTED_PAGES = DEFAULTS.expected_pages

#: Log every decision (kept, near-duplicate, skipped) at DEBUG level, not only the first of each kind.
SIMHASH_DEBUG = False

#: Factor by which a DOM structure feature's weight decays per level of depth.
SIMHASH_DOM_DECAY = DEFAULTS.fingerprint.dom_decay

#: When a page's index check fails (a remote index down or restarting), retry it for up to this many
#: seconds, the page waiting (the crawl pauses as its slots fill), before letting it through unchecked;
#: 0 lets it through at once.  Either way each page let through is counted in
#: ``simhash/skipped/index_error`` and the first failure is logged.
SIMHASH_INDEX_RETRY_SECONDS = 0.0

#: Whether this run inspects pages rather than crawls: ``"auto"`` (the default) when Scrapy's ``parse``, ``fetch``,
#: ``shell``, ``check``, ``view`` or ``bench`` runs it; ``"read"``: the index is read, never written, and
#: near-duplicates are flagged, not dropped; ``"skip"``: pages are not checked; ``"crawl"``: never (the index is
#: written and near-duplicates dropped, as in a crawl).  Docs: usage.md, Inspection commands.
SIMHASH_INSPECT = "auto"

#: Item fields fingerprinted (HTML or plain text, joined in this order) for items that come without a
#: fingerprinted response: start items, or items built from JSON/API responses.
SIMHASH_ITEM_FIELDS: list[str] = []

#: Kept pages older than this are forgotten, so that a recrawl keeps them again: seconds, or a number
#: with ``s``, ``m``, ``h``, ``d`` or ``w`` (``"30d"``); ``0`` remembers them for ever.  Added to the backend
#: URI as its ``max_age`` option (the on-disk backend has it).
SIMHASH_MAX_AGE = 0

#: Candidates of a page: pages in the index within this Hamming distance (k) of its fingerprint that agree
#: with it on one of the index's tables (all of them up to distance 4).
SIMHASH_MAX_DISTANCE = DEFAULTS.max_distance

#: A candidate is a near-duplicate when the two pages' sketches are at least this similar (estimated weighted
#: Jaccard similarity of their words, 0..1); the page is a near-duplicate of its most similar candidate.
SIMHASH_MIN_SIMILARITY = DEFAULTS.min_similarity

#: What a page's failed index check does, once ``SIMHASH_INDEX_RETRY_SECONDS`` is over: ``"pass"`` lets the page
#: through unchecked (counted in ``simhash/skipped/index_error``) and the crawl goes on; ``"stop"`` also closes the
#: spider (finish reason ``simhash_index_error``), so that a full or lost index does not let a crawl run unfiltered.
SIMHASH_ON_INDEX_ERROR = "pass"

#: Worker processes that fingerprint pages off the reactor thread; 0: fingerprint in the reactor thread;
#: ``None`` (the default): one worker process on a POSIX machine with two CPUs or more, else 0 (and 0 when
#: ``SIMHASH_THREADS`` is set).  They start when the spider opens (pages arriving meanwhile, about 0.3 s,
#: are fingerprinted in the reactor thread) and stop when it closes; a worker that dies is replaced.
SIMHASH_PROCESSES: int | None = None

#: Share of the total feature weight given to DOM structure (the rest goes to text), 0..1.
SIMHASH_STRUCTURE_WEIGHT = DEFAULTS.fingerprint.structure_weight

#: Worker threads that fingerprint pages off the reactor thread (0: fingerprint in the reactor thread).
SIMHASH_THREADS = 0

#: Write the crawl to this WARC file (``""``: no WARC; ``.warc.gz``: each record a gzip member of its own; an
#: existing file is appended to): kept pages and HTML pages let through unchecked as ``response`` records,
#: near-duplicates (dropped or flagged) as ``revisit`` records pointing at the page they duplicate (docs/warc.md).
SIMHASH_WARC = ""


def default_settings() -> dict[str, Any]:
    """Every ``SIMHASH_*`` setting with its default value (fresh copies of mutable values)."""
    return {
        name: (value.copy() if isinstance(value, (dict, list)) else value)
        for name, value in globals().items()
        if name.startswith("SIMHASH_")
    }


# --- the options read from a crawl's settings ------------------------------------------------------

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
        """The number of worker processes: ``SIMHASH_PROCESSES`` as given, or for ``None`` one on a POSIX machine
        with two CPUs or more (measured: the crawl goes faster, see docs/speed.md), else none."""
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
    capped by ``SIMHASH_MAX_AGE`` when that is set (a page the index forgets is not skipped on an older word);
    0: records are not acted on."""
    ages = []
    for key in ("SIMHASH_AVOID_KNOWN_MAX_AGE", "SIMHASH_MAX_AGE"):
        try:
            ages.append(parse_age(settings.get(key, globals()[key]) or 0))
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    known, index = ages
    return min(known, index) if known and index else known
