"""What a Redis index stores, and where: its format, the sizes of its entries and records, its key names, and
the decoding of what the script replies (layout 3, described in :mod:`simhash_filter.index.backends.redis`)."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from simhash_filter.index.backends.base import Candidate
from simhash_filter.index.tables import TableDesign

#: Format of the stored index (``format`` in the meta hash): its layout version.
FORMAT = "simhash-filter redis 3"
#: Default number of leading bits of each table's lead value that name its bucket (at most the lead bits), for a
#: design whose leads are this short or shorter (:func:`default_bucket_bits`).
DEFAULT_BUCKET_BITS = 14


def default_bucket_bits(design: TableDesign) -> int:
    """The bucket width a new index of *design* gets: :data:`DEFAULT_BUCKET_BITS`, or the design's shortest lead
    when it has 20 bits or more (a bucket then holds one block, and a check's scan stays bounded)."""
    shortest = min(design.lead_bits)
    return shortest if shortest >= 20 else DEFAULT_BUCKET_BITS
#: Fingerprints per record chunk (``{prefix}:f<c>`` and ``{prefix}:u<c>``): 4095 records of 16 bytes and the
#: string's header fit a 64 KiB allocation exactly.
CHUNK = 4095
#: Bytes of a bucket entry: the id (4) and the fingerprint's 32-bit fold (4: its halves XORed), then its low half
#: (:data:`ENTRY_LOW`): an entry that passes the fold is verified without reading its record.
ENTRY = 8
ENTRY_LOW = 4
#: Bytes of a record without its sketch: the fingerprint (8), the end of its key (4), when it was added (4); the
#: sketch (``sketch_bytes``, its metadata's) follows.
RECORD = 16
#: Items per script call: a call blocks the server while it runs.
BATCH = 64
#: Ids are 4 bytes.
MAX_SIZE = 2**32

_FP = struct.Struct(">Q")


def tag(prefix: str) -> str:
    """The start of every key of the index *prefix*: ``{prefix}:`` (a Redis Cluster hash tag)."""
    return "{" + prefix + "}:"


def record_dtype(width: int) -> np.dtype:
    """The numpy dtype of one record of *width* bytes (its sketch, if any, left out)."""
    return np.dtype({"names": ["fp", "end", "added"], "formats": [">u8", ">u4", ">u4"], "offsets": [0, 8, 12],
                     "itemsize": width})  # fmt: skip


def pack_fingerprint(fingerprint: int) -> bytes:
    """A fingerprint as the script takes it: 8 bytes, big-endian."""
    return _FP.pack(fingerprint)


def text(value: Any) -> str:
    """A Redis reply (bytes or not) as str."""
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def encode_key(key: str | bytes) -> bytes:
    """A page's key as stored: UTF-8, where any str round-trips, lone surrogates too (bytes: stored as they are,
    a sharded index's sketch and URL)."""
    return key if isinstance(key, bytes) else key.encode("utf-8", "surrogatepass")


def decode_key(value: bytes) -> str:
    """A stored key as str (:func:`encode_key` undone)."""
    return value.decode("utf-8", "surrogatepass")


def split_key(stored: bytes, sketch_in_key: int) -> tuple[bytes | None, bytes]:
    """A key stored by a shard whose records keep no sketch (*sketch_in_key*: the sketch's size): the sketch and
    the URL of a page's home, else None and the (shorter) hashed key."""
    if len(stored) >= sketch_in_key:
        return stored[:sketch_in_key], stored[sketch_in_key:]
    return None, stored


def decode_candidates(item: list[Any], sketch_in_key: int = 0) -> list[Candidate]:
    """A two-stage reply: (distance, fingerprint, key, sketch) quadruples; with *sketch_in_key* (the sketch's size),
    the sketch is at the start of a home's key (:func:`split_key`), and b"" for a candidate stored elsewhere."""
    out = []
    for i in range(0, len(item), 4):
        sketch, key = bytes(item[i + 3]), bytes(item[i + 2])
        if sketch_in_key:
            kept, key = split_key(key, sketch_in_key)
            sketch = kept or b""
        out.append(Candidate(decode_key(key), int(item[i]), _FP.unpack(item[i + 1])[0], sketch))
    return out


def claim_record(fingerprint: int, home_key: bytes) -> bytes:
    """A page's claim on the home of a page it met and could not verify (the script's op ``"r"``): its fingerprint,
    the length of its key on its own home (*home_key*: sketch, then URL) in 4 bytes, and that key."""
    return _FP.pack(fingerprint) + len(home_key).to_bytes(4, "big") + home_key


def decode_claims(fingerprint: int, claims: bytes, sketch_bytes: int) -> list[Candidate]:
    """The pages whose :func:`claim_record` *claims* holds, as candidates of the page *fingerprint* claimed."""
    out = []
    at = 0
    while at < len(claims):
        fp, size = _FP.unpack_from(claims, at)[0], int.from_bytes(claims[at + 8 : at + 12], "big")
        key = claims[at + 12 : at + 12 + size]
        out.append(Candidate(decode_key(key[sketch_bytes:]), (fp ^ fingerprint).bit_count(), fp, key[:sketch_bytes]))
        at += 12 + size
    return out
