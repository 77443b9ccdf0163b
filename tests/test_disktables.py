"""Tables on disk (``file://...?tables=disk``): run files decide exactly as tables in memory, across reopening,
merging, compaction and damage; opening reads the run files, not the records below them."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simhash_filter.index.backends.base import MetadataMismatchError
from simhash_filter.index.backends.file import CorruptIndexError, FileBackend
from simhash_filter.index.backends.file.records import HEADER_SIZE, header, record_dtype
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.bound import CheckBound
from simhash_filter.index.tables import Match, TableDesign

DESIGN = TableDesign.parse("11+11+11+11+10+10/k4")
SKETCH = 64
META = {"model": "disk-tables", "sketch_bytes": SKETCH}
K = 10
BOUND = CheckBound(per_table=5, duplicates=3, min_similarity=0.75)


def pages(n: int, seed: int = 1) -> list[tuple[int, str, bytes]]:
    """Clusters of near-duplicates (some floods: near sketches), unrelated pages, some pages seen again."""
    rng = random.Random(seed)
    bases = [(rng.getrandbits(64), rng.randbytes(SKETCH)) for _ in range(40)]
    out = []
    for i in range(n):
        if rng.random() < 0.5:
            fp, sketch = bases[rng.randrange(len(bases))]
            fp ^= sum(1 << b for b in rng.sample(range(64), rng.randint(0, 8)))
            value = int.from_bytes(sketch, "little") ^ ((1 << rng.randint(0, 60)) - 1)
            sketch = value.to_bytes(SKETCH, "little")
        else:
            fp, sketch = rng.getrandbits(64), rng.randbytes(SKETCH)
        out.append((fp, f"https://example.test/{i % (n - 50)}", sketch))
    return out


def open_disk(path: Path, **options: object) -> FileBackend:
    settings = {"tables": "disk", "spill_rows": 100, "buffer_size": 16, "merge_factor": 2, **options}
    return FileBackend(path, k=K, design=DESIGN, metadata=META, **settings)  # type: ignore[arg-type]


def fill(backend: FileBackend, reference: MemoryBackend, stream: list[tuple[int, str, bytes]]) -> None:
    for i, (fp, key, sketch) in enumerate(stream):
        got = backend.add_and_candidates(fp, key, sketch, K, BOUND)
        assert got == reference.add_and_candidates(fp, key, sketch, K, BOUND), i


def same_answers(backend: FileBackend, reference: MemoryBackend, seed: int = 9) -> None:
    for fp, _, _ in pages(200, seed):
        assert backend.candidates(fp, K, BOUND) == reference.candidates(fp, K, BOUND)


def runs(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.startswith("tables."))


def test_tables_on_disk_decide_as_tables_in_memory_across_reopening_and_merges(tmp_path: Path) -> None:
    """Every check's candidates and storage equal the memory backend's, while rows are written to run files and
    merged, and after reopening (``auto`` finds the run files); run files stay few (the merge rule)."""
    reference = MemoryBackend(k=K, design=DESIGN, metadata=META)
    stream = pages(3000)
    backend = open_disk(tmp_path)
    fill(backend, reference, stream[:1700])
    assert backend.info()["rows_in_run_files"] >= 1400
    backend.close()
    backend = FileBackend(tmp_path, k=K, design=DESIGN, metadata=META, spill_rows=100, buffer_size=16, merge_factor=2)
    assert backend.disk.tables_on_disk
    fill(backend, reference, stream[1700:])
    same_answers(backend, reference)
    backend.disk.wait_for_merges()
    info = backend.info()
    assert info["tables"] == "disk" and info["entries"] == len(reference)
    assert 1 <= info["run_files"] == len(runs(tmp_path)) <= 6  # merge factor 2: about log2(30)
    assert [e[:2] for e in backend.entries()] == [e[:2] for e in reference.entries()]
    backend.close()


def test_memory_holds_the_columns_and_directories_of_rows_in_run_files(tmp_path: Path) -> None:
    """With tables on disk memory holds 14 bytes a row (and spare capacity) and the directories, not the 258 bytes
    of fifteen tables in memory; so does an open of the index (no sketch reserved for the rows in run files)."""
    rng = np.random.default_rng(5)
    n = 40_000
    fps = rng.integers(0, 2**64, n, dtype=np.uint64)
    sketches = [rng.bytes(SKETCH) for _ in range(n)]
    keys = [f"u{i}" for i in range(n)]
    with open_disk(tmp_path / "disk", spill_rows=10_000, merge_factor=8) as disk:
        for lo in range(0, n, 5000):
            disk.add_many(fps[lo : lo + 5000], keys[lo : lo + 5000], sketches[lo : lo + 5000])
        assert disk.info()["rows_in_run_files"] == n
        per_row = disk.nbytes / n
    with open_disk(tmp_path / "disk") as reopened:  # nothing reserved for the sketches of rows in run files
        assert reopened.nbytes / n < 20
    with FileBackend(tmp_path / "memory", k=K, design=DESIGN, metadata=META, tables="memory") as memory:
        memory.add_many(fps, keys, sketches)
        assert memory.nbytes / n > 200
    assert per_row < 24


def test_opening_reads_the_run_files_not_the_records_below_them(tmp_path: Path) -> None:
    """A damaged record of a row in a run file does not stop the index opening; a check that reads its sketch
    raises CorruptIndexError naming the records file (never a wrong answer)."""
    stream = pages(600)
    with open_disk(tmp_path) as backend:
        for fp, key, sketch in stream:
            backend.add_and_candidates(fp, key, sketch, K, BOUND)
        assert backend.info()["rows_in_run_files"] >= 500
    record = record_dtype(SKETCH)
    records = tmp_path / "records.1"
    with records.open("r+b") as f:  # a byte of row 0's sketch
        f.seek(HEADER_SIZE + record.fields["sketch"][1] + 3)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    with open_disk(tmp_path) as backend:
        first = next(fp for fp, key, _ in stream if key.endswith("/0"))
        with pytest.raises(CorruptIndexError, match=r"records\.1: record 0 "):
            backend.candidates(first, K, BOUND)


def test_a_damaged_run_file_is_left_out_and_its_rows_read_from_the_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A run file whose columns fail their CRC is removed with a warning; the same answers come from the records."""
    reference = MemoryBackend(k=K, design=DESIGN, metadata=META)
    with open_disk(tmp_path) as backend:
        fill(backend, reference, pages(700))
    damaged = tmp_path / runs(tmp_path)[0]
    with damaged.open("r+b") as f:
        f.seek(HEADER_SIZE + 5)
        f.write(b"\x99")
    with caplog.at_level(logging.WARNING), open_disk(tmp_path) as backend:
        assert "CRC-32" in caplog.text
        assert not damaged.exists()
        same_answers(backend, reference)
        fill(backend, reference, pages(300, seed=2))


def test_what_a_merge_cut_short_left_is_removed(tmp_path: Path) -> None:
    """Run files a merge replaced (it died before removing them) and a run file cut short (``.tmp``) are removed
    on opening; the longest run files are used."""
    reference = MemoryBackend(k=K, design=DESIGN, metadata=META)
    stream = pages(1200)
    old = tmp_path / "old"
    with open_disk(tmp_path / "index") as backend:
        fill(backend, reference, stream[:250])
        backend.disk.wait_for_merges()
        old.mkdir()
        before = runs(tmp_path / "index")
        for name in before:
            shutil.copy(tmp_path / "index" / name, old / name)
        fill(backend, reference, stream[250:])
        backend.disk.wait_for_merges()
        after = runs(tmp_path / "index")
    assert set(before) - set(after)  # merged away
    for name in before:
        shutil.copy(old / name, tmp_path / "index" / name)
    (tmp_path / "index" / "tables.1.0-7.tmp").write_bytes(b"cut short")
    with open_disk(tmp_path / "index") as backend:
        assert runs(tmp_path / "index") == after
        same_answers(backend, reference)


def test_compaction_writes_the_new_generation_s_run_files(tmp_path: Path) -> None:
    """A compaction (after deletions) builds run files for the new generation and removes the old ones."""
    reference = MemoryBackend(k=K, design=DESIGN, metadata=META)
    stream = pages(800)
    with open_disk(tmp_path) as backend:
        fill(backend, reference, stream)
        gone = {key for _, key, _ in stream[:300]}
        assert backend.delete(gone) == reference.delete(gone) > 0
        backend.compact()
        assert runs(tmp_path) and all(name.startswith("tables.2.") for name in runs(tmp_path))
        kept = [e.key for e in backend.entries()]
        assert kept == [e.key for e in reference.entries()] and not gone & set(kept)
    with open_disk(tmp_path) as backend:
        assert [e.key for e in backend.entries()] == kept


def test_a_reader_reads_the_run_files_while_the_writer_goes_on(tmp_path: Path) -> None:
    """A read-only open uses the run files (and writes none); its answers are those of the rows it opened."""
    reference = MemoryBackend(k=K, design=DESIGN, metadata=META)
    with open_disk(tmp_path) as writer:
        fill(writer, reference, pages(500))
        with FileBackend(tmp_path, k=K, design=DESIGN, metadata=META, readonly=True) as reader:
            assert reader.disk.tables_on_disk and reader.info()["rows_in_run_files"] >= 400
            same_answers(reader, reference)


def test_records_cut_below_the_run_files_are_an_error(tmp_path: Path) -> None:
    """A records file that ends before rows its run files hold was cut: CorruptIndexError, not a silent loss."""
    with open_disk(tmp_path) as backend:
        for fp, key, sketch in pages(400):
            backend.add_and_candidates(fp, key, sketch, K, BOUND)
    records = tmp_path / "records.1"
    os.truncate(records, HEADER_SIZE + 150 * record_dtype(SKETCH).itemsize)
    with pytest.raises(CorruptIndexError, match="records file was cut"):
        open_disk(tmp_path)


def test_options_are_checked(tmp_path: Path) -> None:
    """``tables`` is auto, memory or disk; ``spill_rows`` >= 1."""
    with pytest.raises(ValueError, match="tables must be one of auto, memory, disk"):
        FileBackend.from_uri(f"file://{tmp_path}/a?tables=ssd", k=K, design=DESIGN, metadata=META)
    with pytest.raises(ValueError, match="spill_rows must be an int >= 1"):
        FileBackend.from_uri(f"file://{tmp_path}/b?tables=disk&spill_rows=0", k=K, design=DESIGN, metadata=META)
    backend = FileBackend.from_uri(
        f"file://{tmp_path}/d?tables=disk&spill_rows=5", k=K, design=DESIGN, metadata=META
    )
    assert backend.disk.tables_on_disk
    backend.close()


def test_merges_run_in_the_background_and_a_close_stops_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checks go on while run files are merged (the merged file replaces them when written); closing during a
    merge stops it, and the index reopens with the same answers."""
    from simhash_filter.index.backends.file import disktables

    release = threading.Event()
    merging = threading.Event()
    real = disktables.write_run

    def slow_write_run(directory: Path, generation: int, salt: int, design: TableDesign, start: int,
                       *columns: Any, cancelled: Any = lambda: False) -> Path:  # fmt: skip
        if threading.current_thread().name == "simhash-merge":
            merging.set()
            while not release.wait(0.01):
                if cancelled():
                    raise disktables.MergeCancelled
        return real(directory, generation, salt, design, start, *columns, cancelled=cancelled)

    monkeypatch.setattr(disktables, "write_run", slow_write_run)
    reference = MemoryBackend(k=K, design=DESIGN, metadata=META)
    stream = pages(900)
    backend = open_disk(tmp_path)
    fill(backend, reference, stream[:250])
    assert merging.wait(5)
    held = runs(tmp_path)
    fill(backend, reference, stream[250:500])  # while the merge waits
    assert set(held) <= set(runs(tmp_path))
    release.set()
    backend.disk.wait_for_merges()
    assert len(runs(tmp_path)) < len(held) + 3
    release.clear()
    merging.clear()
    fill(backend, reference, stream[500:])
    assert merging.wait(5)
    backend.close()  # stops the merge waiting
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    with open_disk(tmp_path) as reopened:
        same_answers(reopened, reference)


def test_the_choice_of_tables_on_disk_is_kept_with_the_index(tmp_path: Path) -> None:
    """An open with ``tables=disk`` writes ``TABLES``: later opens with ``auto`` (the default) keep the tables on disk
    before any run file exists; one with ``tables=memory`` removes it."""
    FileBackend(tmp_path, k=K, design=DESIGN, metadata=META, tables="disk").close()
    assert (tmp_path / "TABLES").read_text() == "disk\n" and not runs(tmp_path)
    with FileBackend(tmp_path, k=K, design=DESIGN, metadata=META) as backend:
        assert backend.disk.tables_on_disk
    FileBackend(tmp_path, k=K, design=DESIGN, metadata=META, tables="memory").close()
    assert not (tmp_path / "TABLES").exists()
    with FileBackend(tmp_path, k=K, design=DESIGN, metadata=META) as backend:
        assert not backend.disk.tables_on_disk


def test_an_index_with_tables_on_disk_is_written_with_its_own_design_only(tmp_path: Path) -> None:
    """A writer with another table design is refused at open, before anything is read or written (its run files
    are the stored design's); a reader with another design reads the records; the command line opens the index with
    the design its header names."""
    with open_disk(tmp_path) as backend:
        for fp, key, sketch in pages(300):
            backend.add_and_candidates(fp, key, sketch, K, BOUND)
    before = runs(tmp_path)
    other = TableDesign.parse("13+13+13+13+12/k4")
    with pytest.raises(MetadataMismatchError, match="keeps the tables of the design 11\\+11"):
        FileBackend(tmp_path, k=K, design=other, metadata=META)
    with FileBackend(tmp_path, k=K, design=other, metadata=META, readonly=True) as reader:
        assert not reader.info()["run_files"] and len(reader) > 250
    assert runs(tmp_path) == before
    assert FileBackend.design_at(f"file://{tmp_path}") == DESIGN.name
    assert FileBackend.design_at(str(tmp_path / "none")) is None


def test_a_merge_that_fails_leaves_the_run_files_and_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A merge that fails (a full disk) logs a warning and leaves the run files as they were (the answers too); the
    next spill merges again."""
    from simhash_filter.index.backends.file import disktables

    real = disktables.write_run
    failures = [1]

    def full_disk(*args: Any, **kwargs: Any) -> Path:
        if threading.current_thread().name == "simhash-merge" and failures:
            failures.pop()
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(disktables, "write_run", full_disk)
    reference = MemoryBackend(k=K, design=DESIGN, metadata=META)
    with caplog.at_level(logging.WARNING), open_disk(tmp_path) as backend:
        fill(backend, reference, pages(250))
        backend.disk.wait_for_merges()
        assert "merging run files failed ([Errno 28] No space left on device)" in caplog.text
        fill(backend, reference, pages(600, seed=3))
        backend.disk.wait_for_merges()
        assert backend.info()["run_files"] <= 4
        same_answers(backend, reference)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_an_index_opens_with_more_rows_past_its_run_files_than_spill_rows_and_a_chunk(tmp_path: Path) -> None:
    """Opening an index whose rows past its run files are more than ``spill_rows`` and span several chunks of records
    (a spill that failed, a smaller ``spill_rows``) writes them as run files on the way, every row kept (the sketches of
    the rows read after a spill made during the open had no room: a ValueError)."""
    rng = np.random.default_rng(3)
    n = 400_000  # more than a chunk of records (349,525 of 96 bytes)
    fps = rng.integers(0, 2**64, n, dtype=np.uint64)
    sketches = [rng.bytes(SKETCH) for _ in range(n)]
    with open_disk(tmp_path, spill_rows=1 << 30) as backend:
        backend.add_many(fps, [f"u{i}" for i in range(n)], sketches)
        assert backend.info()["run_files"] == 0
    with open_disk(tmp_path, spill_rows=1000) as backend:
        assert len(backend) == n and backend.info()["rows_in_run_files"] == n
        for row in (0, 123_456, n - 1):
            assert backend.candidates(int(fps[row]), 0, BOUND)[0].key == f"u{row}"


# --- damaged entries: each block of a run file's entries is checked when read -------------------------------------

DAMAGE_ROWS = 6000


@pytest.fixture(scope="module")
def damage_source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, list[bytes]]:
    """An index of DAMAGE_ROWS distinct pages, all acknowledged, most of them in run files of a few thousand rows;
    their fingerprints and sketches."""
    path = tmp_path_factory.mktemp("damage") / "index"
    rng = np.random.default_rng(21)
    fps = rng.integers(0, 2**64, DAMAGE_ROWS, dtype=np.uint64)
    sketches = [rng.bytes(SKETCH) for _ in range(DAMAGE_ROWS)]
    with open_disk(path, spill_rows=1000, buffer_size=64) as backend:
        for lo in range(0, DAMAGE_ROWS, 500):
            backend.add_many(fps[lo : lo + 500], [f"u{i}" for i in range(lo, lo + 500)], sketches[lo : lo + 500])
        backend.disk.wait_for_merges()
        assert backend.info()["rows_in_run_files"] == DAMAGE_ROWS
    return path, fps, sketches


def largest_run(path: Path) -> tuple[Path, dict[str, Any]]:
    """The run file of the most rows, and its header's fields."""
    run = max((p for p in path.iterdir() if p.name.startswith("tables.")), key=lambda p: p.stat().st_size)
    head = run.read_bytes()[:HEADER_SIZE]
    return run, json.loads(head[head.index(b"\n") + 1 :])


def entries_of(run: Path, table: list[int]) -> tuple[int, np.ndarray]:
    """Where a table's entries start in the run file, and the entries."""
    at, count = table[3], table[4]
    return at, np.frombuffer(run.read_bytes()[at : at + 4 * count], dtype="<u4")


def damage(run: Path, fields: dict[str, Any], how: str) -> int:
    """Damage the entries of *run* (closed) *how*; the row whose entries the damage is about."""
    data = bytearray(run.read_bytes())
    at, entries = entries_of(run, fields["tables"][0])
    middle = len(entries) // 2
    row = int(entries[middle])
    if how == "high-byte":  # the row's number made 2**30 larger: out of the index's rows
        data[at + 4 * middle + 3] ^= 0x40
    elif how == "low-bit":  # another row of the run: this one is not in its bucket of table 0
        data[at + 4 * middle] ^= 0x01
    elif how == "zero-4k":  # a page of the disk that never reached it
        page = (at + 4 * middle) // 4096 * 4096
        data[page : page + 4096] = bytes(4096)
    else:  # the row's entry in every table changed to another row's: nothing in the run files points at it
        other = int(entries[middle + 1])
        for table in fields["tables"]:
            at, entries = entries_of(run, table)
            (where,) = np.flatnonzero(entries == row)
            data[at + 4 * int(where) : at + 4 * int(where) + 4] = np.array([other], dtype="<u4").tobytes()
    run.write_bytes(bytes(data))
    return row


@pytest.mark.parametrize("how", ["high-byte", "low-bit", "zero-4k", "one-row-everywhere"])
def test_damaged_entries_are_made_again_from_the_records_never_a_miss_nor_a_re_add(
    tmp_path: Path,
    damage_source: tuple[Path, np.ndarray, list[bytes]],
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    """A run file's entries damaged (a high byte, a low bit, a zeroed 4 KiB page, one row's entries in every table):
    the block is found damaged when a check reads it (a warning, once; counted), made again from the rows in memory
    (the records' fingerprints), and every acknowledged page is found again (its own row, never stored twice), by a
    reader and by a writer, which writes the run file again (the next open finds nothing damaged)."""
    source, fps, sketches = damage_source
    shutil.copytree(source, tmp_path / "index")
    path = tmp_path / "index"
    run, fields = largest_run(path)
    assert fields["run_format"] == 2
    row = damage(run, fields, how)
    rows = [row, *range(0, DAMAGE_ROWS, 7)]
    with caplog.at_level(logging.WARNING):
        with open_disk(path, readonly=True) as reader:
            for r in rows:
                assert Match(f"u{r}", 0, int(fps[r])) in reader.query(int(fps[r]), 0)
            assert reader.info()["damaged_blocks"] >= 1
        with open_disk(path) as writer:
            for r in rows:
                found = writer.add_and_candidates(int(fps[r]), f"u{r}", sketches[r], K, BOUND)
                assert [(c.key, c.distance) for c in found] == [(f"u{r}", 0)], r
            assert len(writer) == DAMAGE_ROWS
            assert writer.info()["damaged_blocks"] >= 1
            writer.disk.wait_for_merges()
    told = [m for m in caplog.messages if "failed its check" in m]
    assert len(told) == 2 and run.name in told[0]  # once by the reader, once by the writer
    assert "written again" in told[1] and "Traceback" not in caplog.text
    caplog.clear()
    with open_disk(path) as again:  # written again: whole
        for r in rows:
            assert Match(f"u{r}", 0, int(fps[r])) in again.query(int(fps[r]), 0)
        assert again.info()["damaged_blocks"] == 0 and len(again) == DAMAGE_ROWS
    assert not [m for m in caplog.messages if "failed its check" in m]


def test_a_run_file_of_an_earlier_run_file_format_is_left_out_and_its_rows_read_from_the_records(
    tmp_path: Path, damage_source: tuple[Path, np.ndarray, list[bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    """A run file whose header names another run-file format is derived data of an earlier version: left out with a
    warning, its rows read from the records (the answers unchanged), and replaced by a writer."""
    source, fps, sketches = damage_source
    shutil.copytree(source, tmp_path / "index")
    path = tmp_path / "index"
    run, fields = largest_run(path)
    data = bytearray(run.read_bytes())
    data[:HEADER_SIZE] = header(b"simhash-filter tables\n", {**fields, "run_format": 1})
    run.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        with open_disk(path, readonly=True) as reader:
            assert "run-file format 1, which this version does not read" in caplog.text
            for r in range(0, DAMAGE_ROWS, 11):
                assert Match(f"u{r}", 0, int(fps[r])) in reader.query(int(fps[r]), 0)
        with open_disk(path) as writer:
            writer.disk.wait_for_merges()  # the old file removed; the rows' tables written again in the current format
            assert not run.exists() or json.loads(run.read_bytes()[:HEADER_SIZE].split(b"\n", 1)[1])["run_format"] == 2
            for r in range(0, DAMAGE_ROWS, 11):
                found = writer.add_and_candidates(int(fps[r]), f"u{r}", sketches[r], K, BOUND)
                assert [(c.key, c.distance) for c in found] == [(f"u{r}", 0)], r
            assert len(writer) == DAMAGE_ROWS
    assert "Traceback" not in caplog.text
