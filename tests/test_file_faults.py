"""Faults of the on-disk backend found by probing: damaged key bytes, a damaged last record, readers while a
compaction runs, and a full disk during a compaction or the creation of an index."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from fault_helpers import fill, small_filesystem, tmpfs_problem

from simhash_filter.cli.main import main
from simhash_filter.index.backends.file import CorruptIndexError, FileBackend
from simhash_filter.index.backends.file.directory import IndexDirectory
from simhash_filter.index.backends.file.records import HEADER_SIZE, RECORD, record_dtype
from simhash_filter.index.tables import Match, TableDesign

DESIGN = TableDesign.parse("4x16/k3")
META = {"model": "m1", "sketch_bytes": 8}
S = bytes(8)
SKETCH_META = {"model": "m1", "sketch_bytes": 64}
FPS = np.random.default_rng(11).integers(0, 2**64, size=50, dtype=np.uint64)
KEYS = [f"https://site.example/page/{i}" for i in range(len(FPS))]


def open_index(path: Path, **options: object) -> FileBackend:
    return FileBackend(path, k=3, design=DESIGN, metadata=META, **options)  # type: ignore[arg-type]


def open_sketch_index(path: Path, **options: object) -> FileBackend:
    return FileBackend(path, k=3, design=DESIGN, metadata=SKETCH_META, **options)  # type: ignore[arg-type]


def sketch_of(key: str) -> bytes:
    return hashlib.sha512(key.encode()).digest()


def small_index(path: Path) -> Path:
    with open_index(path) as index:
        index.add_many(FPS, KEYS, [S] * len(KEYS))
    return path


def key_offset(row: int) -> int:
    """The file offset of KEYS[row] in urls.1."""
    return HEADER_SIZE + sum(len(key.encode()) for key in KEYS[:row])


def change_byte(path: Path, offset: int, value: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    data[offset] = data[offset] ^ 0x01 if value is None else value
    path.write_bytes(bytes(data))


# --- 6: the key bytes have a check; a damaged last record is an error, a torn one is dropped ----------------


@pytest.mark.parametrize("value", [None, 0xFF], ids=["valid-utf8", "invalid-utf8"])
def test_a_changed_key_byte_is_detected_never_returned_wrong(tmp_path: Path, value: int | None) -> None:
    """A changed byte in urls.<gen> is a CorruptIndexError naming the file and the key's offset (no wrong URL,
    no UnicodeDecodeError); the other keys are still read."""
    idx = small_index(tmp_path / "idx")
    offset = key_offset(10)
    change_byte(idx / "urls.1", offset + len("https://site.example/page/1"), value)  # its last byte: "0"
    for readonly in (True, False):
        with open_index(idx, readonly=readonly) as index:
            assert index.query(int(FPS[3]), 0) == [Match(KEYS[3], 0, int(FPS[3]))]
            with pytest.raises(CorruptIndexError, match=rf"urls\.1.*offset {offset}\b.*damaged"):
                index.query(int(FPS[10]), 0)
            with pytest.raises(CorruptIndexError, match=rf"urls\.1.*offset {offset}\b.*damaged"):
                list(index.entries())


def test_the_cli_reports_a_changed_key_byte_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`index query` and `index export` of an index with a changed key byte exit 1 with a one-line error naming
    urls.1, never print the wrong URL."""
    idx = small_index(tmp_path / "idx")
    change_byte(idx / "urls.1", key_offset(7) + len("https://"), ord("t"))  # "site" -> "tite"
    assert main(["index", "query", str(idx), f"{int(FPS[7]):016x}"]) == 1
    out, err = capsys.readouterr()
    assert "tite" not in out and "urls.1" in err and "damaged" in err and len(err.strip().splitlines()) == 1
    assert main(["index", "export", str(idx)]) == 1
    out, err = capsys.readouterr()
    assert "tite" not in out and "urls.1" in err and "damaged" in err and len(err.strip().splitlines()) == 1
    assert [json.loads(line)["url"] for line in out.splitlines()] == KEYS[:7]  # what came before the damage


def test_a_changed_byte_in_the_last_record_is_an_error_not_a_torn_tail(tmp_path: Path) -> None:
    """A complete last record whose check fails is damage (CorruptIndexError, nothing removed); a last record
    whose sector never reached the disk (zeros) or that is cut short is a torn write, dropped."""
    keys = [f"u{i}" for i in range(54)]  # the last record straddles a 512-byte sector boundary
    fps = np.random.default_rng(13).integers(0, 2**64, size=len(keys), dtype=np.uint64)
    record = record_dtype(64)
    for damage in ("flip-fp", "flip-sketch", "zero-sector", "zero-all", "cut"):
        idx = tmp_path / damage
        with open_sketch_index(idx) as index:
            index.add_many(fps, keys, [sketch_of(key) for key in keys])
        records = idx / "records.1"
        last = HEADER_SIZE + 53 * record.itemsize
        data = bytearray(records.read_bytes())
        if damage == "flip-fp":
            data[last + 2] ^= 0x40
        elif damage == "flip-sketch":
            data[last + RECORD.itemsize + 50] ^= 0x01
        elif damage == "zero-sector":  # the record straddles a 512-byte sector: the second one is unwritten
            boundary = (last // 512 + 1) * 512
            assert last < boundary < last + record.itemsize
            data[boundary : last + record.itemsize] = bytes(last + record.itemsize - boundary)
        elif damage == "zero-all":
            data[last:] = bytes(record.itemsize)
        else:
            del data[-20:]
        records.write_bytes(bytes(data))
        if damage.startswith("flip"):
            for readonly in (True, False):
                with pytest.raises(CorruptIndexError, match=r"records\.1: record 53 .*damaged"):
                    open_sketch_index(idx, readonly=readonly)
            assert records.read_bytes() == bytes(data)  # nothing was cut
        else:
            with open_sketch_index(idx) as index:
                assert [e.key for e in index.entries()] == keys[:53]
            assert records.stat().st_size == last


# --- 7: a reader reads the generation it opened, whatever a compaction does meanwhile -----------------------


def test_a_reader_reads_its_generation_to_the_end_across_a_compaction(tmp_path: Path) -> None:
    """A read-only backend opened before a compaction (in the middle of an export, even) still reads every
    entry and key of the generation it opened after the compaction removed its files."""
    fps = np.random.default_rng(3).integers(0, 2**64, size=150_000, dtype=np.uint64)
    keys = [f"https://site.example/{i}" for i in range(len(fps))]
    writer = open_index(tmp_path / "idx")
    writer.add_many(fps, keys, [S] * len(keys))
    writer.delete(keys[:1000])
    reader = open_index(tmp_path / "idx", readonly=True)
    export = reader.entries()
    first = next(export)
    writer.compact()
    assert not (tmp_path / "idx" / "records.1").exists()
    rest = list(export)
    assert [first.key, *(e.key for e in rest)] == keys[1000:]
    assert reader.query(int(fps[5]), 0) == []  # deleted in the generation it reads
    assert reader.query(int(fps[149_999]), 0) == [Match(keys[149_999], 0, int(fps[149_999]))]
    assert reader.info()["generation"] == 1
    writer.add(7, "after", S)
    reader.close()
    with open_index(tmp_path / "idx", readonly=True) as fresh:
        assert fresh.info()["generation"] == 2 and len(fresh) == 149_001
    writer.close()


def test_an_open_while_current_moves_opens_the_new_generation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only open that read CURRENT just before a compaction switched it (and removed the files it
    named) opens the new generation instead of failing."""
    writer = small_index_writer(tmp_path / "idx")
    real = IndexDirectory.generation
    calls = []

    def stale_then_compact(self: IndexDirectory) -> int | None:
        generation = real(self)
        calls.append(generation)
        if len(calls) == 1 and self.readonly:
            writer.compact()  # CURRENT moves on after it was read
        return generation

    monkeypatch.setattr(IndexDirectory, "generation", stale_then_compact)
    with open_index(tmp_path / "idx", readonly=True) as reader:
        assert reader.info()["generation"] == 2
        assert [e.key for e in reader.entries()] == KEYS
    assert calls[0] == 1
    writer.close()


def small_index_writer(path: Path) -> FileBackend:
    writer = open_index(path)
    writer.add_many(FPS, KEYS, [S] * len(KEYS))
    return writer


COMPACTOR = """
import os, sys
import numpy as np
from simhash_filter.index.backends.file import FileBackend
from simhash_filter.index.tables import TableDesign
index = FileBackend(sys.argv[1], k=3, design=TableDesign.parse("4x16/k3"), metadata={"model": "m1", "sketch_bytes": 8})
sys.stdout.write("ready\\n")
sys.stdout.flush()
n = 0
while not os.path.exists(sys.argv[2]):
    index.compact()
    n += 1
index.close()
sys.stdout.write(f"{n}\\n")
"""


@pytest.mark.slow
def test_readers_never_fail_while_another_process_compacts_in_a_loop(tmp_path: Path) -> None:
    """While a process compacts the index over and over, read-only opens and full exports in this process all
    succeed and each sees every entry, over several generations (it compacts until the reads are done)."""
    fps = np.random.default_rng(5).integers(0, 2**64, size=20_000, dtype=np.uint64)
    keys = [f"https://site.example/{i}" for i in range(len(fps))]
    with open_index(tmp_path / "idx") as index:
        index.add_many(fps, keys, [S] * len(keys))
    proc = subprocess.Popen(
        [sys.executable, "-c", COMPACTOR, str(tmp_path / "idx"), str(tmp_path / "stop")], stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    errors: list[BaseException] = []
    opens = exports = 0
    generations = set()
    try:
        while proc.poll() is None and opens < 3000 and (opens < 60 or len(generations) <= 5):
            try:
                with open_index(tmp_path / "idx", readonly=True) as reader:
                    opens += 1
                    generations.add(reader.info()["generation"])
                    if opens % 10 == 0:
                        assert sum(1 for _ in reader.entries()) == len(keys)
                        exports += 1
            except Exception as exc:
                errors.append(exc)
    finally:
        (tmp_path / "stop").touch()
        out, _ = proc.communicate(timeout=60)
    compactions = int(out.split()[-1])
    assert not errors, f"{len(errors)} of {opens + len(errors)} reads failed: {errors[:3]!r}"
    assert proc.returncode == 0 and compactions > 5 and opens >= 60 and exports >= 6 and len(generations) > 5


# --- 10b: a full disk during a compaction or a creation leaves the index as it was ------------------------


class FullDisk:
    """A disk with no space left for the files of one directory whose name *fails* says: their ``os.write``,
    ``os.pwrite`` and ``os.replace`` raise ``ENOSPC``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, directory: Path, fails: Callable[[str], bool]) -> None:
        self.directory = str(directory.resolve())
        self.fails = fails
        self.refused = 0
        write, pwrite, replace = os.write, os.pwrite, os.replace

        def full(name: str) -> bool:
            head, _, tail = name.rpartition("/")
            if head == self.directory and self.fails(tail):
                self.refused += 1
                return True
            return False

        def fd_name(fd: int) -> str:
            try:
                return os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                return ""

        def os_write(fd: int, data: bytes) -> int:
            if full(fd_name(fd)):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return write(fd, data)

        def os_pwrite(fd: int, data: bytes, offset: int) -> int:
            if full(fd_name(fd)):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return pwrite(fd, data, offset)

        def os_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str], **kw: object) -> None:
            if full(os.path.abspath(dst)):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            replace(src, dst, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "write", os_write)
        monkeypatch.setattr(os, "pwrite", os_pwrite)
        monkeypatch.setattr(os, "replace", os_replace)


needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")


@needs_proc
@pytest.mark.parametrize("where", ["records.2", "urls.2", "CURRENT.tmp", "CURRENT"])
def test_a_compaction_on_a_full_disk_leaves_the_index_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A compaction that runs out of space (writing the new generation, CURRENT.tmp, or switching CURRENT)
    raises, leaves no temporary file, and the index goes on working and opens (to write or read, the disk
    still full) with everything acknowledged; once there is space it compacts."""
    idx = tmp_path / "idx"
    index = open_index(idx)
    index.add_many(FPS, KEYS, [S] * len(KEYS))
    assert index.delete(KEYS[:5]) == 5
    before = sorted(p.name for p in idx.iterdir())
    with monkeypatch.context() as patch:
        disk = FullDisk(patch, idx, lambda name: name == where)
        with pytest.raises(OSError, match="No space left"):
            index.compact()
        assert disk.refused
        assert sorted(p.name for p in idx.iterdir()) == before
        assert [e.key for e in index.entries()] == KEYS[5:]
        assert index.query(int(FPS[9]), 0) == [Match(KEYS[9], 0, int(FPS[9]))]
        index.close()
        FullDisk(patch, idx, lambda name: True)  # nothing can be written any more
        for readonly in (True, False):
            with open_index(idx, readonly=readonly) as again:
                assert [e.key for e in again.entries()] == KEYS[5:]
        assert sorted(p.name for p in idx.iterdir()) == before
    with open_index(idx) as again:
        again.compact()
        assert again.info()["generation"] == 2 and [e.key for e in again.entries()] == KEYS[5:]


@needs_proc
@pytest.mark.parametrize("where", ["records.1", "deleted.1", "CURRENT.tmp", "CURRENT"])
def test_a_creation_on_a_full_disk_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Creating an index on a full disk raises and leaves no half-made index (no CURRENT.tmp, no generation
    files); a read-only open says there is no index; once there is space the index is created."""
    idx = tmp_path / "idx"
    with monkeypatch.context() as patch:
        FullDisk(patch, idx, lambda name: name == where)
        with pytest.raises(OSError, match="No space left"):
            open_index(idx)
    assert sorted(p.name for p in idx.iterdir()) == ["LOCK"]
    with pytest.raises(FileNotFoundError, match="no index at"):
        open_index(idx, readonly=True)
    with open_index(idx) as index:
        index.add(1, "one", S)
    with open_index(idx, readonly=True) as index:
        assert [e.key for e in index.entries()] == ["one"]


# --- a spill (tables on disk) on a full disk: the page is stored, and reported so -----------------------------------

DISK_DESIGN = TableDesign.parse("11+11+11+11+10+10/k4")
SPILL_ROWS = 4000


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted for the test (root only: skipped elsewhere, but required under CI as root)."""
    problem = tmpfs_problem()
    if problem is not None:
        if os.environ.get("CI") and os.geteuid() == 0:
            pytest.fail(f"CI runs as root: the small-filesystem tests must run, but {problem}")
        pytest.skip(f"no small filesystem to fill: {problem}")
    with small_filesystem(tmp_path / "fs", 4 << 20) as path:
        yield path


def open_disk_tables(path: Path) -> FileBackend:
    return FileBackend(
        path, k=10, design=DISK_DESIGN, metadata=SKETCH_META, tables="disk", spill_rows=SPILL_ROWS, buffer_size=64
    )


def spill_pages(first: int, n: int) -> list[tuple[int, str, bytes]]:
    rng = np.random.default_rng(first)
    return [(int(fp), f"https://site.example/spill/{first + i}", sketch_of(str(first + i)))
            for i, fp in enumerate(rng.integers(0, 2**64, n, dtype=np.uint64))]  # fmt: skip


def test_a_spill_on_a_full_disk_fails_no_add_and_is_tried_again(
    small_fs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With the disk full when the rows in memory are to be written as a run file, the adds (whose records fit)
    return, stored; the rows stay in memory (a warning, once) and every page is found; an open on the still full disk
    opens; once there is space the spill is tried again and works, and every page is there after reopening."""
    directory = small_fs / "idx"
    stored = spill_pages(0, 3968)  # 62 buffers: the next one reaches spill_rows
    index = open_disk_tables(directory)
    index.add_many(np.array([p[0] for p in stored], dtype=np.uint64), [p[1] for p in stored], [p[2] for p in stored])
    assert index.info()["run_files"] == 0
    filler = fill(small_fs, leave=100_000)  # room for the records of 300 pages (36 kB), not for a run file (160 kB)
    with caplog.at_level(logging.WARNING):
        for fp, key, sketch in spill_pages(10_000, 300):
            assert index.add_and_candidates(fp, key, sketch, 10) == []  # stored: no exception
            stored.append((fp, key, sketch))
        assert len(index) == len(stored) and index.info()["spills_failed"] == 1
        assert [p.name for p in directory.iterdir() if p.name.startswith("tables.")] == []
        for fp, key, _ in stored[::50] + stored[-300:]:
            assert Match(key, 0, fp) in index.query(fp, 0)
        index.close()
        index = open_disk_tables(directory)  # the disk still full: the spill of the open fails too
        assert len(index) == len(stored) and index.info()["run_files"] == 0
        failed = [m for m in caplog.messages if "to a run file failed ([Errno 28] No space left on device)" in m]
        assert len(failed) == 2 and "they are stored" in failed[0]  # once per open
        filler.unlink()
        for fp, key, sketch in spill_pages(20_000, 600):  # the spill is tried again after 500 pages
            index.add_and_candidates(fp, key, sketch, 10)
            stored.append((fp, key, sketch))
        assert index.info()["rows_in_run_files"] > 4768 and index.info()["spills_failed"] == 0
        assert "written to a run file at last" in caplog.text
    index.close()
    with open_disk_tables(directory) as index:
        assert len(index) == len(stored)
        assert [e.key for e in index.entries()] == [key for _, key, _ in stored]
        for fp, key, _ in stored[::37]:
            assert Match(key, 0, fp) in index.query(fp, 0)
