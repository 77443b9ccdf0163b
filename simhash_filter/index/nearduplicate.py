"""The two-stage near-duplicate index (:class:`NearDuplicateIndex`, opened for a configuration by :func:`open_index`)
and the one rule that decides a pair, which every decision uses (the index, so the crawl and ``dedup``; ``compare``,
``calibrate`` and the Spark job): a *candidate* is within k bits and shares a table's lead (:func:`is_candidate`); a
near-duplicate is a candidate whose sketches verify (:func:`verdict`), or, where none does, whose spots do
(:func:`spots_verdict`), never one :func:`apart` from the page.  The rule's functions use ``<=``, ``>=`` and ``&``
only, so that they apply to Python numbers, numpy arrays and Spark columns alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import numpy as np

from simhash_filter.index.backends import open_backend
from simhash_filter.index.backends.base import Backend, Candidate, IndexFullError, full_message
from simhash_filter.index.bound import DEFAULT_DUPLICATES, DEFAULT_PER_TABLE, CheckBound, most_differing_bits
from simhash_filter.index.tables import (
    F,
    Match,
    TableDesign,
    as_fingerprint_array,
    block_limit,
    check_fingerprint,
    page_limit,
    resolve_design,
)
from simhash_filter.model.sketch import (
    ARTICLE,
    PART_BYTES,
    prose_similarity,
    sequence_similarity,
    similarity,
    site_part_of,
    titles_differ,
)

if TYPE_CHECKING:
    from simhash_filter.config import FilterConfig

__all__ = [
    "NearDuplicateIndex",
    "Thresholds",
    "apart",
    "is_candidate",
    "open_index",
    "spots_of",
    "spots_verdict",
    "verdict",
]


class Thresholds(Protocol):
    """What the rule reads of a configuration (a :class:`~simhash_filter.config.FilterConfig` has both)."""

    @property
    def max_distance(self) -> int: ...

    @property
    def min_similarity(self) -> float: ...


@dataclass(frozen=True)
class Rule:
    """The thresholds of one index, or of one point of a sweep."""

    max_distance: int
    min_similarity: float


def is_candidate(distance: Any, shares_lead: Any, config: Thresholds) -> Any:
    """Stage one: the fingerprints are within k bits and share a table's lead (the tables find the pair)."""
    return (distance <= config.max_distance) & shares_lead


def verdict(distance: Any, shares_lead: Any, similarity: Any, config: Thresholds) -> Any:
    """A near-duplicate: a candidate (stage one) whose sketches are at least ``min_similarity`` alike (stage two)."""
    return is_candidate(distance, shares_lead, config) & (similarity >= config.min_similarity)


#: The smallest spot similarity (:func:`~simhash_filter.model.prose.prose_similarity`) at which a candidate the
#: word sketch did not verify verifies (model v6).
PROSE_SIMILARITY = 0.7


def spots_verdict(distance: Any, shares_lead: Any, spots: Any, config: Thresholds) -> Any:
    """The second verifier, for prose (model v6): a candidate whose two pages are article-like and whose spots are
    at least :data:`PROSE_SIMILARITY` alike (*spots*: :func:`spots_of`, -1 where either page is not article-like).
    It is consulted for a page only when :func:`verdict` takes none of its candidates; then the verified candidate
    with the most similar word sketch is the near-duplicate (:meth:`NearDuplicateIndex.best`)."""
    return is_candidate(distance, shares_lead, config) & (spots >= PROSE_SIMILARITY)


def spots_of(a: bytes, b: bytes, words: int) -> float:
    """The spot similarity of two stored sketches whose first *words* bytes are the word sketch and whose last
    bytes are the prose part (-1.0 where either page is not article-like or the sketches carry no prose part)."""
    if len(a) < words + PART_BYTES or len(b) < words + PART_BYTES:
        return -1.0
    found = prose_similarity(a[-PART_BYTES:], b[-PART_BYTES:])
    return -1.0 if found is None else found


#: The smallest similarity of the word sequences (:func:`~simhash_filter.model.sketch.sequence_similarity`) at which
#: two pages of one host whose titles differ may still be near-duplicates (model v7).
SEQUENCE_SIMILARITY = 0.5


def host_of(key: str) -> str | None:
    """The host of a page's key when the key is a URL, else None."""
    try:
        return urlsplit(key).hostname
    except ValueError:
        return None


def apart(key: str, other: str, a: bytes, b: bytes, words: int) -> bool:
    """Whether two pages are distinct documents whatever their word sketches and spots say (model v7): pages of one
    host (*key*, *other*: URLs) whose titles differ and whose word sequences are less than
    :data:`SEQUENCE_SIMILARITY` alike (*a*, *b*: stored sketches, the word sketch's *words* bytes, then the site part).
    Sketches without a site part, keys that are not URLs and pages of two hosts are never apart."""
    pa, pb = site_part_of(a, words), site_part_of(b, words)
    if pa is None or pb is None or not titles_differ(pa, pb):
        return False
    host = host_of(key)
    return host is not None and host == host_of(other) and sequence_similarity(pa, pb) < SEQUENCE_SIMILARITY


def _check_k(k: object, limit: int | None = None) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int, got {type(k).__name__} {k!r}")
    value = int(k)
    top = F - 1 if limit is None else limit
    if not 0 <= value <= top:
        raise ValueError(f"k must be in [0, {top}], got {value}")
    return value


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"a key must be a str, got {type(key).__name__} {key!r}")
    return key


class NearDuplicateIndex:
    """The two-stage index: a page's candidates (within k, sharing a table's lead) are verified by their sketches
    (at least *min_similarity* alike), and the page is a near-duplicate of the most similar verified one (ties: the
    nearer, then the earlier)::

        with open_index(DEFAULTS) as index:
            match = index.check_and_add(fp.value, url, fp.sketch)  # None: new; else the page it duplicates

    *design* is a :class:`TableDesign`, a name, or ``"auto"`` (:func:`~simhash_filter.index.tables.tables_for`
    *expected_size*); *backend* a URI for :func:`~simhash_filter.index.backends.open_backend` or a :class:`Backend`;
    *metadata* (the model id and ``sketch_bytes``) is kept with the index, and a persistent backend refuses an index
    stored with other metadata.  *per_table*, *duplicates* and *block_pages* (default:
    :func:`~simhash_filter.index.tables.block_limit`) bound the work of a check (:mod:`simhash_filter.index.bound`)."""

    def __init__(
        self,
        k: int,
        *,
        design: TableDesign | str = "auto",
        expected_size: int = 1_000_000,
        backend: Backend | str = "memory://",
        metadata: Mapping[str, Any] | None = None,
        min_similarity: float = 0.0,
        per_table: int = DEFAULT_PER_TABLE,
        duplicates: int = DEFAULT_DUPLICATES,
        block_pages: int | None = None,
    ) -> None:
        self._k = _check_k(k)
        if not 0.0 <= min_similarity <= 1.0:
            raise ValueError(f"min_similarity must be in [0, 1], got {min_similarity!r}")
        self._min_similarity = float(min_similarity)
        self._rule = Rule(self._k, self._min_similarity)
        #: The most candidates one check of this index verified so far (``simhash/candidates/max``).
        self.candidates_max = 0
        #: The rows a local store held after the last write through this index (None before one, and for a remote
        #: store, where reading them is a round trip): a crawl's ``simhash/index_size`` follows them without
        #: another call into the index after its check.
        self.rows_written: int | None = None
        if isinstance(backend, Backend):
            if not (isinstance(design, str) and design == "auto"):
                wanted = resolve_design(design, expected_size)
                if wanted != backend.design:
                    raise ValueError(f"design {wanted.name} differs from the backend's design {backend.design.name}")
            if backend.k < self._k:
                raise ValueError(f"the backend answers distances up to {backend.k}, but k={self._k}")
            if metadata is not None and dict(metadata) != backend.metadata:
                raise ValueError(f"metadata {dict(metadata)!r} differs from the backend's {backend.metadata!r}")
            self._backend = backend
        elif isinstance(backend, str):
            resolved = resolve_design(design, expected_size)
            self._backend = open_backend(backend, k=self._k, design=resolved, metadata=metadata)
        else:
            raise TypeError(f"backend must be a URI or a Backend, got {type(backend).__name__}")
        if block_pages is None:  # the blocks' bound of the size the index is expected to hold
            block_pages = block_limit(self._backend.design, expected_size)
        self._bound = CheckBound(per_table, duplicates, self._min_similarity, block_pages)
        if not self._backend.sketch_bytes:
            raise ValueError("an index keeps a sketch beside each fingerprint: its metadata needs sketch_bytes > 0")
        #: The index takes at most this many pages (:func:`~simhash_filter.index.tables.page_limit`); a remote
        #: store's script refuses them itself.
        self._limit = 0 if self._backend.remote else page_limit(self.design)

    @property
    def sketch_bytes(self) -> int:
        """Size of the sketch kept beside each fingerprint."""
        return self._backend.sketch_bytes

    @property
    def rule(self) -> Rule:
        """This index's thresholds for :func:`verdict` (its k and :attr:`min_similarity`)."""
        return self._rule

    @property
    def min_similarity(self) -> float:
        """Smallest sketch similarity of a verified candidate (two-stage detection)."""
        return self._min_similarity

    def _check_sketch(self, sketch: bytes) -> bytes:
        return self._backend.checked_sketches([sketch], 1)[0]

    def best(self, candidates: Sequence[Candidate], sketch: bytes, key: str = "") -> Match | None:
        """The most similar of *candidates* whose word sketch verifies against *sketch* (ties: the first), else,
        with a prose part, the one with the most similar word sketch among those whose spots verify
        (:func:`spots_verdict`); never a candidate :func:`apart` from the page (*key*: its URL); or None."""
        part = self._backend.verify_bytes
        # bit counts against each threshold's most differing bits decide as verdict and spots_verdict; the
        # similarity and apart are asked of a candidate that verifies (a crowd's none)
        words, page = self._bound.differing_bits(part), int.from_bytes(sketch[:part], "little")
        near = [c for c in candidates if c.distance <= self._k]
        best: Match | None = None
        best_similarity = -1.0  # below every similarity: no best yet
        for c in near:
            if (int.from_bytes(c.sketch[:part], "little") ^ page).bit_count() <= words:
                s = similarity(sketch[:part], c.sketch[:part])
                if s > best_similarity and not apart(key, c.key, sketch, c.sketch, part):
                    best, best_similarity = Match(c.key, c.distance, c.fingerprint, s), s
        if best is not None or len(sketch) < part + PART_BYTES or not sketch[-PART_BYTES] & ARTICLE:
            return best
        spots, prose = (
            most_differing_bits(PROSE_SIMILARITY, PART_BYTES - 1),
            int.from_bytes(sketch[1 - PART_BYTES :], "little"),
        )
        for c in near:
            tail = c.sketch[-PART_BYTES:]
            if (
                len(c.sketch) >= part + PART_BYTES
                and tail[0] & ARTICLE
                and (int.from_bytes(tail[1:], "little") ^ prose).bit_count() <= spots
            ):
                s = similarity(sketch[:part], c.sketch[:part])
                if s > best_similarity and not apart(key, c.key, sketch, c.sketch, part):
                    best, best_similarity = Match(c.key, c.distance, c.fingerprint, s), s
        return best

    @property
    def bound(self) -> CheckBound:
        """The bound on the work of a check."""
        return self._bound

    @property
    def k(self) -> int:
        """Maximum Hamming distance of a near-duplicate."""
        return self._k

    @property
    def design(self) -> TableDesign:
        """The table design in use."""
        return self._backend.design

    @property
    def backend(self) -> Backend:
        """The storage backend."""
        return self._backend

    @property
    def metadata(self) -> dict[str, Any]:
        """The metadata kept with the index (a copy)."""
        return self._backend.metadata

    def _query_k(self, k: int | None) -> int:
        return self._k if k is None else _check_k(k, self._k)

    def _room(self, pages: int) -> None:
        """Raise :class:`IndexFullError` if *pages* more would take the index past its page limit."""
        if self._limit and (rows := self._backend.rows) + pages > self._limit:
            raise IndexFullError(full_message(rows, self.design))

    def _written(self) -> None:
        """Note the rows a local store holds after a write (:attr:`rows_written`)."""
        if not self._backend.remote:
            self.rows_written = self._backend.rows

    def add(self, fingerprint: int, key: str, sketch: bytes) -> None:
        """Store *fingerprint* with *key* and *sketch* in every table, even if a near-duplicate is already
        stored."""
        self._room(1)
        self._backend.add(check_fingerprint(fingerprint), _check_key(key), self._check_sketch(sketch))
        self._written()

    def add_many(
        self, fingerprints: Iterable[int] | np.ndarray, keys: Sequence[str], sketches: Sequence[bytes]
    ) -> None:
        """Store many fingerprints at once, in order, with their *sketches*; much faster than :meth:`add` in a
        loop."""
        arr = as_fingerprint_array(fingerprints)
        if isinstance(keys, str) or not isinstance(keys, Sequence):
            raise TypeError(f"keys must be a sequence of str, got {type(keys).__name__}")
        if len(keys) != len(arr):
            raise ValueError(f"got {len(arr)} fingerprints but {len(keys)} keys")
        if not set(map(type, keys)) <= {str}:
            bad = next(x for x in keys if not isinstance(x, str))
            raise TypeError(f"keys must be str, got {type(bad).__name__} {bad!r}")
        checked = self._backend.checked_sketches(sketches, len(arr))
        self._room(len(arr))
        self._backend.add_many(arr, keys, checked)
        self._written()

    def query(self, fingerprint: int, k: int | None = None) -> list[Match]:
        """The stored fingerprints within *k* (default: the index's k) that share a table's lead with
        *fingerprint* (every one within the design's k), nearest first, unverified.

        Ties are in insertion order; a fingerprint stored twice is returned twice (once per key)."""
        return self._backend.query(check_fingerprint(fingerprint), self._query_k(k))

    def check(self, fingerprint: int, sketch: bytes, key: str = "") -> Match | None:
        """What :meth:`check_and_add` would answer, nothing stored: the most similar verified candidate of the
        page (*key*: its URL, for :func:`apart`), or None."""
        checked = self._check_sketch(sketch)
        found = self._backend.candidates(check_fingerprint(fingerprint), self._k, self._bound)
        return self.best(found, checked, key)

    def check_and_add(self, fingerprint: int, key: str, sketch: bytes) -> Match | None:
        """Atomically: store the page (unless *key* is stored with this fingerprint already, or every table's
        bound refuses it) and return its most similar verified candidate, or None."""
        fingerprint, key = check_fingerprint(fingerprint), _check_key(key)
        checked = self._check_sketch(sketch)
        return self.best(self.add_and_candidates(fingerprint, key, checked), checked, key)

    def add_and_candidates(self, fingerprint: int, key: str, sketch: bytes) -> list[Candidate]:
        """The candidates of a page under :attr:`bound`, then the page stored where the tables take it (see
        :meth:`Backend.add_and_candidates`); for a caller that verifies them itself."""
        self._room(1)
        found = self._backend.add_and_candidates(fingerprint, key, sketch, self._k, self._bound)
        if len(found) > self.candidates_max:
            self.candidates_max = len(found)
        self._written()
        return found

    def __len__(self) -> int:
        return len(self._backend)

    def close(self) -> None:
        """Release the backend (a persistent backend flushes and closes its files)."""
        self._backend.close()

    def __enter__(self) -> NearDuplicateIndex:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} k={self._k} design={self.design.name} "
            f"backend={type(self._backend).__name__} size={len(self)}>"
        )


def open_index(
    config: FilterConfig, backend: str = "memory://", backends: Mapping[str, Any] | None = None
) -> NearDuplicateIndex:
    """The index of *config* (its k, tables, sketches and similarity threshold, tagged with the fingerprint model's
    id) in the store at the URI *backend* (*backends*: more stores by scheme, ``SIMHASH_BACKENDS``).  Raises
    ``ValueError`` for a bad URI or option, :class:`~simhash_filter.errors.StoreError` for a store that is locked,
    damaged, of another model or full, ``OSError`` (and Redis's errors) for one that cannot be reached."""
    metadata = config.index_metadata()
    store = open_backend(backend, k=config.max_distance, design=TableDesign.parse(config.tables),
                         metadata=metadata, backends=backends)  # fmt: skip
    return NearDuplicateIndex(config.max_distance, backend=store, metadata=metadata,
                              min_similarity=config.min_similarity, per_table=config.candidates_per_table,
                              duplicates=config.block_duplicates, block_pages=config.bound.block_pages)  # fmt: skip
