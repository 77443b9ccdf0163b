"""The Redis backend's class: the index's options, its opening, and each call of the
:class:`~simhash_filter.index.backends.base.Backend` interface as script calls (:mod:`.script`)."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from redis.exceptions import ResponseError

from simhash_filter.errors import DesignMismatchError
from simhash_filter.index.backends.base import (
    Backend,
    Candidate,
    Entry,
    IndexFullError,
    MetadataMismatchError,
    check_metadata,
    earlier_version,
    full_message,
    verified_part,
)
from simhash_filter.index.backends.redis.connection import (
    DEFAULT_BACKOFF,
    DEFAULT_RETRIES,
    Call,
    Retries,
    ScriptRunner,
    client_from_uri,
    run_with_retries,
)
from simhash_filter.index.backends.redis.layout import (
    BATCH,
    CHUNK,
    FORMAT,
    MAX_SIZE,
    RECORD,
    decode_candidates,
    decode_key,
    default_bucket_bits,
    encode_key,
    pack_fingerprint,
    record_dtype,
    split_key,
    tag,
    text,
)
from simhash_filter.index.backends.redis.script import FULL, INIT_SCRIPT, NOTES_SCRIPT, SCRIPT
from simhash_filter.index.bound import DEFAULT_BOUND, CheckBound
from simhash_filter.index.tables import TableDesign, is_count, page_limit

#: Seconds the token of an :meth:`RedisBackend.add_notes` call is kept (far beyond any retry of it).
NOTES_TOKEN_SECONDS = 3600

logger = logging.getLogger(__package__)  # simhash_filter.index.backends.redis


class RedisBackend(Backend):
    """The index in Redis, shared by every process that opens the same server and prefix.

    *client* is a ``redis.Redis`` or ``redis.cluster.RedisCluster``; *prefix* names the index (keys ``{prefix}:...``);
    *bucket_bits* the width of the buckets' names (default: the stored index's, else :func:`default_bucket_bits`);
    *retries* and *retry_backoff* how a call is tried again (:class:`~.connection.Retries`); *max_age* (seconds, 0:
    never) hides older fingerprints; *sketch_in_key* (a new shard of a sharded index) keeps a home's sketch in its key.
    Opening stores the design, the bucket width and *metadata* on first use, and refuses an index stored with others
    (:class:`MetadataMismatchError`)."""

    #: Calls go over the network and may block (up to the socket timeout, times the tries).
    remote: ClassVar[bool] = True

    def __init__(
        self,
        client: Any,
        *,
        k: int,
        design: TableDesign,
        metadata: Mapping[str, Any] | None = None,
        prefix: str = "simhash",
        bucket_bits: int | None = None,
        retries: int = DEFAULT_RETRIES,
        retry_backoff: float = DEFAULT_BACKOFF,
        max_age: float = 0,
        owns_client: bool = False,
        location: str = "",
        sketch_in_key: bool = False,
    ) -> None:
        super().__init__(k=k, design=design, metadata=metadata)
        if not isinstance(prefix, str) or not prefix or "{" in prefix or "}" in prefix:
            raise ValueError(f"prefix must be a non-empty string without braces, got {prefix!r}")
        if bucket_bits is not None and not is_count(bucket_bits, 1, 32):
            raise ValueError(f"bucket_bits must be an int in [1, 32], got {bucket_bits!r}")
        if not is_count(retries):
            raise ValueError(f"retries must be an int >= 0, got {retries!r}")
        if not retry_backoff >= 0:
            raise ValueError(f"retry_backoff must be >= 0, got {retry_backoff!r}")
        if not max_age >= 0:
            raise ValueError(f"max_age must be >= 0 seconds, got {max_age!r}")
        self._client = client
        self._wants_sketch_in_key = sketch_in_key
        self._owns_client = owns_client
        self._prefix = prefix
        self._tag = tag(prefix)
        self._meta_key = self._tag + "meta"
        self._max_age = int(max_age)
        self._location = location or repr(client)
        self._closed = False
        where = f"Redis index {prefix!r} at {self._location}"
        self._retries = Retries(retries, float(retry_backoff), where, self._check_open)
        self._heads = [f"{self._tag}{t}:" for t in range(design.n_tables)]
        self._lock = threading.Lock()  # guards re-creating a lost index
        self._runner = ScriptRunner(client, SCRIPT.encode("utf-8"))
        self._requested_metadata = None if metadata is None else dict(metadata)
        stored = self._open(default_bucket_bits(design) if bucket_bits is None else bucket_bits)
        self._bucket_bits = int(stored["bucket_bits"])
        self._shifts = [lead - min(self._bucket_bits, lead) for lead in design.lead_bits]
        if bucket_bits is not None and bucket_bits != self._bucket_bits:
            raise MetadataMismatchError(
                f"the Redis index {prefix!r} ({self._location}) uses bucket_bits={self._bucket_bits}, "
                f"not {bucket_bits}: {self._way_out()}"
            )
        self._metadata = json.loads(stored["metadata"])
        self._sketch_bytes = self._stored_sketch_bytes()
        self._verify_bytes = verified_part(self._metadata if isinstance(self._metadata, dict) else {},
                                           self._sketch_bytes)  # fmt: skip
        #: The sketch's size when a home's key holds it (*sketch_in_key*, as stored), else 0.
        self._sketch_in_key = self._sketch_bytes if stored.get("sketch_in_key") == "1" else 0
        self._record = RECORD if self._sketch_in_key else RECORD + self._sketch_bytes
        self._masks = b"".join(pack_fingerprint(mask) for mask in design.lead_masks)
        #: The most pages the index takes: its design's page limit, within 4-byte ids' limit.
        self._limit = min(MAX_SIZE, page_limit(design))
        self._created = float(stored.get("created", 0))

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def from_uri(
        cls, uri: str, *, k: int, design: TableDesign, metadata: Mapping[str, Any] | None = None
    ) -> RedisBackend:
        """``redis://[[user]:password@]host:port/db?prefix=NAME&...`` or ``rediss://...`` (TLS); the options:
        docs/stores.md ("The Redis index")."""
        client, location, own = client_from_uri(uri)
        if own.pop("shards", 0) or own.pop("servers", ""):
            client.close()
            raise ValueError("a sharded index (shards=, servers=) is opened by ShardedRedisBackend.from_uri")
        return cls.owning(client, location, own, k=k, design=design, metadata=metadata)

    @classmethod
    def owning(
        cls,
        client: Any,
        location: str,
        own: Mapping[str, Any],
        *,
        k: int,
        design: TableDesign,
        metadata: Mapping[str, Any] | None = None,
    ) -> RedisBackend:
        """The index on *client* (closed with it, or at once if opening fails), with the URI's own options."""
        try:
            return cls(client, k=k, design=design, metadata=metadata, owns_client=True, location=location, **own)
        except BaseException:
            client.close()
            raise

    def _unlink(self) -> str:
        return f"redis-cli --scan --pattern '{{{self._prefix}}}:*' | xargs redis-cli unlink"

    def _way_out(self) -> str:
        return (
            f"open it with the same settings, use another prefix (?prefix=...), or delete it "
            f"(RedisBackend.drop(), or {self._unlink()})"
        )

    def _meta_fields(self, bucket_bits: int) -> dict[str, str]:
        return {
            "format": FORMAT,
            "design": self._design.name,
            "bucket_bits": str(bucket_bits),
            "metadata": json.dumps(
                self._metadata if self._requested_metadata is None else self._requested_metadata, sort_keys=True
            ),
            "created": str(int(time.time())),
            "n": "0",
        } | ({"sketch_in_key": "1"} if self._wants_sketch_in_key else {})

    def _open(self, bucket_bits: int) -> dict[str, str]:
        """Create the index's meta hash unless it exists; check and return what is stored."""
        fields = self._meta_fields(bucket_bits)
        args = [x for pair in fields.items() for x in pair] + [self._tag + "f0"]
        try:
            raw = self._client.eval(INIT_SCRIPT, 1, self._meta_key, *args)
        except ResponseError as exc:
            if "SIMHASH_ORPHAN" in str(exc):
                raise MetadataMismatchError(
                    f"the Redis index {self._prefix!r} ({self._location}) has data but no metadata (keys "
                    f"evicted? set maxmemory-policy noeviction): {self._way_out()}"
                ) from None
            raise
        stored = {text(raw[i]): text(raw[i + 1]) for i in range(0, len(raw), 2)}
        where = f"the Redis index {self._prefix!r} ({self._location})"
        if str(stored.get("format")).startswith("simhash-filter redis ") and stored["format"] != FORMAT:
            raise MetadataMismatchError(earlier_version(where, self._unlink()))
        if stored.get("format") != FORMAT:
            raise MetadataMismatchError(
                f"{where} is not a simhash-filter index of this version (format {stored.get('format')!r}): "
                f"{self._way_out()}"
            )
        if stored.get("design") != self._design.name:
            raise DesignMismatchError(
                f"{where} was built with table design {stored.get('design')}, this index asks for "
                f"{self._design.name} (another k or design): {self._way_out()}"
            )
        try:
            check_metadata(json.loads(stored["metadata"]), self._requested_metadata)
        except MetadataMismatchError as exc:
            raise MetadataMismatchError(f"{where}: {exc}; {self._way_out()}") from None
        return stored

    def _stored_sketch_bytes(self) -> int:
        """The sketch size of the stored metadata, which sets the record size: 0 for an index opened without a
        model that holds nothing (``index stats`` of a prefix never written); an index whose model stored no sketch
        size was written by an earlier version."""
        size = self._metadata.get("sketch_bytes", 0) if isinstance(self._metadata, dict) else 0
        if not is_count(size):
            raise MetadataMismatchError(
                f"the Redis index {self._prefix!r} ({self._location}) stores sketch_bytes {size!r} in its "
                f"metadata, not an int >= 0: {self._way_out()}"
            )
        if not size and self._metadata:
            raise MetadataMismatchError(earlier_version(f"the Redis index {self._prefix!r} ({self._location})",
                                                        self._unlink()))  # fmt: skip
        return size

    # -- introspection ---------------------------------------------------------------------------

    @property
    def prefix(self) -> str:
        """The index's name: its keys are ``{prefix}:...``."""
        return self._prefix

    @property
    def bucket_bits(self) -> int:
        """Leading bits of each table's lead value that name a bucket (fewer when a table has fewer)."""
        return self._bucket_bits

    @property
    def client(self) -> Any:
        """The redis-py client."""
        return self._client

    @property
    def retries(self) -> Retries:
        """How this index's calls are tried again after a connection error or a timeout."""
        return self._retries

    @property
    def meta_key(self) -> str:
        """The key of the index's meta hash (its settings, its record count ``n``, a shard's page count)."""
        return self._meta_key

    def __len__(self) -> int:
        (n,) = self._call("n", 0, [], None)
        return int(n)

    def info(self) -> dict[str, Any]:
        """Facts about the stored index: the base ones, and where it is."""
        out = super().info()
        out.update(
            location=self._location,
            prefix=self._prefix,
            bucket_bits=self._bucket_bits,
            created=self._created,
            max_age_seconds=self._max_age,
        )
        return out

    def notes(self) -> dict[str, int]:
        """The counters of the hash ``{prefix}:notes``."""
        self._check_open()
        stored = self._retries.call(self._client.hgetall, self._tag + "notes")
        return {text(k): int(v) for k, v in stored.items()}

    def add_notes(self, increments: Mapping[str, int]) -> dict[str, int]:
        """``HINCRBY`` of each counter and ``HGETALL`` in one script: atomic for every process.  The call carries a
        token of its own, kept an hour: tried again after a timeout whose first attempt ran, it adds nothing twice."""
        self._check_open()
        token = f"{self._tag}notes:{uuid.uuid4().hex}"
        args = [str(NOTES_TOKEN_SECONDS)] + [x for name, n in increments.items() for x in (name, str(int(n)))]
        stored = self._retries.call(self._client.eval, NOTES_SCRIPT, 2, self._tag + "notes", token, *args)
        return {text(stored[i]): int(stored[i + 1]) for i in range(0, len(stored), 2)}

    def close(self) -> None:
        """Close the connections (when this backend opened them); later calls raise ``ValueError``."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self._client.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("operation on a closed index backend")

    def drop(self) -> int:
        """Delete the whole index from Redis (every key ``{prefix}:*``) and close; return the keys deleted."""
        self._check_open()
        pattern = "".join("\\" + ch if ch in "\\*?[]{}" else ch for ch in self._tag) + "*"  # a glob: escaped
        deleted = self._retries.call(self._unlink_all, pattern)  # tried again: a second scan finds what is left
        self.close()
        return deleted

    def _unlink_all(self, pattern: str) -> int:
        """Unlink every key matching *pattern*, a thousand at a time; how many were."""
        deleted = 0
        batch: list[Any] = []
        for key in self._client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += self._client.unlink(*batch)
                batch = []
        if batch:
            deleted += self._client.unlink(*batch)
        return deleted

    # -- the script ------------------------------------------------------------------------------

    def _item_keys(self, fingerprint: int) -> list[str]:
        """The bucket keys of one fingerprint, one per table."""
        return [
            head + format(lead >> shift, "x")
            for head, lead, shift in zip(self._heads, self._design.lead_values(fingerprint), self._shifts, strict=True)
        ]

    def _calls(
        self,
        fingerprints: np.ndarray | list[int],
        keys: Sequence[str] | None,
        sketches: Sequence[bytes] | None = None,
        tables: Sequence[int] | None = None,
        masks: Sequence[bytes] | None = None,
    ) -> list[Call]:
        """Split a batch into script calls of at most :data:`BATCH` items: ``(KEYS, ARGV after the header)``; an item's
        KEYS are its buckets of *tables* (default: every table), or of the tables its mask names (op ``"m"``: *masks*
        end each item)."""
        fps = fingerprints.tolist() if isinstance(fingerprints, np.ndarray) else fingerprints
        out = []
        for lo in range(0, len(fps), BATCH):
            call_keys: list[Any] = [self._meta_key]
            args: list[Any] = []
            for i in range(lo, min(lo + BATCH, len(fps))):
                buckets = self._item_keys(fps[i])
                if masks is not None:
                    tables = [t for t, on in enumerate(masks[i][:-1]) if on == 49]
                call_keys.extend(buckets if tables is None else (buckets[t] for t in tables))
                args.append(pack_fingerprint(fps[i]))
                if keys is not None:
                    args.append(encode_key(keys[i]))
                if sketches is not None:
                    args.append(sketches[i])
                if masks is not None:
                    args.append(masks[i])
            out.append((call_keys, args))
        return out

    def _call(
        self,
        op: str,
        k: int,
        fingerprints: np.ndarray | list[int],
        keys: Sequence[str] | None,
        sketches: Sequence[bytes] | None = None,
        bound: CheckBound | None = None,
        tables: Sequence[int] | None = None,
        count: bool = False,
        masks: Sequence[bytes] | None = None,
        supplied: bytes = b"",
    ) -> list[Any]:
        """Run the script for *op* over a batch, one call per :data:`BATCH` items, pipelined; the replies (the header
        of :mod:`.script` from *bound*, *tables*, *count* and *supplied*).  Tries again after a connection error or a
        timeout (telling the script), and creates the index again if it is gone."""
        self._check_open()
        calls = (
            self._calls(fingerprints, keys, sketches, tables, masks) if len(fingerprints) else [([self._meta_key], [])]
        )
        lead_masks = self._masks if op in ("d", "p") else b""
        n_tables = self._design.n_tables
        chosen = range(n_tables) if tables is None else tables
        if tables is not None:
            lead_masks, n_tables = b"".join(self._masks[8 * t : 8 * t + 8] for t in tables), len(tables)
        header: list[Any] = [op, str(k), self._tag, str(n_tables), "0", str(self._max_age)]
        header += [str(self._record), lead_masks]
        if bound is None:
            header += ["0", "0", "0"]
        else:
            differ = bound.differing_bits(self._verify_bytes)
            header += [str(bound.per_table), str(bound.duplicates), str(differ)]
        header += [str(self._limit), "0" if tables is None else "2" if count else "1"]
        wide = "".join("1" if self._shifts[t] else "0" for t in chosen)  # buckets of several blocks
        header += [str(bound.block_pages if bound is not None and op == "d" else 0), wide, str(self._verify_bytes)]
        header += [str(self._sketch_in_key), supplied]
        where = self._retries.where
        try:
            return run_with_retries(
                self._send, header, calls, retry_at=4, retries=self._retries, recreate=self._recreate
            )
        except ResponseError as exc:
            if str(exc).startswith(FULL + " "):
                stored = int(str(exc).split()[1])
                if self._limit < MAX_SIZE:
                    raise IndexFullError(f"{where}: {full_message(stored, self._design)}") from None
                message = f"the index holds {stored:,} fingerprints, the most it can hold"
                raise IndexFullError(f"{where}: {message}") from None
            raise

    def _send(self, header: list[Any], calls: list[Call]) -> list[Any]:
        """Send the script calls; their replies in order."""
        return self._runner.send(header, calls)

    def _recreate(self) -> None:
        with self._lock:
            logger.warning(
                "simhash: the Redis index %r at %s is gone (a server restarted without persistence, or the keys "
                "were deleted); starting it again, empty",
                self._prefix,
                self._location,
            )
            self._open(self._bucket_bits)

    # -- writes ----------------------------------------------------------------------------------

    def add_many(self, fingerprints: np.ndarray, keys: Sequence[str], sketches: Sequence[bytes]) -> None:
        """Store many fingerprints with their sketches, in order, pipelined."""
        checked = self.checked_sketches(sketches, len(fingerprints))
        if len(fingerprints):
            self._call("a", 0, fingerprints, keys, checked)

    def add_and_candidates(
        self, fingerprint: int, key: str, sketch: bytes, k: int, bound: CheckBound = DEFAULT_BOUND
    ) -> list[Candidate]:
        """:meth:`Backend.add_and_candidates`, in one script call on the server; a call tried again after a timeout
        that finds the page stored (its first attempt ran) answers as that attempt did, and stores nothing."""
        checked = self.checked_sketches([sketch], 1)
        (reply,) = self._call("d", k, [fingerprint], [key], checked, bound)
        return decode_candidates(reply[0])

    def add_and_candidates_in(
        self,
        tables: Sequence[int],
        fingerprint: int,
        key: str,
        sketch: bytes,
        k: int,
        bound: CheckBound,
        *,
        count: bool = False,
        supplied: bytes = b"",
    ) -> tuple[list[Candidate], bool | None]:
        """:meth:`add_and_candidates` over some of the design's *tables* only (their indexes, in order), and whether
        the page is stored here (one of them took it, in this call or in its first attempt): a shard of a sharded
        index (:mod:`.sharded`).  With *count*, the call that stores the page counts it in the meta hash's
        ``pages``, in the same atomic step: once, however often the call is tried again.  With *sketch_in_key*,
        candidates stored here by another shard's page come without a sketch (and a hashed key); *supplied* brings
        the ones the client found (script.py, ARGV[18]); None: a verdict needs one that is not here, nothing was
        stored (call again with it)."""
        checked = self.checked_sketches([sketch], 1)
        keys: list[Any] = [key]
        if self._sketch_in_key:
            keys, checked = [sketch + encode_key(key)] if count else keys, [sketch[: self._verify_bytes]]
        (reply,) = self._call("d", k, [fingerprint], keys, checked, bound, tables, count, supplied=supplied)
        state = int(reply[0][-1])
        return decode_candidates(reply[0][:-1], self._sketch_in_key), None if state == 2 else bool(state)

    def add_masked(
        self, fingerprints: np.ndarray, keys: Sequence[str], sketches: Sequence[bytes], masks: Sequence[bytes]
    ) -> None:
        """Store many pages, each in the tables its mask names (a byte ``1`` or ``0`` per table) and counted in the
        meta hash's ``pages`` when the mask's last byte is ``1``: a sharded index's bulk load."""
        checked = self.checked_sketches(sketches, len(fingerprints))
        if self._sketch_in_key:
            home = [mask[-1:] == b"1" for mask in masks]
            keys = [s + encode_key(k) if h else k for s, k, h in zip(checked, keys, home, strict=True)]  # type: ignore[misc]  # a key with its sketch: bytes
            checked = [s[: self._verify_bytes] for s in checked]
        if len(fingerprints):
            self._call("m", 0, fingerprints, keys, checked, masks=masks)

    def counted_pages(self) -> int:
        """The pages this shard counted (``pages`` of its meta hash: :mod:`.sharded`)."""
        self._check_open()
        return int(self._retries.call(self._client.hget, self._meta_key, "pages") or 0)

    def candidates_in(self, tables: Sequence[int], fingerprint: int, k: int, bound: CheckBound) -> list[Candidate]:
        """:meth:`candidates` over some of the design's *tables* only."""
        (reply,) = self._call("p", k, [fingerprint], None, None, bound, tables)
        return decode_candidates(reply[0], self._sketch_in_key)

    def home_record(self, tables: Sequence[int], fingerprint: int, hashed: str, claim: bytes) -> bytes | None:
        """The key (sketch, then URL) of the page *fingerprint* that other shards keep as *hashed*, on this shard, its
        home (of the design's *tables*: its home's): from its records, else from the ``x`` hash; None when it has
        neither, and then, in the same atomic step, *claim* (unless b""; fingerprint, 4-byte length and key of the
        page asking) is kept for the page's own call here to answer (:mod:`.sharded`)."""
        (reply,) = self._call("r", 0, [fingerprint], [hashed], [claim], DEFAULT_BOUND, tables)  # every page at 0
        return None if reply is None else bytes(reply)

    def candidates(self, fingerprint: int, k: int, bound: CheckBound = DEFAULT_BOUND) -> list[Candidate]:
        """The candidates within *k* under *bound*, nearest first, then oldest, with their sketches; nothing
        stored."""
        (reply,) = self._call("p", k, [fingerprint], None, None, bound)
        return decode_candidates(reply[0])

    def entries(self) -> Iterator[Entry]:
        """Every stored fingerprint, oldest first (read chunk by chunk; not a snapshot)."""
        self._check_open()
        n = int(self._retries.call(self._client.hget, self._meta_key, "n") or 0)
        oldest = time.time() - self._max_age if self._max_age else 0
        size, width = self._sketch_bytes, self._record
        record = record_dtype(width)
        for chunk in range((n + CHUNK - 1) // CHUNK):
            records = self._retries.call(self._client.get, f"{self._tag}f{chunk}") or b""
            urls = self._retries.call(self._client.get, f"{self._tag}u{chunk}") or b""
            count = min(CHUNK, n - chunk * CHUNK)
            table = np.frombuffer(records, dtype=record, count=min(count, len(records) // width))
            start = 0
            for i, (fp, end, added) in enumerate(table.tolist()):
                key = urls[start:end]
                start = end
                if added >= oldest:
                    sketch = records[i * width + RECORD : (i + 1) * width]
                    if self._sketch_in_key:
                        sketch, key = split_key(key, size)
                    key = decode_key(key)
                    yield Entry(fp, key, float(added), sketch)
