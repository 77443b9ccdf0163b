"""The on-disk backend (``simhash_filter.index.backends.file``): what survives a reopen, a torn tail and a
``kill -9``; what a damaged, foreign or incompatible index gives; locking, read-only snapshots,
expiry, deletion and compaction.  (The query contract is in ``test_backends.py``.)"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from bounded_reference import BoundedReference

from simhash_filter.index.backends import Candidate, MetadataMismatchError, open_backend
from simhash_filter.index.backends.file import CorruptIndexError, FileBackend, IndexLockedError, parse_age
from simhash_filter.index.backends.file.records import (
    FORMAT,
    HEADER_SIZE,
    LENGTH_BITS,
    RECORD,
    record_check,
    record_checks,
    record_dtype,
)
from simhash_filter.index.bound import CheckBound
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import Match, TableDesign

DESIGN = TableDesign.parse("4x16/k3")
#: An index of DESIGN with a small sketch beside each fingerprint: records of 40 bytes.
META = {"model": "m1", "sketch_bytes": 8}
S = bytes(8)
RECORD_BYTES = record_dtype(8).itemsize


def open_index(path: Path, **options: object) -> FileBackend:
    return FileBackend(path, k=3, design=DESIGN, metadata=META, **options)  # type: ignore[arg-type]


def random_fps(n: int, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**64, size=n, dtype=np.uint64)


class Clock:
    """A settable clock (Unix seconds)."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_reopen_keeps_fingerprints_keys_and_order(tmp_path: Path) -> None:
    """Everything added (one by one and in bulk) is there after a reopen, keys read back from disk."""
    fps = random_fps(5000)
    with open_index(tmp_path / "idx", buffer_size=64) as index:
        assert index.add_and_candidates(0xABCDEF, "https://a.example/first", S, 3) == []
        index.add_many(fps, [f"https://b.example/{i}" for i in range(len(fps))], [S] * len(fps))
        index.add(0xABCDEF ^ 0b101, "https://a.example/twin", S)
    with open_index(tmp_path / "idx") as index:
        assert len(index) == 5002
        assert index.query(0xABCDEF, 3) == [
            Match("https://a.example/first", 0, 0xABCDEF),
            Match("https://a.example/twin", 2, 0xABCDEF ^ 0b101),
        ]
        assert index.query(int(fps[4321]), 0) == [Match("https://b.example/4321", 0, int(fps[4321]))]
        found = index.add_and_candidates(int(fps[17]) ^ 1, "https://c.example/", S, 3)
        assert found == [Candidate("https://b.example/17", 1, int(fps[17]), S)]


def test_keys_are_any_unicode_and_stay_on_disk(tmp_path: Path) -> None:
    """Keys round-trip whatever their characters (even lone surrogates); memory holds no key strings."""
    keys = ["https://例子.测试/路径?q=中文", "item:1", "x\udcff", ""]
    with open_index(tmp_path / "idx") as index:
        index.add_many(np.arange(len(keys), dtype=np.uint64) << np.uint64(40), keys, [S] * len(keys))
        assert not hasattr(index._store, "keys")  # the rows read each key from disk
    with open_index(tmp_path / "idx") as index:
        assert [e.key for e in index.entries()] == keys


def test_record_check_scalar_matches_vectorised() -> None:
    """The per-add check and the numpy check used on open agree."""
    records = np.zeros(3, dtype=RECORD)
    records["fp"] = [0, 2**64 - 1, 0x0123456789ABCDEF]
    records["offset"] = [HEADER_SIZE, 2**40, 99]
    records["added"] = [0, 2**32 - 1, 1_700_000_000]
    records["length_refused"] = [0, 7, 2**20]
    salt = 0x5A17
    expected = [
        record_check(int(r["fp"]), int(r["offset"]), int(r["added"]), int(r["length_refused"]), salt) for r in records
    ]
    assert record_checks(records, salt).tolist() == expected


@pytest.mark.parametrize("cut", [1, 31, 32 + 5])
def test_torn_tail_is_cut_on_open(tmp_path: Path, cut: int, caplog: pytest.LogCaptureFixture) -> None:
    """A record cut short at the end (the writer died mid-write) is dropped with a warning; the rest stays."""
    with open_index(tmp_path / "idx") as index:
        index.add_many(random_fps(100), [f"u{i}" for i in range(100)], [S] * 100)
    records = tmp_path / "idx" / "records.1"
    size = records.stat().st_size
    os.truncate(records, size - cut)
    with open_index(tmp_path / "idx") as index:
        kept = 100 - (cut + RECORD_BYTES - 1) // RECORD_BYTES
        assert len(index) == kept
        assert "cut short" in caplog.text
        assert index.add_and_candidates(123, "new", S, 0) == []  # appends after the cut, keys still line up
    with open_index(tmp_path / "idx") as index:
        assert len(index) == kept + 1
        assert [e.key for e in index.entries()][-2:] == [f"u{kept - 1}", "new"]


def test_keys_without_their_record_are_cut(tmp_path: Path) -> None:
    """Key bytes written after the last record (the writer died between the two writes) are removed."""
    with open_index(tmp_path / "idx") as index:
        index.add(1, "one", S)
    with open(tmp_path / "idx" / "urls.1", "ab") as f:
        f.write(b"half-written-url")
    with open_index(tmp_path / "idx") as index:
        index.add(2, "two", S)
        assert [e.key for e in index.entries()] == ["one", "two"]


def test_garbage_tail_is_torn_but_damage_in_the_middle_is_an_error(tmp_path: Path) -> None:
    """Zeros appended at the end are a torn tail; a flipped byte before intact records is corruption."""
    with open_index(tmp_path / "idx") as index:
        index.add_many(random_fps(50), [f"u{i}" for i in range(50)], [S] * 50)
    records = tmp_path / "idx" / "records.1"
    with open(records, "ab") as f:
        f.write(bytes(3 * RECORD_BYTES))
    with open_index(tmp_path / "idx") as index:
        assert len(index) == 50
    data = bytearray(records.read_bytes())
    data[HEADER_SIZE + 10 * RECORD_BYTES + 3] ^= 0xFF  # record 10's fingerprint
    records.write_bytes(bytes(data))
    with pytest.raises(CorruptIndexError, match="record 10 is damaged but later records are intact"):
        open_index(tmp_path / "idx")


def test_foreign_and_damaged_files_are_clear_errors(tmp_path: Path) -> None:
    """A directory that is not an index, a file from another index, a bad CURRENT: clear errors."""
    with open_index(tmp_path / "a") as index:
        index.add(1, "a", S)
    with open_index(tmp_path / "b") as index:
        index.add(2, "b", S)
    (tmp_path / "b" / "urls.1").write_bytes((tmp_path / "a" / "urls.1").read_bytes())
    with pytest.raises(CorruptIndexError, match="does not belong"):
        open_index(tmp_path / "b")
    (tmp_path / "a" / "records.1").write_bytes(b"PK\x03\x04 a zip file, say" + bytes(5000))
    with pytest.raises(CorruptIndexError, match="not a simhash-filter index file"):
        open_index(tmp_path / "a")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "CURRENT").write_text("banana")
    with pytest.raises(CorruptIndexError, match="CURRENT is damaged"):
        open_index(tmp_path / "c")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "CURRENT").write_text("3\n")
    with pytest.raises(CorruptIndexError, match="missing"):
        open_index(tmp_path / "d")


def test_another_model_is_refused_with_the_way_out(tmp_path: Path) -> None:
    """An index built with another fingerprint model cannot be opened with this one."""
    open_index(tmp_path / "idx").close()
    with pytest.raises(MetadataMismatchError, match=r"model: stored 'm1' != requested 'm2'.*new index location"):
        FileBackend(tmp_path / "idx", k=3, design=DESIGN, metadata={**META, "model": "m2"})
    with FileBackend(tmp_path / "idx", k=3, design=DESIGN, readonly=True) as index:  # None accepts any
        assert index.metadata == META


def test_one_writer_at_a_time_readers_take_snapshots(tmp_path: Path) -> None:
    """A second writer is refused while the first is open; a read-only open sees what was written."""
    writer = open_index(tmp_path / "idx")
    writer.add(5, "five", S)
    with pytest.raises(IndexLockedError, match=f"another process \\(pid {os.getpid()}\\)"):
        open_index(tmp_path / "idx")
    with open_index(tmp_path / "idx", readonly=True) as reader:
        assert reader.query(5, 0) == [Match("five", 0, 5)]
        with pytest.raises(PermissionError, match="read-only"):
            reader.add(6, "six", S)
    writer.close()
    open_index(tmp_path / "idx").close()  # the lock is released on close
    with pytest.raises(FileNotFoundError):
        open_index(tmp_path / "nowhere", readonly=True)


def test_expired_fingerprints_are_ignored_then_compacted_away(tmp_path: Path) -> None:
    """With max_age, a fingerprint older than it is no longer found: its page is kept again."""
    clock = Clock()
    with open_index(tmp_path / "idx", max_age="1d", clock=clock) as index:
        index.add(0xF0F0, "old", S)
        clock.now += 86400 - 10
        index.add(0x0F0F, "recent", S)
        assert index.query(0xF0F0, 0) == [Match("old", 0, 0xF0F0)]
        clock.now += 20
        assert index.query(0xF0F0, 0) == []
        assert len(index) == 1
        assert index.add_and_candidates(0xF0F0, "old-again", S, 3) == []
        assert index.info()["expired"] == 1
        index.compact()
        assert index.info()["stored"] == 2
        assert [e.key for e in index.entries()] == ["recent", "old-again"]
    with open_index(tmp_path / "idx") as index:  # no max_age: nothing expires
        assert index.query(0xF0F0, 0) == [Match("old-again", 0, 0xF0F0)]


def test_delete_is_durable_and_compaction_reclaims_space(tmp_path: Path) -> None:
    """Deleted keys stay deleted after a reopen; compaction rewrites the files without them."""
    fps = random_fps(3000)
    with open_index(tmp_path / "idx") as index:
        index.add_many(fps, [f"u{i % 1000}" for i in range(3000)], [S] * 3000)
        assert index.delete(["u1", "u2", "nope"]) == 6
    with open_index(tmp_path / "idx") as index:
        assert len(index) == 2994
        assert index.query(int(fps[1001]), 0) == []
        before = index.info()["disk_bytes"]
        index.compact()
        info = index.info()
        assert info["generation"] == 2 and info["stored"] == 2994 and info["disk_bytes"] < before
        assert index.query(int(fps[3]), 0) == [Match("u3", 0, int(fps[3]))]
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == [
        "CURRENT", "LOCK", "deleted.2", "records.2", "urls.2",
    ]  # fmt: skip
    with open_index(tmp_path / "idx") as index:  # the model is kept: reopening with it works
        assert len(index) == 2994 and index.query(int(fps[2999]), 0) == [Match("u999", 0, int(fps[2999]))]
    with FileBackend(tmp_path / "idx", k=3, design=DESIGN) as index:  # compacted without saying the model
        index.compact()
    with FileBackend(tmp_path / "idx", k=3, design=DESIGN, readonly=True) as index:
        assert index.metadata == META


def test_leftovers_of_a_dead_compaction_are_removed(tmp_path: Path) -> None:
    """Files of a generation that never became current (the compaction died) are removed on open."""
    with open_index(tmp_path / "idx") as index:
        index.add(1, "one", S)
    (tmp_path / "idx" / "records.2").write_bytes(b"partial")
    with open_index(tmp_path / "idx") as index:
        assert len(index) == 1
    assert not (tmp_path / "idx" / "records.2").exists()


def test_uri_options(tmp_path: Path) -> None:
    """file:// URIs and plain paths open the same index; bad options are clear errors."""
    backend = open_backend(f"file://{tmp_path}/idx?sync=always&max_age=12h", k=3, design=DESIGN, metadata=META)
    assert isinstance(backend, FileBackend) and backend.path == tmp_path / "idx"
    assert backend.info()["max_age_seconds"] == 43200
    backend.add(9, "nine", S)
    backend.close()
    with open_backend(str(tmp_path / "idx"), k=3, design=DESIGN) as again:
        assert again.query(9, 0) == [Match("nine", 0, 9)]
    for uri, message in [
        (f"file://{tmp_path}/x?colour=red", "unknown file backend option"),
        (f"file://{tmp_path}/x?sync=sometimes", "sync must be"),
        (f"file://{tmp_path}/x?max_age=soon", "an age must be"),
        (f"file://{tmp_path}/x?readonly=maybe", "readonly must be"),
        ("file://", "needs a directory"),
    ]:
        with pytest.raises(ValueError, match=message):
            open_backend(uri, k=3, design=DESIGN)


def test_parse_age() -> None:
    """Ages are seconds or a number with a unit."""
    assert [parse_age(v) for v in (0, 90, "90", "90s", "15m", "12h", "30d", "2w", "1.5h")] == [
        0, 90, 90, 90, 900, 43200, 2592000, 1209600, 5400,
    ]  # fmt: skip
    for bad in ("-1", "1y", "", -5):
        with pytest.raises(ValueError):
            parse_age(bad)


def test_a_failed_write_leaves_nothing_half_added(tmp_path: Path) -> None:
    """If writing fails (disk full, say), the add raises and neither file keeps a partial entry."""
    index = open_index(tmp_path / "idx")
    index.add(1, "one", S)
    os.close(index._store.fds["records"])
    index._store.fds["records"] = os.open(os.devnull, os.O_RDONLY)  # writes now fail with EBADF
    with pytest.raises(OSError):
        index.add(2, "two", S)
    assert len(index) == 1
    index.close()
    assert (tmp_path / "idx" / "urls.1").stat().st_size == HEADER_SIZE + 3
    with open_index(tmp_path / "idx") as again:
        assert [e.key for e in again.entries()] == ["one"]


WRITER = """
import sys
from simhash_filter.index.backends.file import FileBackend
from simhash_filter.index.tables import TableDesign
index = FileBackend(sys.argv[1], k=3, design=TableDesign.parse("4x16/k3"), metadata={"model": "m1", "sketch_bytes": 8})
S = bytes(8)
x = 0x9E3779B97F4A7C15
i = 0
while True:
    i += 1
    x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
    if i % 50 == 0:
        index.add_many([x, x ^ 0xFFFF0000], [f"bulk-{i}-a", f"bulk-{i}-b"], [S, S])
        sys.stdout.write(f"{x:x} bulk-{i}-a\\n{x ^ 0xFFFF0000:x} bulk-{i}-b\\n")
    elif not index.add_and_candidates(x, f"page-{i}", S, 3):
        sys.stdout.write(f"{x:x} page-{i}\\n")
    sys.stdout.flush()
"""


@pytest.mark.slow
def test_kill_9_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """A process adding at full speed is killed with SIGKILL; every add it reported is there after reopen."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path / "idx")], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stdout is not None
    acknowledged = []
    deadline = time.monotonic() + 20
    while len(acknowledged) < 3000 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acknowledged.append(line.split())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert len(acknowledged) >= 3000, "the writer did not get going"
    with open_index(tmp_path / "idx") as index:
        stored = {(f"{e.fingerprint:x}", e.key) for e in index.entries()}
        assert len(stored) == len(index) >= len(acknowledged)
        assert not [pair for pair in map(tuple, acknowledged) if pair not in stored]


# --- two-stage detection: every page's sketch is stored in its record ------------------------------------

SKETCH_META = {"model": "m1", "sketch_bytes": 64}
SKETCH_RECORD = record_dtype(64)


def open_sketch_index(path: Path, **options: object) -> FileBackend:
    return FileBackend(path, k=3, design=DESIGN, metadata=SKETCH_META, **options)  # type: ignore[arg-type]


def sketch_of(key: str) -> bytes:
    return hashlib.sha512(key.encode()).digest()


def set_header_format(path: Path, fmt: int) -> None:
    """Rewrite the ``format`` in the header of an index file."""
    data = path.read_bytes()
    magic_end = data.index(b"\n") + 1
    fields = json.loads(data[magic_end:HEADER_SIZE])
    fields["format"] = fmt
    head = (data[:magic_end] + json.dumps(fields, sort_keys=True).encode() + b"\n").ljust(HEADER_SIZE, b" ")
    path.write_bytes(head + data[HEADER_SIZE:])


def test_record_check_with_sketch_scalar_matches_vectorised() -> None:
    """With sketches (of any size), the per-add check and the numpy check agree, and the sketch counts."""
    for size in (64, 13, 1):
        records = np.zeros(3, dtype=record_dtype(size))
        records["fp"] = [0, 2**64 - 1, 0x0123456789ABCDEF]
        records["offset"] = [HEADER_SIZE, 2**40, 99]
        records["added"] = [0, 2**32 - 1, 1_700_000_000]
        records["length_refused"] = [0, 7, 2**20]
        records["sketch"] = np.random.default_rng(size).integers(0, 256, size=(3, size), dtype=np.uint8)
        salt = 0x5A17
        expected = [
            record_check(
                int(r["fp"]), int(r["offset"]), int(r["added"]), int(r["length_refused"]), salt, r["sketch"].tobytes()
            )
            for r in records
        ]
        assert record_checks(records, salt).tolist() == expected
        flipped = records.copy()
        flipped["sketch"][:, -1] ^= 1
        assert (record_checks(flipped, salt) != record_checks(records, salt)).all()
    assert record_dtype(0) == RECORD and SKETCH_RECORD.itemsize == RECORD.itemsize + 64


def test_sketches_survive_reopen_and_compaction(tmp_path: Path) -> None:
    """Sketches (however added) are read back after a reopen and a compaction, also read-only without metadata."""
    fps = random_fps(3000)
    keys = [f"u{i}" for i in range(len(fps))]
    with open_sketch_index(tmp_path / "idx", buffer_size=64) as index:
        assert index.add_and_candidates(0xABCDEF, "first", sketch_of("first"), 3) == []
        index.add_many(fps, keys, [sketch_of(key) for key in keys])
        index.add(0xABCDEF ^ 0b101, "twin", sketch_of("twin"))
    expected = [("first", sketch_of("first")), *((key, sketch_of(key)) for key in keys), ("twin", sketch_of("twin"))]
    with open_sketch_index(tmp_path / "idx") as index:
        assert index.sketch_bytes == 64 and len(index) == 3002
        assert [(e.key, e.sketch) for e in index.entries()] == expected
        assert index.add_and_candidates(0xABCDEF ^ 1, "third", sketch_of("third"), 3) == [
            Candidate("first", 1, 0xABCDEF, sketch_of("first")),
            Candidate("twin", 1, 0xABCDEF ^ 0b101, sketch_of("twin")),
        ]
        assert index.candidates(int(fps[1234]), 0) == [Candidate("u1234", 0, int(fps[1234]), sketch_of("u1234"))]
        assert index.delete(["u0", "u1", "first"]) == 3
        index.compact()
        assert index.info()["generation"] == 2
        assert [(e.key, e.sketch) for e in index.entries()] == [*expected[3:], ("third", sketch_of("third"))]
        assert index.candidates(int(fps[2999]), 0) == [Candidate("u2999", 0, int(fps[2999]), sketch_of("u2999"))]
    with FileBackend(tmp_path / "idx", k=3, design=DESIGN, readonly=True) as index:  # the stored metadata says
        assert index.sketch_bytes == 64 and index.metadata == SKETCH_META
        assert [(e.key, e.sketch) for e in index.entries()][-2:] == [("twin", sketch_of("twin")),
                                                                     ("third", sketch_of("third"))]  # fmt: skip
        assert index.candidates(0xABCDEF, 0) == []
        assert index.candidates(0xABCDEF ^ 1, 0) == [Candidate("third", 0, 0xABCDEF ^ 1, sketch_of("third"))]
    with pytest.raises(MetadataMismatchError, match="sketch_bytes: stored 64 != requested 8"):
        open_index(tmp_path / "idx")  # an index with sketches of another size is refused


@pytest.mark.parametrize("damage", ["cut", "zeroed"])
def test_torn_last_record_with_its_sketch_is_dropped(tmp_path: Path, damage: str) -> None:
    """A last record cut short in its sketch, or never written (zeros), is dropped (a torn tail) on open."""
    keys = [f"u{i}" for i in range(50)]
    with open_sketch_index(tmp_path / "idx") as index:
        index.add_many(random_fps(50), keys, [sketch_of(key) for key in keys])
    records = tmp_path / "idx" / "records.1"
    data = bytearray(records.read_bytes())
    assert len(data) == HEADER_SIZE + 50 * SKETCH_RECORD.itemsize
    if damage == "cut":
        records.write_bytes(bytes(data[:-20]))  # 20 bytes of the last sketch missing
    else:
        data[-SKETCH_RECORD.itemsize :] = bytes(SKETCH_RECORD.itemsize)
        records.write_bytes(bytes(data))
    with open_sketch_index(tmp_path / "idx") as index:
        assert [(e.key, e.sketch) for e in index.entries()] == [(key, sketch_of(key)) for key in keys[:49]]
        assert index.add_and_candidates(123, "new", sketch_of("new"), 0) == []  # appends after the cut
    with open_sketch_index(tmp_path / "idx") as index:
        assert [(e.key, e.sketch) for e in index.entries()][-2:] == [("u48", sketch_of("u48")),
                                                                     ("new", sketch_of("new"))]  # fmt: skip


def test_a_changed_sketch_byte_in_the_middle_is_an_error(tmp_path: Path) -> None:
    """A flipped bit in a sketch followed by intact records is a CorruptIndexError, never a wrong sketch."""
    keys = [f"u{i}" for i in range(50)]
    with open_sketch_index(tmp_path / "idx") as index:
        index.add_many(random_fps(50), keys, [sketch_of(key) for key in keys])
    records = tmp_path / "idx" / "records.1"
    data = bytearray(records.read_bytes())
    data[HEADER_SIZE + 10 * SKETCH_RECORD.itemsize + RECORD.itemsize + 40] ^= 0x01  # byte 40 of sketch 10
    records.write_bytes(bytes(data))
    for readonly in (False, True):
        with pytest.raises(CorruptIndexError, match="record 10 is damaged but later records are intact"):
            open_sketch_index(tmp_path / "idx", readonly=readonly)


def test_an_index_of_another_format_is_refused_with_the_way_out(tmp_path: Path) -> None:
    """An index in an earlier format is refused with one line that says how to refill it, a newer one with the
    way out, and both are left unchanged."""
    with open_index(tmp_path / "old") as index:
        index.add(1, "one", S)
    for kind in ("records", "urls", "deleted"):
        set_header_format(tmp_path / "old" / f"{kind}.1", 3)
    before = {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir() if p.name != "LOCK"}
    for readonly in (False, True):
        with pytest.raises(MetadataMismatchError, match=r"written by an earlier version.*rm -r .*refill") as info:
            open_index(tmp_path / "old", readonly=readonly)
        assert "\n" not in str(info.value)
    assert {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir() if p.name != "LOCK"} == before
    with open_sketch_index(tmp_path / "new") as index:
        index.add(1, "one", sketch_of("one"))
    set_header_format(tmp_path / "new" / "records.1", FORMAT + 2)
    with pytest.raises(MetadataMismatchError, match=f"index format {FORMAT + 2}, written by a newer.*upgrade"):
        open_sketch_index(tmp_path / "new")


SKETCH_WRITER = """
import hashlib
import sys
import numpy as np
from simhash_filter.index.backends.file import FileBackend
from simhash_filter.index.tables import TableDesign
index = FileBackend(
    sys.argv[1], k=3, design=TableDesign.parse("4x16/k3"), metadata={"model": "m1", "sketch_bytes": 64}
)
def sketch(key):
    return hashlib.sha512(key.encode()).digest()
x = 0x9E3779B97F4A7C15
i = 0
while True:
    i += 1
    x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
    if i % 50 == 0:
        keys = [f"bulk-{i}-a", f"bulk-{i}-b"]
        index.add_many(np.array([x, x ^ 0xFFFF0000], dtype=np.uint64), keys, [sketch(key) for key in keys])
        sys.stdout.write(f"{x:x} bulk-{i}-a\\n{x ^ 0xFFFF0000:x} bulk-{i}-b\\n")
    else:
        index.add_and_candidates(x, f"page-{i}", sketch(f"page-{i}"), 3)
        sys.stdout.write(f"{x:x} page-{i}\\n")
    sys.stdout.flush()
"""


@pytest.mark.slow
def test_kill_9_loses_no_acknowledged_page_nor_its_sketch(tmp_path: Path) -> None:
    """A writer adding pages with sketches is SIGKILLed; every page it reported is there, with its sketch."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SKETCH_WRITER, str(tmp_path / "idx")], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stdout is not None
    acknowledged = []
    deadline = time.monotonic() + 20
    while len(acknowledged) < 3000 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acknowledged.append(tuple(line.split()))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert len(acknowledged) >= 3000, "the writer did not get going"
    with open_sketch_index(tmp_path / "idx") as index:
        stored = {(f"{e.fingerprint:x}", e.key): e.sketch for e in index.entries()}
        assert len(stored) == len(index) >= len(acknowledged)
        assert not [pair for pair in acknowledged if stored.get(pair) != sketch_of(pair[1])]
        fp, key = acknowledged[-1]
        assert Candidate(key, 0, int(fp, 16), sketch_of(key)) in index.candidates(int(fp, 16), 0)


def test_notes_survive_a_reopen_and_a_damaged_notes_file_counts_as_none(tmp_path: Path) -> None:
    """The counters of notes.json are there after a reopen (a recrawl learns from the last crawl); a damaged
    file reads as no counters and is replaced by the next write; a read-only index refuses to change them."""
    with open_index(tmp_path / "idx") as index:
        index.add_notes({"rule|a.test|param:sid|+": 3})
    with open_index(tmp_path / "idx") as index:
        assert index.notes() == {"rule|a.test|param:sid|+": 3}
        (tmp_path / "idx" / "notes.json").write_bytes(b"{not json")
        assert index.notes() == {}
        assert index.add_notes({"mirror|a.test|b.test|+": 1}) == {"mirror|a.test|b.test|+": 1}
    with open_index(tmp_path / "idx", readonly=True) as index:
        assert index.notes() == {"mirror|a.test|b.test|+": 1}
        with pytest.raises(ValueError, match="read-only"):
            index.add_notes({"x": 1})


# --- refusals (index format 4): the tables that refused a row stay out of it after a reopen ---------------

TWO_STAGE = TableDesign.parse("13+13+13+13+12/k4")
BOUND = CheckBound(per_table=5, duplicates=3, min_similarity=0.75)


def read_header_fields(path: Path) -> dict[str, object]:
    """The JSON fields of an index file's header."""
    head = path.read_bytes()[:HEADER_SIZE]
    return json.loads(head[head.index(b"\n") + 1 :])


def open_two_stage(path: Path, design: TableDesign = TWO_STAGE, **options: object) -> FileBackend:
    return FileBackend(path, k=10, design=design, metadata=SKETCH_META, **options)  # type: ignore[arg-type]


def flip_bits(value: int, bits: list[int]) -> int:
    return value ^ sum(1 << b for b in bits)


def near_sketch(sketch: bytes, bits: int) -> bytes:
    """*sketch* with its first *bits* bits flipped."""
    return (int.from_bytes(sketch, "little") ^ ((1 << bits) - 1)).to_bytes(len(sketch), "little")


def flood(seed: int, n: int) -> list[tuple[int, str, bytes]]:
    """*n* pages of three floods (near fingerprints, sketches within a few bits) among unrelated pages."""
    rng = random.Random(seed)
    base = [rng.getrandbits(64) for _ in range(6)]
    pages = []
    for i in range(n):
        b = i % len(base)
        fp = flip_bits(base[b], rng.sample(range(64), rng.randint(0, 12)))
        sketch = near_sketch(sketch_of(f"base{b}"), rng.randint(0, 40)) if b < 3 else sketch_of(f"page{seed}-{i}")
        pages.append((fp, f"p{seed}-{i % (n - 20)}", sketch))  # some keys come again
    return pages


def queries(seed: int) -> list[int]:
    rng = random.Random(seed)
    base = [rng.getrandbits(64) for _ in range(6)]
    return [flip_bits(base[i % 6], rng.sample(range(64), rng.randint(0, 10))) for i in range(30)]


def test_refusals_survive_reopen_and_compaction(tmp_path: Path) -> None:
    """Rows refused by some tables stay out of them after a reopen and a compaction: candidates and decisions
    are the brute-force reference's before and after, and the index is in format 4."""
    reference = BoundedReference(TWO_STAGE, 10, BOUND)
    with open_two_stage(tmp_path / "idx", buffer_size=16) as index:
        for fp, key, sketch in flood(1, 300):
            assert index.add_and_candidates(fp, key, sketch, 10, BOUND) == reference.add(fp, key, sketch)
        assert index._store.refusals[: index._store.stored].any()  # the floods' blocks refused some pages
        before = [index.candidates(q, 10, BOUND) for q in queries(1)]
    assert before == [reference.candidates(q) for q in queries(1)]
    for options in ({}, {"buffer_size": 7, "merge_factor": 2}, {"readonly": True}):
        with open_two_stage(tmp_path / "idx", **options) as index:
            assert len(index) == len(reference)
            assert [index.candidates(q, 10, BOUND) for q in queries(1)] == before
    with open_two_stage(tmp_path / "idx") as index:
        index.compact()
        assert index.info()["generation"] == 2
        assert [index.candidates(q, 10, BOUND) for q in queries(1)] == before
        for fp, key, sketch in flood(2, 100):  # decisions after a reopen and a compaction are the reference's
            assert index.add_and_candidates(fp, key, sketch, 10, BOUND) == reference.add(fp, key, sketch)
    with open_two_stage(tmp_path / "idx", buffer_size=5) as index:
        assert [index.candidates(q, 10, BOUND) for q in queries(2)] == [reference.candidates(q) for q in queries(2)]
    assert json.loads((tmp_path / "idx" / "records.2").read_bytes()[21:HEADER_SIZE])["format"] == FORMAT == 4


def test_a_changed_refusal_byte_is_an_error(tmp_path: Path) -> None:
    """A flipped bit in the refusals of a record (the top byte of its URL length) is a CorruptIndexError, never
    a row in other tables."""
    with open_two_stage(tmp_path / "idx") as index:
        for fp, key, sketch in flood(3, 120):
            index.add_and_candidates(fp, key, sketch, 10, BOUND)
    records = tmp_path / "idx" / "records.1"
    data = bytearray(records.read_bytes())
    field = RECORD.fields["length_refused"][1]
    data[HEADER_SIZE + 10 * SKETCH_RECORD.itemsize + field + LENGTH_BITS // 8] ^= 0x02  # table 1 of record 10
    records.write_bytes(bytes(data))
    for readonly in (False, True):
        with pytest.raises(CorruptIndexError, match="record 10 is damaged but later records are intact"):
            open_two_stage(tmp_path / "idx", readonly=readonly)


def test_refusals_belong_to_the_design_they_were_made_with(tmp_path: Path) -> None:
    """An index with refusals opened with another table design is read with none (every table holds every row)
    and refused for writing with the way out; without refusals, another design opens for writing."""
    with open_two_stage(tmp_path / "idx") as index:
        for fp, key, sketch in flood(6, 200):
            index.add_and_candidates(fp, key, sketch, 10, BOUND)
        stored = len(index)
    other = TableDesign.parse("4x16/k3")
    with pytest.raises(MetadataMismatchError, match=r"design 13\+13\+13\+13\+12/k4.*open it with the design"):
        open_two_stage(tmp_path / "idx", other)
    with open_two_stage(tmp_path / "idx", other, readonly=True) as index:
        assert len(index) == stored and not index._store.refusals.any()
        fp = flood(6, 200)[0][0]
        assert index.candidates(fp, 10, BOUND)[0].distance == 0
    with open_two_stage(tmp_path / "plain") as index:
        index.add(1, "one", sketch_of("one"))
    with open_two_stage(tmp_path / "plain", other) as index:
        assert index.candidates(1, 10) == [Candidate("one", 0, 1, sketch_of("one"))]


@pytest.mark.flood
@pytest.mark.slow
def test_a_flood_of_near_identical_pages_stays_small_and_fast(tmp_path: Path) -> None:
    """20,000 near-identical pages through a two-stage index on disk take seconds, store few rows (most pages
    no table takes), and no check reads more than 5 * per_table candidates (unbounded, the checks grow with the
    pages stored: 20,000 took ten minutes and more)."""
    rng = random.Random(8)
    centre = rng.getrandbits(64)
    sketch = sketch_of("the page")
    started = time.monotonic()
    with NearDuplicateIndex(
        10,
        design=TWO_STAGE,
        backend=f"file://{tmp_path}/idx",
        metadata={"model": "m", "sketch_bytes": 64},
        min_similarity=0.75,
    ) as index:
        for i in range(20_000):
            fp = flip_bits(centre, rng.sample(range(64), rng.randint(0, 4)))
            index.check_and_add(fp, f"https://trap.example/{i}", near_sketch(sketch, rng.randint(0, 6)))
        assert index.candidates_max <= 5 * index.bound.per_table
        stored = len(index)
    elapsed = time.monotonic() - started
    size = sum(p.stat().st_size for p in (tmp_path / "idx").iterdir())
    assert stored < 2500 and size < 3 * HEADER_SIZE + stored * (SKETCH_RECORD.itemsize + 40)
    assert elapsed < 120, f"20,000 pages took {elapsed:.0f} s"


def test_a_two_stage_design_of_more_than_16_tables_is_refused_in_one_line(tmp_path: Path) -> None:
    """The records keep two bytes of refusals at most: a two-stage index on disk with 56 tables is a ValueError
    that names the design and the ways out, and nothing is written."""
    design = TableDesign.parse("8x8/k5")
    with pytest.raises(ValueError, match=r"at most 16 tables.*8x8/k5 has 56: choose one with fewer tables"):
        open_two_stage(tmp_path / "wide", design)
    assert not (tmp_path / "wide").exists()


def test_an_index_of_15_tables_is_written_wide_and_keeps_its_refusals(tmp_path: Path) -> None:
    """A design of 9 to 16 tables is written in format 5 (16 bits of key length, 16 tables' refusals): a flood's
    refusals of tables past the eighth survive a reopen and a compaction; keys past 65,535 bytes are refused."""
    design = TableDesign.parse("11+11+11+11+10+10/k4")
    rng = random.Random(8)
    centre, sketch = rng.getrandbits(64), rng.randbytes(64)
    with open_two_stage(tmp_path / "idx", design) as backend:
        index = NearDuplicateIndex(10, backend=backend, min_similarity=0.75)
        for i in range(60):
            index.check_and_add(flip_bits(centre, rng.sample(range(64), rng.randint(0, 2))), f"u{i}", sketch)
        refused = backend._store.refusals[: len(backend)].copy()
        stored = len(backend)
        with pytest.raises(ValueError, match="a key longer than 65535 bytes"):
            backend.add(1, "x" * 70_000, sketch)
    assert stored < 60 and (refused >> 8).any(), "the flood's blocks refused pages in tables 8 to 14"
    assert read_header_fields(tmp_path / "idx" / "records.1")["format"] == 5
    for compact in (False, True):
        with open_two_stage(tmp_path / "idx", design) as again:
            assert len(again) == stored and (again._store.refusals[:stored] == refused).all()
            assert [e.key for e in again.entries()][:2] == ["u0", "u1"]
            if compact:
                again.compact()


def test_a_format_4_index_with_pages_takes_no_refusal_of_a_ninth_table(tmp_path: Path) -> None:
    """An index of 5 tables with pages opens with 15 (its tables are built on opening), but the first page a table
    past the eighth refuses is an error that names the way out (index rebuild), and nothing of it is written; an
    empty one takes the design, written wide (format 5)."""
    wide = TableDesign.parse("11+11+11+11+10+10/k4")
    with open_two_stage(tmp_path / "idx") as backend:
        backend.add(5, "https://a.example/", bytes(64))
    rng = random.Random(3)
    sketch = rng.randbytes(64)
    with open_two_stage(tmp_path / "idx", wide) as backend:
        index = NearDuplicateIndex(10, backend=backend, min_similarity=0.75)
        with pytest.raises(MetadataMismatchError, match=r"refusals of 8 tables.*index rebuild INDEX"):
            for i in range(10):  # a flood: its blocks fill, then refuse
                index.check_and_add(1 << 40 | i, f"https://trap.example/{i}", sketch)
        stored = len(backend)
    with open_two_stage(tmp_path / "idx") as again:
        assert len(again) == stored
    with open_two_stage(tmp_path / "empty"):
        pass
    with open_two_stage(tmp_path / "empty", wide) as backend:
        backend.add(5, "https://a.example/", bytes(64))
    assert read_header_fields(tmp_path / "empty" / "records.1")["format"] == 5
