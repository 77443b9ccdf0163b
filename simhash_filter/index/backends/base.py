"""The interface every index backend implements, at the level of a check (so that a server-side backend runs
probe, verify and add in one round trip).  Arguments reaching a backend are validated by
:class:`~simhash_filter.index.nearduplicate.NearDuplicateIndex`: fingerprints are ints in [0, 2**64) (or ``uint64``
arrays), keys are str, and ``k <= self.k``."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from simhash_filter.errors import IndexFullError, MetadataMismatchError
from simhash_filter.index.bound import DEFAULT_BOUND, EVERY, CheckBound
from simhash_filter.index.tables import Match, is_count

if TYPE_CHECKING:
    import numpy as np

    from simhash_filter.index.tables import TableDesign

__all__ = [
    "Backend",
    "Candidate",
    "Entry",
    "IndexFullError",
    "MetadataMismatchError",
    "check_metadata",
    "earlier_version",
    "full_message",
]


class Entry(NamedTuple):
    """One stored fingerprint: its key (the kept page's URL) and when it was added (Unix time, if known)."""

    fingerprint: int
    key: str
    added: float | None = None
    #: The page's verification sketch, in an index that keeps sketches.
    sketch: bytes | None = None


class Candidate(NamedTuple):
    """A stored page that may be a near-duplicate of a query: the verification stage decides."""

    key: str
    #: Hamming distance of its fingerprint to the query's.
    distance: int
    fingerprint: int
    sketch: bytes


def full_message(stored: int, design: TableDesign) -> str:
    """What :class:`IndexFullError` says: how many pages, the design, and the ways out."""
    from simhash_filter.index.tables import capacity

    return (
        f"the index holds {stored:,} pages, twice the {capacity(design):,} its tables ({design.name}) are built for: "
        "rebuild it for more with `simhash-filter index rebuild INDEX --expected-pages N`, or start a new one with "
        "SIMHASH_EXPECTED_PAGES (dedup: --expected-pages)"
    )


def earlier_version(what: str, delete: str) -> str:
    """What an index written by an earlier version of simhash-filter is refused with (one line): *what* it is,
    and how to *delete* it; a crawl or ``dedup`` then fills it again."""
    return (
        f"{what} was written by an earlier version of simhash-filter, which this one does not read: "
        f"delete it ({delete}) and crawl again (or run dedup) to refill it"
    )


def check_metadata(stored: Mapping[str, Any], requested: Mapping[str, Any] | None) -> None:
    """Raise :class:`MetadataMismatchError` if *requested* is given and differs from *stored*.

    Persistent backends call this on open; ``requested=None`` accepts whatever is stored."""
    if requested is None or dict(stored) == dict(requested):
        return
    keys = sorted(set(stored) | set(requested))
    diff = ", ".join(
        f"{key}: stored {stored.get(key, '<missing>')!r} != requested {requested.get(key, '<missing>')!r}"
        for key in keys
        if stored.get(key, "<missing>") != requested.get(key, "<missing>")
    )
    raise MetadataMismatchError(f"the index was stored with other metadata ({diff})")


def verified_part(metadata: Mapping[str, Any], sketch_bytes: int) -> int:
    """``metadata["verify_bytes"]``: the leading bytes of a stored sketch that every engine verifies itself (the
    word sketch; model v6 stores its prose part after them); all of it when the metadata does not say."""
    part = metadata.get("verify_bytes", sketch_bytes)
    if not is_count(part, 0, sketch_bytes):
        raise ValueError(f"metadata verify_bytes must be an int in [0, sketch_bytes={sketch_bytes}], got {part!r}")
    return part


class Backend(abc.ABC):
    """Storage of a two-stage near-duplicate index.

    *k* is the largest query distance the backend answers; *design* the permuted-table design; *metadata* a
    JSON-like dict kept with the index (the fingerprint model id, ``sketch_bytes``: the size of the sketch kept beside
    every fingerprint, ``verify_bytes``: its leading bytes that the bound verifies), stored by a persistent backend
    on creation and compared on open (:func:`check_metadata`).  Every engine decides a check as
    :func:`~simhash_filter.index.bound.take` over the pages its tables hold (``tests/test_backends.py``)."""

    #: True for a backend that waits on the network (Redis): the crawl then calls it off the reactor thread.
    remote: ClassVar[bool] = False

    def __init__(self, *, k: int, design: TableDesign, metadata: Mapping[str, Any] | None = None) -> None:
        self._metadata: dict[str, Any] = dict(metadata or {})
        sketch_bytes = self._metadata.get("sketch_bytes", 0)
        if not is_count(sketch_bytes):
            raise ValueError(f"metadata sketch_bytes must be an int >= 0, got {sketch_bytes!r}")
        self._sketch_bytes = sketch_bytes
        self._verify_bytes = verified_part(self._metadata, sketch_bytes)
        if metadata is not None and not sketch_bytes:  # None: whatever is stored (read-only use)
            raise ValueError("an index keeps a sketch beside each fingerprint: its metadata needs sketch_bytes > 0")
        self._k = k
        self._design = design

    @classmethod
    def from_uri(cls, uri: str, *, k: int, design: TableDesign, metadata: Mapping[str, Any] | None = None) -> Backend:
        """Build the backend for *uri* (``scheme://location?options``); override to parse the location."""
        return cls(k=k, design=design, metadata=metadata)

    @property
    def k(self) -> int:
        """Largest query distance this backend answers."""
        return self._k

    @property
    def design(self) -> TableDesign:
        """The permuted-table design."""
        return self._design

    @property
    def rows(self) -> int:
        """The pages the store holds, deleted and expired ones included (what a page limit counts)."""
        return len(self)

    @property
    def metadata(self) -> dict[str, Any]:
        """The metadata kept with the index (a copy)."""
        return dict(self._metadata)

    @property
    def sketch_bytes(self) -> int:
        """Size of the sketch stored beside each fingerprint (0: the index keeps none)."""
        return self._sketch_bytes

    @property
    def verify_bytes(self) -> int:
        """The leading bytes of a stored sketch that the bound verifies (``metadata["verify_bytes"]``: the word
        sketch; the rest, the prose part of model v6, is read by the decision rule alone)."""
        return self._verify_bytes

    def checked_sketches(self, sketches: Sequence[bytes], m: int) -> list[bytes]:
        """*sketches* as a list, checked: one of :attr:`sketch_bytes` bytes for each of *m* keys (else
        ``ValueError``)."""
        size = self._sketch_bytes
        if len(sketches) != m:
            raise ValueError(f"this index keeps a {size}-byte sketch beside each fingerprint: give one per key")
        out = list(sketches)
        for sketch in out:
            if not isinstance(sketch, bytes) or len(sketch) != size:
                got = f"{len(sketch)} bytes" if isinstance(sketch, bytes) else type(sketch).__name__
                raise ValueError(f"a sketch must be {size} bytes, got {got}")
        return out

    @abc.abstractmethod
    def add_many(self, fingerprints: np.ndarray, keys: Sequence[str], sketches: Sequence[bytes]) -> None:
        """Store ``uint64`` *fingerprints* with *keys* and *sketches* of :attr:`sketch_bytes` each (all the same
        length), in order, unchecked."""

    def add(self, fingerprint: int, key: str, sketch: bytes) -> None:
        """Store one fingerprint and its sketch, unchecked."""
        import numpy as np

        self.add_many(np.array([fingerprint], dtype=np.uint64), [key], [sketch])

    @abc.abstractmethod
    def add_and_candidates(
        self, fingerprint: int, key: str, sketch: bytes, k: int, bound: CheckBound = DEFAULT_BOUND
    ) -> list[Candidate]:
        """Atomically: the candidates within *k* under *bound* (:mod:`~simhash_filter.index.bound`), nearest first,
        ties in insertion order; then the page stored in the tables that take it (none: not stored).  Idempotent: a
        table whose block holds *key* with this *fingerprint* does not take it again."""

    @abc.abstractmethod
    def candidates(self, fingerprint: int, k: int, bound: CheckBound = DEFAULT_BOUND) -> list[Candidate]:
        """:meth:`add_and_candidates`' candidates, nothing stored."""

    def query(self, fingerprint: int, k: int) -> list[Match]:
        """The stored fingerprints within *k* that share a table's lead with *fingerprint* (every one within
        ``design.k``), nearest first, ties in insertion order: the candidates of a bound that takes them all."""
        return [Match(c.key, c.distance, c.fingerprint) for c in self.candidates(fingerprint, k, EVERY)]

    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of stored (fingerprint, key) pairs (deleted or expired ones not counted)."""

    # -- maintenance (optional: the command line's ``simhash-filter index``) ---------------------

    def delete(self, keys: Iterable[str]) -> int:
        """Forget every stored fingerprint whose key is in *keys*; return how many were forgotten."""
        raise NotImplementedError(f"{type(self).__name__} cannot delete fingerprints")

    def entries(self) -> Iterator[Entry]:
        """Every stored fingerprint, oldest first."""
        raise NotImplementedError(f"{type(self).__name__} cannot list its fingerprints")

    def compact(self) -> None:  # noqa: B027 - optional hook, a no-op for backends with nothing to reclaim
        """Reclaim the space of deleted and expired fingerprints."""

    # -- notes: counters kept with the index (the URL rules' evidence, :mod:`simhash_filter.crawl.urlrules`) ---

    def notes(self) -> dict[str, int]:
        """Every counter kept with the index (an in-process dict here; stores that persist override both)."""
        return dict(self.__dict__.get("_notes", {}))

    def add_notes(self, increments: Mapping[str, int]) -> dict[str, int]:
        """Add *increments* to the counters kept with the index, atomically for every process sharing it (an
        empty mapping adds nothing); every counter afterwards."""
        notes: dict[str, int] = self.__dict__.setdefault("_notes", {})
        for key, n in increments.items():
            notes[key] = notes.get(key, 0) + int(n)
        return dict(notes)

    def info(self) -> dict[str, Any]:
        """Facts about the stored index, as JSON-ready values (``simhash-filter index stats``)."""
        return {
            "backend": type(self).__name__,
            "entries": len(self),
            "k": self.k,
            "design": self.design.name,
            "metadata": self.metadata,
        }

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op for backends without resources
        """Release resources (flush files, close connections).  Further calls fail."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
