"""Default values of the ``SIMHASH_*`` Scrapy settings (no Scrapy import here).

The fingerprint and threshold defaults are computed from :data:`simhash_filter.config.DEFAULTS`, the
one source of defaults shared with the command line.  The enabling flag comes first, the rest are
alphabetical, as in ``scrapy/settings/default_settings.py``.
"""

from __future__ import annotations

from typing import Any

from simhash_filter.config import DEFAULTS

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
