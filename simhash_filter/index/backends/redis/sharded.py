"""One two-stage index sharded over the masters of a Redis Cluster (``?cluster=1&shards=N``) or over a list of
Redis servers (``?servers=host2:port,host3:port``).

Each table's bucket belongs to one shard (a hash of the table and the bucket); a shard is a layout-3
:class:`RedisBackend` under its own prefix, listed in ``{prefix}:shards``.  A check runs the script on every shard
that owns one of the page's buckets, with those tables only, the shards at the same time, and merges their
candidates.  A page's URL and sketch are kept once, on its *home* (the owner of its bucket of table
``fingerprint % T``); the other shards keep :func:`hashed_key`, and a candidate that comes with one gets its URL and
sketch from its home.  A shard whose verdict needs a sketch it lacks stores nothing and is called again with it; a
page met before its home has it leaves a *claim* there, answered by the page's own call.  Why no two near-duplicates
are both kept, what sharding gives up and what it costs: docs/stores.md ("One index sharded over a cluster or
several servers")."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import redis

from simhash_filter.index.backends.base import Backend, Candidate, Entry, MetadataMismatchError, earlier_version
from simhash_filter.index.backends.redis.backend import RedisBackend
from simhash_filter.index.backends.redis.connection import DEFAULT_BACKOFF, DEFAULT_RETRIES, Retries
from simhash_filter.index.backends.redis.layout import (
    claim_record,
    decode_claims,
    decode_key,
    encode_key,
    pack_fingerprint,
    tag,
    text,
)
from simhash_filter.index.backends.redis.script import KEEP_KEY_SCRIPT
from simhash_filter.index.bound import DEFAULT_BOUND, CheckBound
from simhash_filter.index.tables import TableDesign

#: Names tried for a cluster shard's prefix before its hash tag falls on the master wanted.
_TRIES = 100_000
#: Rounds of a check's shard calls before it gives up (each round after the first brings sketches that new pages
#: in its blocks need: only pages checked at the same moment add such pages).
_ROUNDS = 50


def shard_prefixes(
    client: Any, prefix: str, shards: int, cluster: bool, retries: Retries | None = None
) -> list[str]:
    """The prefixes of the index *prefix*'s shards: those kept in ``{prefix}:shards``
    (``{"shards": [...], "keys": "home", "sketches": "home"}``: a page's URL and sketch are kept once, on its home
    shard), else new ones stored there (in a cluster, each on the next master in turn).  A different number of
    shards stored, or a list written by an earlier version, is an error.  Each call is tried again as *retries*
    says (they are idempotent: a ``SET NX`` and reads)."""
    retries = retries or Retries()
    key = tag(prefix) + "shards"
    stored = retries.call(client.get, key)
    if stored is None:
        names = [f"{prefix}.{s}" for s in range(shards)]
        if cluster:  # short names (every bucket key holds one): PREFIX.i, the first free i on the master wanted
            masters = sorted((node.host, node.port) for node in client.get_primaries())
            names = []
            for s in range(shards):
                want = masters[s % len(masters)]
                for i in range(_TRIES):
                    name = f"{prefix}.{i}"
                    node = client.get_node_from_key(tag(name) + "meta")
                    if (node.host, node.port) == want and name not in names:
                        names.append(name)
                        break
        layout = {"shards": names, "keys": "home", "sketches": "home"}
        retries.call(client.set, key, json.dumps(layout), nx=True)
        stored = retries.call(client.get, key)
    kept = json.loads(text(stored))
    if not isinstance(kept, dict) or kept.get("keys") != "home" or kept.get("sketches") != "home":
        names = [prefix, *(kept["shards"] if isinstance(kept, dict) else kept)]
        unlink = "; ".join(f"redis-cli --scan --pattern '{{{name}}}:*' | xargs redis-cli unlink" for name in names)
        raise MetadataMismatchError(earlier_version(f"the sharded Redis index {prefix!r}", unlink))
    names = kept["shards"]
    if len(names) != shards:
        raise MetadataMismatchError(
            f"the sharded Redis index {prefix!r} has {len(names)} shards, not {shards}: "
            f"open it with shards={len(names)}"
        )
    return list(names)


#: The start of a page's key on the shards that are not its home (:func:`hashed_key`); a URL never starts so.
HASHED = "\x00"


def hashed_key(key: str) -> str:
    """What the shards other than a page's home keep of its URL *key*: :data:`HASHED` and 16 hex digits of the
    URL's SHA-1 (enough to tell a page seen again, and to find the URL on the home shard)."""
    return HASHED + hashlib.sha1(encode_key(key)).hexdigest()[:16]


def keep_key(home: RedisBackend, fingerprint: int, key: str, hashed: str, sketch: bytes) -> list[Candidate]:
    """Keep on *home* the URL *key* of a page only other shards stored (its tables there all refused it), after
    its *sketch* in an index that keeps it on the home, in the hash ``{home}:x`` under its fingerprint and *hashed*
    key, and count it there once, however often the call is tried again; the pages that claimed it there (met it
    before its home kept it: see the module), as its candidates."""
    field = pack_fingerprint(fingerprint) + hashed.encode("ascii")
    x_key, claims = tag(home.prefix) + "x", tag(home.prefix).encode("utf-8") + b"c:" + field
    value = sketch + encode_key(key)
    found = home.retries.call(home.client.eval, KEEP_KEY_SCRIPT, 3, x_key, home.meta_key, claims, field, value)
    return decode_claims(fingerprint, bytes(found), len(sketch))


def kept_keys(home: RedisBackend, sketch_bytes: int) -> Iterator[tuple[int, str, str, bytes]]:
    """``(fingerprint, hashed key, URL, sketch)`` of every page :func:`keep_key` kept on *home* (its sketch
    *sketch_bytes* long)."""
    for field, value in home.client.hscan_iter(tag(home.prefix) + "x", count=1000):
        fp, hashed = int.from_bytes(field[:8], "big"), field[8:].decode("ascii")
        yield fp, hashed, decode_key(value[sketch_bytes:]), value[:sketch_bytes]


class ShardedRedisBackend(Backend):
    """A two-stage index over :class:`RedisBackend` shards (see the module)."""

    remote = True

    def __init__(
        self,
        shards: Sequence[RedisBackend],
        *,
        k: int,
        design: TableDesign,
        prefix: str,
        location: str,
    ) -> None:
        first = shards[0]
        super().__init__(k=k, design=design, metadata=first.metadata)
        if len({shard.bucket_bits for shard in shards}) != 1:
            raise MetadataMismatchError(f"the shards of the Redis index {prefix!r} differ in bucket_bits")
        self._shards = list(shards)
        if first.sketch_bytes <= len(hashed_key("")):
            raise ValueError(f"a sharded index keeps sketches longer than {len(hashed_key(''))} bytes")
        self._sketch_bytes = first.sketch_bytes
        self._prefix = prefix
        self._location = location
        self._retries = dataclasses.replace(first.retries, where=f"sharded Redis index {prefix!r} at {location}")
        #: The clients the shards use (closed with the index).
        self._clients: list[Any] = []
        #: One thread per shard: a check's shard calls run at the same time.
        self._pool = ThreadPoolExecutor(max_workers=len(self._shards), thread_name_prefix="simhash-shard")
        bits = first.bucket_bits
        self._shifts = [lead - min(bits, lead) for lead in design.lead_bits]

    @classmethod
    def from_uri(cls, uri: str, *, k: int, design: TableDesign, metadata: Mapping[str, Any] | None = None) -> Backend:
        """Every ``redis://`` (``rediss://``) URI: a sharded index when it names ``shards`` (in a cluster: one index
        over that many hash tags, on different masters) or ``servers`` (more ``host:port`` servers, comma-separated:
        one index over them and the URI's), else one :class:`RedisBackend` (its options:
        :meth:`RedisBackend.from_uri`)."""
        from simhash_filter.index.backends.redis.connection import client_from_uri

        client, location, own = client_from_uri(uri)
        shards, servers = own.pop("shards", 0), own.pop("servers", "")
        if not (shards or servers):
            return RedisBackend.owning(client, location, own, k=k, design=design, metadata=metadata)
        return open_sharded(uri, client, location, own, shards, servers, k=k, design=design, metadata=metadata)

    # -- routing -----------------------------------------------------------------------------------

    def _groups(self, fingerprint: int) -> list[tuple[RedisBackend, list[int]]]:
        """The shards that own the page's buckets, each with its tables (in table order): its home first (the owner
        of table ``fingerprint % T``'s bucket, so that homes spread evenly over the shards), then the others in shard
        order."""
        groups: dict[int, list[int]] = {}
        leads = self._design.lead_values(fingerprint)
        home = 0
        for t, (lead, shift) in enumerate(zip(leads, self._shifts, strict=True)):
            shard = zlib.crc32(b"%d:%x" % (t, lead >> shift)) % len(self._shards)
            groups.setdefault(shard, []).append(t)
            if t == fingerprint % len(leads):
                home = shard
        order = [home] + [s for s in sorted(groups) if s != home]
        return [(self._shards[s], groups[s]) for s in order]

    @staticmethod
    def _merged(found: Iterable[Candidate]) -> list[Candidate]:
        """Candidates of several shards: each page once, nearest first (stable: in shard order)."""
        seen: dict[tuple[str, int], Candidate] = {}
        for c in found:
            seen.setdefault((c.key, c.fingerprint), c)
        return sorted(seen.values(), key=lambda c: c.distance)

    # -- two-stage checks ------------------------------------------------------------------------

    def add_and_candidates(
        self, fingerprint: int, key: str, sketch: bytes, k: int, bound: CheckBound = DEFAULT_BOUND
    ) -> list[Candidate]:
        """The candidates of every shard that owns one of the page's buckets, then the page stored in the tables that
        take it, the shards called at the same time (each shard's step atomic); the home shard (the first group)
        counts the page and keeps its URL, the others a hash of it; when the home's tables all refused the page and
        another shard stored it, the home keeps its URL and counts it after the calls (see the module)."""
        groups = self._groups(fingerprint)
        hashed = hashed_key(key)
        claim = claim_record(fingerprint, sketch + encode_key(key))
        found: list[list[Candidate]] = [[] for _ in groups]
        stored: list[bool | None] = [None] * len(groups)
        homes: dict[tuple[int, str], tuple[str, bytes] | None] = {}
        for _ in range(_ROUNDS):  # one, unless a shard waits for sketches kept on their homes (see the module)
            waiting = [i for i, took in enumerate(stored) if took is None]
            supplied = self._supplied(homes)
            replies = self._together(
                [
                    (
                        groups[i][0].add_and_candidates_in,
                        (groups[i][1], fingerprint, hashed if i else key, sketch, k, bound),
                        {"count": i == 0, "supplied": supplied},
                    )
                    for i in waiting
                ]
            )
            for i, (candidates, took) in zip(waiting, replies, strict=True):
                found[i], stored[i] = candidates, took
            homes.update(self._homes([c for candidates in found for c in candidates], homes, claim))
            if None not in stored:
                break
        else:
            raise RuntimeError(f"{self._retries.where}: a check kept finding new candidates ({_ROUNDS} rounds)")
        if any(stored) and not stored[0]:
            found[0] += keep_key(groups[0][0], fingerprint, key, hashed, sketch)
        return self._resolved([c for candidates in found for c in candidates], homes)

    def candidates(self, fingerprint: int, k: int, bound: CheckBound = DEFAULT_BOUND) -> list[Candidate]:
        groups = self._groups(fingerprint)
        replies = self._together(
            [(shard.candidates_in, (tables, fingerprint, k, bound), {}) for shard, tables in groups]
        )
        found = [c for candidates in replies for c in candidates]
        return self._resolved(found, self._homes(found, {}))

    def _homes(
        self, found: list[Candidate], known: Mapping[tuple[int, str], Any], claim: bytes = b""
    ) -> dict[tuple[int, str], tuple[str, bytes] | None]:
        """The URL and sketch of each candidate of *found* that a shard gave with a hashed key and that is not in
        *known*: from a candidate of *found* with its URL (its home's), else from its home shard (asked at the same
        time), by ``(fingerprint, hashed key)``; None for a page whose home has neither (yet), where *claim* (the
        checked page's :func:`~.layout.claim_record`) is then left for that page's own call (see the module)."""
        out: dict[tuple[int, str], tuple[str, bytes] | None] = {}
        for c in found:
            if not c.key.startswith(HASHED):
                out[c.fingerprint, hashed_key(c.key)] = (c.key, c.sketch)
        wanted = list({(c.fingerprint, c.key) for c in found if c.key.startswith(HASHED)} - out.keys() - known.keys())
        if wanted:
            asks: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
                (self._home_record, (*pair, claim), {}) for pair in wanted
            ]
            out.update(zip(wanted, self._together(asks), strict=True))
        return out

    def _supplied(self, homes: Mapping[tuple[int, str], tuple[str, bytes] | None]) -> bytes:
        """The sketches of *homes* as a shard's script takes them (``ARGV[18]`` of :mod:`.script`): fingerprint,
        hashed key, ``1`` and the verified part, or ``0`` and as many zero bytes when its home has none."""
        size = self._verify_bytes
        return b"".join(
            pack_fingerprint(fp) + hashed.encode("ascii") + (b"1" + found[1][:size] if found else b"0" + bytes(size))
            for (fp, hashed), found in homes.items()
        )

    def _resolved(
        self, found: list[Candidate], homes: Mapping[tuple[int, str], tuple[str, bytes] | None]
    ) -> list[Candidate]:
        """Candidates of several shards with their URLs and sketches from *homes* where a shard gave a hashed key,
        each page once, nearest first (stable: in shard order).  A page whose home has no record of it (a check cut
        short between its calls, or its home about to keep it) is left out (nothing to verify it with)."""
        out = []
        for c in found:
            if c.key.startswith(HASHED):
                home = homes.get((c.fingerprint, c.key))
                if home is None:
                    continue
                c = c._replace(key=home[0], sketch=home[1])
            out.append(c)
        return self._merged(out)

    def _home_record(self, fingerprint: int, hashed: str, claim: bytes = b"") -> tuple[str, bytes] | None:
        """The URL and sketch of the stored page *fingerprint* whose other shards keep *hashed*: from its home
        shard's records (the pages at distance 0 in its tables there), else from those the home kept for pages its
        tables refused; None when the home has neither (and then *claim*, unless b"", is left there in the same
        step: see the module)."""
        home, tables = self._groups(fingerprint)[0]
        stored = home.home_record(tables, fingerprint, hashed, claim)
        size = self._sketch_bytes
        return None if stored is None else (decode_key(stored[size:]), stored[:size])

    def _together(self, calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]]) -> list[Any]:
        """Run the calls at the same time (the first in this thread), their results in order; the first error is
        raised once every call has ended."""
        futures = [self._pool.submit(f, *a, **kw) for f, a, kw in calls[1:]]
        function, args, kwargs = calls[0]
        try:
            first = function(*args, **kwargs)
        finally:
            wait(futures)  # the others run to their end either way
        return [first, *(future.result() for future in futures)]

    def add_many(self, fingerprints: np.ndarray, keys: Sequence[str], sketches: Sequence[bytes]) -> None:
        """Store every page in all its tables (no check): per shard, the pages it owns a bucket of, each with the
        mask of its tables there, in one script call per :data:`~.layout.BATCH` pages, the shards at the same time;
        a page's home counts it and keeps its URL, the others a hash of it."""
        sketches = self.checked_sketches(sketches, len(keys))
        n_tables = self._design.n_tables
        parts: dict[int, tuple[list[int], list[str], list[bytes], list[bytes]]] = {}
        index = {id(shard): s for s, shard in enumerate(self._shards)}
        for fp, key, sketch in zip(fingerprints.tolist(), keys, sketches, strict=True):
            hashed = hashed_key(key)
            for i, (shard, tables) in enumerate(self._groups(fp)):
                mask = bytearray(b"0" * n_tables + (b"1" if i == 0 else b"0"))
                for t in tables:
                    mask[t] = ord("1")
                part = parts.setdefault(index[id(shard)], ([], [], [], []))
                part[0].append(fp)
                part[1].append(hashed if i else key)
                part[2].append(sketch)
                part[3].append(bytes(mask))
        self._together(
            [
                (self._shards[s].add_masked, (np.array(p[0], dtype=np.uint64), p[1], p[2], p[3]), {})
                for s, p in sorted(parts.items())
            ]
        )

    def __len__(self) -> int:
        """The pages stored: those the shards counted."""
        return sum(shard.counted_pages() for shard in self._shards)

    # -- maintenance -------------------------------------------------------------------------------

    def entries(self) -> Iterator[Entry]:
        """Every stored page once (its record on its home shard, or on the first shard that has it with the URL its
        home kept), oldest first."""
        seen: dict[tuple[str, int], Entry] = {}
        hashed: dict[tuple[str, int], Entry] = {}
        for shard in self._shards:
            for entry in shard.entries():
                (hashed if entry.key.startswith(HASHED) else seen).setdefault((entry.key, entry.fingerprint), entry)
        for shard in self._shards:
            for fp, key_hash, url, sketch in kept_keys(shard, self._sketch_bytes):
                other = hashed.get((key_hash, fp))
                if other is not None:
                    seen.setdefault((url, fp), other._replace(key=url, sketch=sketch))
        yield from sorted(seen.values(), key=lambda e: e.added or 0.0)

    def notes(self) -> dict[str, int]:
        return self._shards[0].notes()

    def add_notes(self, increments: Mapping[str, int]) -> dict[str, int]:
        return self._shards[0].add_notes(increments)

    def info(self) -> dict[str, Any]:
        out = super().info()
        out.update(
            location=self._location,
            prefix=self._prefix,
            bucket_bits=self._shards[0].bucket_bits,
            shards=[{"prefix": shard.prefix, "records": len(shard)} for shard in self._shards],
        )
        return out

    def drop(self) -> int:
        """Delete every shard and the shard list; close."""
        client = self._shards[0].client
        deleted = int(self._retries.call(client.delete, tag(self._prefix) + "shards"))
        for shard in self._shards:
            deleted += shard.drop()
        return deleted

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for shard in self._shards:
            shard.close()
        for client in self._clients:
            client.close()
        self._clients = []


def _server_uri(uri: str, address: str) -> str:
    """*uri* pointing at the server *address* (``host:port``), its credentials, database and options kept."""
    parts = urlsplit(uri)
    userinfo = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{address}" if userinfo else address))


def open_sharded(
    uri: str,
    client: Any,
    location: str,
    own: dict[str, Any],
    shards: int,
    servers: str,
    *,
    k: int,
    design: TableDesign,
    metadata: Mapping[str, Any] | None,
) -> ShardedRedisBackend:
    """The sharded index of a ``redis://`` URI with ``shards`` or ``servers`` (its client already made)."""
    from simhash_filter.index.backends.redis.connection import client_from_uri

    prefix = own.pop("prefix", "simhash")
    cluster = not isinstance(client, redis.Redis)
    clients = [client]
    try:
        addresses = [a.strip() for a in servers.split(",") if a.strip()]
        if addresses and cluster:
            raise ValueError("servers= lists plain Redis servers: a cluster's shards are its masters (shards=N)")
        clients += [client_from_uri(_server_uri(uri, address)).client for address in addresses]
        count = len(clients) if addresses else shards
        if addresses and shards and shards != count:
            raise ValueError(f"shards={shards}, but {count} servers are given")
        if count < 2:
            raise ValueError(f"a sharded index needs at least 2 shards, got {count}")
        retries = Retries(own.get("retries", DEFAULT_RETRIES), own.get("retry_backoff", DEFAULT_BACKOFF), location)
        names = shard_prefixes(client, prefix, count, cluster, retries)
        backends = []
        for s, name in enumerate(names):
            shard_client = clients[s] if addresses else client
            backends.append(
                RedisBackend(
                    shard_client,
                    k=k,
                    design=design,
                    metadata=metadata,
                    prefix=name,
                    owns_client=False,
                    location=location,
                    sketch_in_key=True,
                    **own,
                )
            )
        sharded = ShardedRedisBackend(backends, k=k, design=design, prefix=prefix, location=location)
    except BaseException:
        for c in clients:
            c.close()
        raise
    sharded._clients = clients
    return sharded
