"""The fault-injection suite (docs/reliability.md, "Fault injection"): faults injected for real, many times
over, at seeded random places, each with what it asserts - nothing acknowledged lost, no hang, bounded
memory, one-line errors.

- flipped bytes in every file of an on-disk index, read by the library and by the command line;
- ``kill -9`` of the on-disk index's writer at random moments, also during compactions, over and over;
- ``kill -9`` of ``simhash-filter dedup``'s worker processes at random moments;
- a small tmpfs that fills up under the on-disk index and under ``dedup --output``;
- Redis: ``DEBUG SLEEP`` beyond the client's timeout, restarts with and without persistence;
- a real ``scrapy crawl`` of a site of hostile pages (a gzip bomb, deep nesting, huge text, binary).

Seeded: ``FAULT_SEED=n python -m pytest tests/test_fault_injection.py`` tries other places (every failure
names its seed and trial).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from crawl_helpers import env, scrapy_crawl
from fault_helpers import children, cmdline, fill, page_lines, small_filesystem, tmpfs_problem

from devsites import pages as p
from devsites.hostile import ORDINARY, hostile_site, serve
from devsites.redis_server import RedisServer
from simhash_filter import open_index
from simhash_filter.cli.main import main
from simhash_filter.config import DEFAULTS
from simhash_filter.index.backends import MetadataMismatchError
from simhash_filter.index.backends.file import CorruptIndexError, FileBackend
from simhash_filter.index.backends.file.records import HEADER_SIZE
from simhash_filter.index.backends.uri import error_message
from simhash_filter.index.tables import TableDesign

#: The seed of every random choice of the suite (``FAULT_SEED`` to try others).
SEED = int(os.environ.get("FAULT_SEED", "20240501"))


def seeded(name: str) -> random.Random:
    """A random generator for one test, from the suite's seed and the test's name."""
    return random.Random(f"{SEED}-{name}")


def one_line(text: str) -> bool:
    """Whether *text* is one line (and its newline)."""
    return len(text.strip().splitlines()) == 1


# --- flipped bytes in every file of the on-disk index -------------------------------------------------------

#: Byte positions tried per file: of its header's text, of the header's padding, of what follows the header.
FLIPS_IN_HEADER, FLIPS_IN_PADDING, FLIPS_IN_BODY = 4, 1, 8


def flips(path: Path, rng: random.Random) -> list[tuple[int, int]]:
    """Seeded ``(position, xor mask)`` changes of *path*: three of every byte of a small file (``CURRENT``,
    ``LOCK``: one makes another digit of ``1``), else one of a few bytes of its header's text, of its padding
    and of its body."""
    data = path.read_bytes()
    if len(data) <= 16:
        return [(i, mask) for i in range(len(data)) for mask in (0x01, 0x02, rng.randint(1, 255))]
    text_end = data.index(b"\n", data.index(b"\n") + 1) + 1 if len(data) >= HEADER_SIZE else len(data)
    positions = rng.sample(range(text_end), min(FLIPS_IN_HEADER, text_end))
    positions += rng.sample(range(text_end, min(len(data), HEADER_SIZE)), FLIPS_IN_PADDING)
    if len(data) > HEADER_SIZE:
        positions += rng.sample(range(HEADER_SIZE, len(data)), min(FLIPS_IN_BODY, len(data) - HEADER_SIZE))
    return [(i, rng.randint(1, 255)) for i in sorted(positions)]


def read_index(directory: Path, *, readonly: bool = True) -> list[tuple[str, int, bytes | None]]:
    """Open the index as ``dedup`` does; its entries: ``(key, fingerprint, sketch)``."""
    uri = f"file://{directory}" + ("?readonly=1" if readonly else "")
    with open_index(DEFAULTS, uri) as index:
        return [(e.key, e.fingerprint, e.sketch) for e in index.backend.entries()]


def assert_names(exc: BaseException, directory: Path, damaged: str) -> None:
    """*exc* is one line naming the damaged file (or, for a model mismatch, the index)."""
    message = str(exc)
    assert "\n" not in message, message
    if isinstance(exc, MetadataMismatchError):  # the header's metadata was changed into another valid one
        assert str(directory) in message, message
    else:
        assert isinstance(exc, CorruptIndexError), repr(exc)
        assert f"{directory}/{damaged}" in message, message


def check_library(
    directory: Path, damaged: str, expected: list[tuple[str, int, bytes | None]], deleted: dict[str, int]
) -> None:
    """The damaged index opened read-only: the query of every stored or deleted page's fingerprint, and the
    export, give the right answer or a CorruptIndexError naming the damaged file, never a wrong key, a deleted
    key or a silently missing one."""
    by_fp: dict[int, set[str]] = {fp: set() for fp in deleted.values()}
    for key, fp, _ in expected:
        by_fp.setdefault(fp, set()).add(key)
    sketches = {key: sketch for key, _, sketch in expected}
    try:
        index = open_index(DEFAULTS, f"file://{directory}?readonly=1")
    except (CorruptIndexError, MetadataMismatchError) as exc:
        assert_names(exc, directory, damaged)
        return
    with index:
        for fp, keys in by_fp.items():
            try:
                found = index.backend.candidates(fp, 0)
            except CorruptIndexError as exc:
                assert_names(exc, directory, damaged)
                continue
            assert {c.key for c in found} == keys, (fp, found)
            assert all(c.sketch == sketches[c.key] for c in found)
        got = []
        try:
            got.extend((e.key, e.fingerprint, e.sketch) for e in index.backend.entries())
        except CorruptIndexError as exc:
            assert_names(exc, directory, damaged)
            assert got == expected[: len(got)]  # what came before the damage, right
        else:
            assert got == expected
        assert not {key for key, _, _ in got} & deleted.keys()


def check_cli(
    directory: Path, damaged: str, exported: list[str], queries: list[tuple[str, str]], capsys: pytest.CaptureFixture
) -> None:
    """``index stats``, ``index export`` and ``index query`` of the damaged index: the right output, or exit
    status 1 with one line naming the damaged file or the index (and, for export, the right lines before)."""
    status = main(["index", "stats", str(directory)])
    out, err = capsys.readouterr()
    if status == 0:
        assert not err and f"entries  {len(exported)} (stored {len(exported) + 3}; deleted 3;" in out, out
    else:
        assert status == 1 and not out and one_line(err) and str(directory) in err, err
    status = main(["index", "export", str(directory)])
    out, err = capsys.readouterr()
    lines = [json.loads(line)["url"] for line in out.splitlines()]
    if status == 0:
        assert not err and lines == exported
    else:
        assert status == 1 and one_line(err) and str(directory) in err, err
        assert lines == exported[: len(lines)]
    for fp, key in queries:
        status = main(["index", "query", str(directory), fp, "-k", "0", "--json"])
        out, err = capsys.readouterr()
        if status == 0:
            assert key in {m["url"] for m in json.loads(out)["matches"]} and not err
        else:
            assert status == 1 and not out and one_line(err) and str(directory) in err, err


def test_flipped_bytes_in_every_index_file_give_the_right_answer_or_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A byte changed at seeded places of each file of an on-disk index (CURRENT, LOCK, records, keys and
    tombstones): opening (read-only or to write), querying and exporting, with the library and the command
    line, give the right answer or a one-line error naming the file - never a wrong or deleted URL, never a
    traceback, and an open that fails changes no file."""
    source, good, out = tmp_path / "pages.jsonl", tmp_path / "good", tmp_path / "out.jsonl"
    source.write_bytes(b"".join(page_lines(120, SEED)))
    assert main(["dedup", str(source), "--index", str(good), "-o", str(out)]) == 0
    fingerprints = {r["url"]: int(r["fingerprint"], 16) for r in map(json.loads, out.read_text().splitlines())}
    deleted = {url: fingerprints[url] for url in (f"https://s.example/{i}" for i in (3, 50, 119))}
    assert main(["index", "delete", str(good), *deleted]) == 0
    capsys.readouterr()
    assert main(["index", "export", str(good)]) == 0
    exported = [json.loads(line)["url"] for line in capsys.readouterr().out.splitlines()]
    expected = read_index(good)
    assert [key for key, _, _ in expected] == exported and len(exported) == 117
    names = sorted(path.name for path in good.iterdir())
    assert names == ["CURRENT", "LOCK", "deleted.1", "records.1", "urls.1"]
    rng = seeded("flip")
    queries = [(f"{fp:016x}", key) for key, fp, _ in rng.sample(expected, 3)]
    tried = errors = 0
    for name in names:
        for position, mask in flips(good / name, rng):
            damaged = tmp_path / f"{name}-{position}-{mask}"
            shutil.copytree(good, damaged)
            data = bytearray((damaged / name).read_bytes())
            data[position] ^= mask
            (damaged / name).write_bytes(bytes(data))
            files = {path.name: path.read_bytes() for path in damaged.iterdir() if path.name != "LOCK"}
            where = f"seed {SEED}: {name} byte {position} changed to {data[position]:#04x}"
            try:
                check_library(damaged, name, expected, deleted)
                check_cli(damaged, name, exported, queries, capsys)
                try:  # to write: opens as read-only does, or fails leaving every file as it was
                    read_index(damaged, readonly=False)
                except (CorruptIndexError, MetadataMismatchError) as exc:
                    assert_names(exc, damaged, name)
                    assert {path.name: path.read_bytes() for path in damaged.iterdir() if path.name != "LOCK"} == files
                    errors += 1
                check_library(damaged, name, expected, deleted)  # nothing was cut by the open to write
            except AssertionError as exc:
                raise AssertionError(f"{where}: {exc}") from exc
            tried += 1
            shutil.rmtree(damaged)
    assert tried >= 30 and errors >= 15, (tried, errors)


# --- kill -9 of the on-disk index's writer, at random moments, over and over -------------------------------

#: A writer of the on-disk index: ``python -c WRITER DIR TRIAL SEED MODE``.  It opens the index when its
#: standard input is closed (so that it can start while the last trial is checked), prints ``open N`` once open,
#: ``a KEY`` after each add returned, ``D KEY`` before and ``d KEY`` after a delete, ``C`` before and ``c``
#: after a compaction.  A key's fingerprint and sketch are hashes of the key (checked after the kill).
WRITER = r"""
import hashlib, random, sys, time
from simhash_filter.index.backends.file import FileBackend
from simhash_filter.index.tables import TableDesign

path, trial, seed, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.stdin.read()
rng = random.Random(f"{seed}-writer-{trial}")

def fp(key):
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")

def sketch(key):
    return hashlib.sha512(key.encode()).digest()

def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()

index = FileBackend(path, k=3, design=TableDesign.parse("4x16/k3"), metadata={"model": "fault", "sketch_bytes": 64})
say(f"open {len(index)}")
n = 0
mine = []
def add(count):
    global n
    keys = [f"t{trial}-{n + j}-" + "x" * rng.randrange(200) for j in range(count)]
    n += count
    if count == 1:
        index.add_and_candidates(fp(keys[0]), keys[0], sketch(keys[0]), 3)
    else:
        index.add_many([fp(k) for k in keys], keys, [sketch(k) for k in keys])
    mine.extend(keys)
    say("\n".join(f"a {k}" for k in keys))

def delete():
    key = mine.pop(rng.randrange(len(mine)))
    say(f"D {key}")
    assert index.delete([key]) == 1
    say(f"d {key}")

if mode == "bulk":
    for _ in range(5):
        add(1000)
    say("done")
while mode == "write":
    r = rng.random()
    if r < 0.6:
        add(1)
    elif r < 0.997:  # a delete reads every key: rare, or the kills would land in deletes
        add(rng.randint(2, 6))
    elif mine:
        delete()
    time.sleep(0.0002)  # a crawl's pace, not a benchmark's: the index stays small enough to check quickly
while mode == "compact":
    add(rng.randint(1, 5))
    if rng.random() < 0.1:  # a delete reads every key, as long as a compaction: rare
        delete()
    say("C")
    index.compact()
    say("c")
"""
WRITER_DESIGN = TableDesign.parse("4x16/k3")
WRITER_META = {"model": "fault", "sketch_bytes": 64}
#: Trials of the writer killed while adding and deleting, and while compacting.
WRITE_TRIALS, COMPACT_TRIALS = 14, 8


def key_fp(key: str) -> int:
    """The fingerprint WRITER gives *key*."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")


def key_sketch(key: str) -> bytes:
    """The sketch WRITER gives *key*."""
    return hashlib.sha512(key.encode()).digest()


class Writer:
    """One run of WRITER in a subprocess, its lines read by a thread as they come."""

    def __init__(self, directory: Path, trial: int, mode: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(directory), str(trial), str(SEED), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env(),
        )
        self.lines: list[str] = []
        self.opened = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith(("open ", "done")):
                self.opened.set()
        self.opened.set()

    def go(self) -> None:
        """Let it open the index."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.finish()

    def finish(self) -> str:
        """Wait for the process and its output; its standard error."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.reader.join(timeout=60)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        with self.proc.stderr:
            return self.proc.stderr.read()


def check_writer_index(directory: Path, added: set[str], deleting: set[str], deleted: set[str]) -> int:
    """Every acknowledged add is stored (unless a delete of it was begun), no acknowledged delete is, and every
    stored entry is one that was added, with its own fingerprint and sketch, once; the number stored."""
    with FileBackend(directory, k=3, design=WRITER_DESIGN, metadata=WRITER_META, readonly=True) as index:
        entries = list(index.entries())
    stored = {e.key for e in entries}
    assert len(stored) == len(entries), "a key stored twice"
    lost = added - deleting - stored
    assert not lost, f"{len(lost)} acknowledged adds lost, e.g. {sorted(lost)[:3]}"
    assert not stored & deleted, f"deleted keys back: {sorted(stored & deleted)[:3]}"
    wrong = [e.key for e in entries if e.fingerprint != key_fp(e.key) or e.sketch != key_sketch(e.key)]
    assert not wrong, f"entries with another key's fingerprint or sketch: {wrong[:3]}"
    return len(entries)


@pytest.mark.slow
def test_kill_9_of_the_writer_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """The on-disk index's writer is killed with SIGKILL at seeded random moments, 23 times (8 of them while it
    compacts in a loop): after each kill the index opens, holds every acknowledged add and no acknowledged
    delete, and the next writer goes on writing it; stale files of a killed compaction are removed."""
    directory = tmp_path / "idx"
    rng = seeded("writer")
    added: set[str] = set()
    deleting: set[str] = set()
    deleted: set[str] = set()
    in_compaction = 0
    trials = [("bulk", None)] + [("write", rng.uniform(0.0, 0.15)) for _ in range(WRITE_TRIALS)]
    trials += [("compact", rng.uniform(0.0, 0.3)) for _ in range(COMPACT_TRIALS)]
    trials.insert(6, ("write", -rng.uniform(0.0, 0.05)))  # negative: from the start of the open, not its end
    started = [Writer(directory, 0, trials[0][0])]
    try:
        for trial, (mode, delay) in enumerate(trials):
            writer = started[trial]
            writer.go()
            if delay is None:
                err = writer.finish()
                assert writer.proc.returncode == 0, err
            else:
                if delay >= 0:
                    assert writer.opened.wait(60), "the writer did not open the index"
                time.sleep(abs(delay))
                writer.kill()
            if trial + 1 < len(trials):  # the next one starts while this one's index is checked
                started.append(Writer(directory, trial + 1, trials[trial + 1][0]))
            for line in writer.lines:
                what, _, key = line.partition(" ")
                if what == "a":
                    added.add(key)
                elif what == "D":
                    deleting.add(key)
                elif what == "d":
                    deleted.add(key)
            in_compaction += bool(writer.lines) and writer.lines[-1] == "C"
            try:
                stored = check_writer_index(directory, added, deleting, deleted)
            except AssertionError as exc:
                raise AssertionError(f"seed {SEED}, trial {trial} ({mode}, killed after {delay} s): {exc}") from exc
            assert stored >= len(added - deleting) > 0
    finally:
        for writer in started:  # after a failure: none left waiting, or writing
            if writer.proc.returncode is None:
                writer.kill()
    assert in_compaction >= COMPACT_TRIALS // 2, f"only {in_compaction} kills landed in a compaction"
    with FileBackend(directory, k=3, design=WRITER_DESIGN, metadata=WRITER_META) as index:  # writing goes on
        index.add_and_candidates(key_fp("last"), "last", key_sketch("last"), 3)
        generation = index.info()["generation"]
    names = sorted(path.name for path in directory.iterdir())
    assert names == sorted(["CURRENT", "LOCK", *(f"{kind}.{generation}" for kind in ("deleted", "records", "urls"))])
    check_writer_index(directory, added | {"last"}, deleting, deleted)


# --- kill -9 of dedup's worker processes --------------------------------------------------------------------

#: Pages of the input, kills of a worker, and lines written between two kills at least (more than a broken
#: pool's lines in flight, 2 workers x CHUNKS_IN_FLIGHT x CHUNK_LINES = 256, redone one at a time: a kill
#: while the same line is redone alone, twice in a row, would rightly report it as a page that kills workers).
DEDUP_PAGES, DEDUP_KILLS, DEDUP_SPACING = 3000, 5, 300
DEDUP_TIMEOUT = 120


def workers_of(pid: int) -> list[int]:
    """The worker processes of a ``dedup`` process (multiprocessing's spawned children; not its resource
    tracker)."""
    return [child for child in children(pid) if "spawn_main" in cmdline(child)]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the workers in /proc")
def test_kill_9_of_dedup_workers_at_random_moments_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``simhash-filter dedup --workers 2`` over 3,000 pages, one of its workers killed with SIGKILL 5 times at
    seeded random moments: the run ends (well within its time bound) with exit status 0 and writes exactly
    what a run in one process writes: every input line once, in order."""
    source = tmp_path / "pages.jsonl"
    source.write_bytes(b"".join(page_lines(DEDUP_PAGES, SEED)))
    assert main(["dedup", str(source), "--workers", "1", "--no-progress"]) == 0
    expected = capsys.readouterr().out.splitlines()
    assert len(expected) == DEDUP_PAGES
    rng = seeded("dedup")
    # a kill at a random line of each of DEDUP_KILLS slots of the output, DEDUP_SPACING lines apart at least
    slot = (DEDUP_PAGES - 100 - DEDUP_SPACING) // DEDUP_KILLS
    marks = [100 + i * slot + rng.randrange(slot - DEDUP_SPACING) for i in range(DEDUP_KILLS)]
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "simhash_filter", "dedup", str(source), "--workers", "2", "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env(), "PYTHONUNBUFFERED": "1"},  # each output line as soon as it is written: the run's progress
    )
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    killed: list[tuple[int, int]] = []  # (lines written then, pid)
    replaced = True  # each kill's workers are new ones: the pool of the last kill was replaced
    seen: set[int] = set()
    try:
        while proc.poll() is None and len(killed) < DEDUP_KILLS and time.monotonic() - start < DEDUP_TIMEOUT:
            due = max(marks[len(killed)], killed[-1][0] + DEDUP_SPACING if killed else 0)
            if len(lines) >= due and (victims := workers_of(proc.pid)):
                victim = rng.choice(victims)
                os.kill(victim, signal.SIGKILL)
                killed.append((len(lines), victim))
                replaced &= not seen & set(victims)
                seen.update(victims)
            time.sleep(0.005)
        proc.wait(timeout=max(1.0, DEDUP_TIMEOUT - (time.monotonic() - start)))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        with proc.stderr:
            err = proc.stderr.read().decode()
    elapsed = time.monotonic() - start
    where = f"seed {SEED}, kills after lines {[n for n, _ in killed]}"
    assert len(killed) == DEDUP_KILLS, f"{where}: the run ended before every kill"
    assert replaced, f"{where}: a killed worker's pool was not replaced"
    assert proc.returncode == 0, f"{where}: {err}"
    assert "Traceback" not in err and one_line(err) and f"dedup: {DEDUP_PAGES} pages" in err, f"{where}: {err}"
    assert [line.decode().rstrip("\n") for line in lines] == expected, where
    assert elapsed < 60, f"{where}: {elapsed:.1f} s"


# --- a small filesystem that fills up -----------------------------------------------------------------------

SMALL_FS = 2 * 1024 * 1024


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted for the test (root only: skipped elsewhere, but required under CI as root)."""
    problem = tmpfs_problem()
    if problem is not None:
        if os.environ.get("CI") and os.geteuid() == 0:
            pytest.fail(f"CI runs as root: the small-filesystem tests must run, but {problem}")
        pytest.skip(f"no small filesystem to fill: {problem}")
    with small_filesystem(tmp_path / "fs", SMALL_FS) as path:
        yield path


def writer_entries(directory: Path, *, readonly: bool = True) -> list[str]:
    with FileBackend(directory, k=3, design=WRITER_DESIGN, metadata=WRITER_META, readonly=readonly) as index:
        return [e.key for e in index.entries()]


def test_an_index_on_a_filesystem_that_fills_up_keeps_everything_acknowledged(small_fs: Path) -> None:
    """Adds to an on-disk index on a 2 MiB tmpfs until it is full: the add that does not fit raises ENOSPC (one
    line) and leaves nothing half-added; the index answers, opens (to read or write) on the full disk with every
    acknowledged add, refuses a compaction and a delete leaving every file as it was, and goes on once there is
    space."""
    fill(small_fs, leave=400_000)
    directory = small_fs / "idx"
    rng = seeded("full")
    acknowledged: list[str] = []
    index = FileBackend(directory, k=3, design=WRITER_DESIGN, metadata=WRITER_META)
    with pytest.raises(OSError) as raised:
        for i in range(1_000_000):
            keys = [f"k{i}-{j}-" + "x" * rng.randrange(3000) for j in range(rng.choice((1, 1, 1, 7)))]
            sketches = [key_sketch(key) for key in keys]
            if len(keys) == 1:
                index.add_and_candidates(key_fp(keys[0]), keys[0], sketches[0], 3)
            else:
                index.add_many([key_fp(key) for key in keys], keys, sketches)
            acknowledged.extend(keys)
    assert raised.value.errno == errno.ENOSPC and one_line(error_message(raised.value))
    assert len(acknowledged) > 100
    assert [e.key for e in index.entries()] == acknowledged
    index.close()
    files = {path.name: path.read_bytes() for path in directory.iterdir() if path.name != "LOCK"}
    for readonly in (True, False):
        assert writer_entries(directory, readonly=readonly) == acknowledged
    with FileBackend(directory, k=3, design=WRITER_DESIGN, metadata=WRITER_META) as index:
        with pytest.raises(OSError, match="No space left"):
            index.compact()
        with pytest.raises(OSError, match="No space left"):
            index.delete(acknowledged[:1])
        assert [e.key for e in index.entries()] == acknowledged
    assert {path.name: path.read_bytes() for path in directory.iterdir() if path.name != "LOCK"} == files
    (small_fs / "filler").unlink()
    with FileBackend(directory, k=3, design=WRITER_DESIGN, metadata=WRITER_META) as index:
        assert index.delete(acknowledged[:1]) == 1
        index.compact()
        index.add_and_candidates(key_fp("after"), "after", key_sketch("after"), 3)
    assert writer_entries(directory) == [*acknowledged[1:], "after"]


def test_dedup_with_its_index_on_a_filesystem_that_fills_up_stops_in_one_line(
    small_fs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``dedup --index`` on a tmpfs that fills up mid-run: exit status 1, one line (and the summary so far), no
    output file; the index opens with the pages stored before the disk was full, in input order."""
    source = tmp_path / "pages.jsonl"
    source.write_bytes(b"".join(page_lines(3000, SEED)))
    fill(small_fs, leave=150_000)
    directory, out = small_fs / "idx", tmp_path / "out.jsonl"
    assert main(["dedup", str(source), "--index", str(directory), "-o", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    message, summary = err.strip().splitlines()
    assert message.startswith("simhash-filter: ") and "No space left on device" in message, err
    assert summary.startswith("dedup: ") and not out.exists() and not list(tmp_path.glob(".out.jsonl.*"))
    with open_index(DEFAULTS, f"file://{directory}?readonly=1") as index:
        urls = [e.key for e in index.backend.entries()]
    assert 100 < len(urls) < 3000 and urls == [f"https://s.example/{i}" for i in range(len(urls))]


def test_dedup_names_its_index_not_its_input_when_the_index_disk_is_full(
    small_fs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The one line of ``dedup --index`` on a full disk names the index, not the input."""
    source = tmp_path / "pages.jsonl"
    source.write_bytes(b"".join(page_lines(1500, SEED)))
    fill(small_fs, leave=100_000)
    assert main(["dedup", str(source), "--index", str(small_fs / "idx"), "--no-progress"]) == 1
    message = capsys.readouterr().err.splitlines()[0]
    assert str(small_fs / "idx") in message and "read error" not in message, message


def test_dedup_output_on_a_filesystem_that_fills_up_leaves_no_partial_output(small_fs: Path) -> None:
    """``simhash-filter dedup --output`` onto a tmpfs that fills up: exit status 1, one line naming the output
    (and the summary so far), no traceback; the earlier output and the input (on the same filesystem) are as
    they were, and no partial file is left."""
    source = small_fs / "pages.jsonl"
    source.write_bytes(b"".join(page_lines(800, SEED)))
    out = small_fs / "out.jsonl"
    out.write_text("an earlier run's output\n")
    before = hashlib.sha256(source.read_bytes()).hexdigest()
    fill(small_fs, leave=20_000)
    proc = subprocess.run(
        [sys.executable, "-m", "simhash_filter", "dedup", str(source), "-o", str(out), "--no-progress"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=120,
    )
    assert proc.returncode == 1 and not proc.stdout, proc.stderr
    message, summary = proc.stderr.strip().splitlines()
    assert message == f"simhash-filter: {out}: cannot write: No space left on device ({out} not written)"
    assert summary.startswith("dedup: ") and "Traceback" not in proc.stderr
    assert sorted(path.name for path in small_fs.iterdir()) == ["filler", "out.jsonl", "pages.jsonl"]
    assert out.read_text() == "an earlier run's output\n"
    assert hashlib.sha256(source.read_bytes()).hexdigest() == before


# --- Redis: DEBUG SLEEP beyond the client's timeout, restarts with and without persistence -----------------

#: The client's patience in these tests: 0.3 s a call, tried twice.
QUICK_REDIS = "socket_timeout=0.3&socket_connect_timeout=0.3&retries=1&retry_backoff=0.05"
#: The longest one call may take: two attempts and the pause between them, with a margin for a loaded machine.
CALL_BOUND = 2.0


@pytest.fixture
def debug_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis server of this test's own that accepts ``DEBUG`` from 127.0.0.1 (Redis 7 refuses it by default)."""
    from conftest_redis import require_redis_server

    require_redis_server()
    with RedisServer(tmp_path / "redis", args=["--enable-debug-command", "local"]) as server:
        yield server


def page_sketch(key: str) -> bytes:
    size = DEFAULTS.fingerprint.sketch_bytes  # blake2b gives at most 64 bytes a digest: as many as it takes
    return (hashlib.blake2b(key.encode(), digest_size=64).digest() * (size // 64 + 1))[:size]


class IndexLoop:
    """Check-and-add of made-up pages, one after another, as ``dedup`` or a crawl does: what each call did,
    and how long the longest took."""

    def __init__(self, uri: str) -> None:
        self.index = open_index(DEFAULTS, uri)
        self.acknowledged: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        self.longest = 0.0
        self.n = 0

    def step(self) -> bool:
        key = f"https://r.example/{self.n}"
        self.n += 1
        start = time.monotonic()
        try:
            self.index.check_and_add(key_fp(key), key, page_sketch(key))
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            self.failed.append(key)
            self.errors.append(error_message(exc))
            return False
        finally:
            self.longest = max(self.longest, time.monotonic() - start)
        self.acknowledged.append(key)
        return True

    def stored(self, key: str) -> int:
        """How many times *key* is stored."""
        return [c.key for c in self.index.backend.candidates(key_fp(key), 0)].count(key)


def test_redis_debug_sleep_beyond_the_client_timeout_bounds_each_call_and_loses_nothing(
    debug_redis: RedisServer,
) -> None:
    """While Redis sleeps (``DEBUG SLEEP 2``) well past the client's timeout (0.3 s, tried twice), each call of an
    index loop fails within its bound with a one-line error; after it, calls succeed, every acknowledged page is
    stored once and every failed one at most once."""
    loop = IndexLoop(f"{debug_redis.url}?prefix=sleep&{QUICK_REDIS}")
    with loop.index:
        for _ in range(20):
            assert loop.step()
        slept: list[object] = []
        other = redis.Redis(host="127.0.0.1", port=debug_redis.port, socket_timeout=10)
        sleeper = threading.Thread(target=lambda: slept.append(other.execute_command("DEBUG", "SLEEP", 2)))
        sleeper.start()
        time.sleep(0.1)
        start = time.monotonic()
        while sleeper.is_alive():
            loop.step()
        sleeper.join()
        other.close()
        assert slept and time.monotonic() - start < 2 + 3 * CALL_BOUND  # the last call ends within its bound
        for _ in range(20):
            assert loop.step()
        assert loop.failed, "no call timed out"
        assert loop.longest < CALL_BOUND, loop.longest
        assert all("\n" not in e and ("Timeout" in e or "timed out" in e) for e in loop.errors), loop.errors[:3]
        assert all(loop.stored(key) == 1 for key in loop.acknowledged)
        assert all(loop.stored(key) <= 1 for key in loop.failed)


@pytest.mark.parametrize("persistence", [True, False], ids=["appendonly", "no-persistence"])
def test_redis_restarts_in_an_index_loop_never_hang_and_say_so_in_one_line(
    tmp_path: Path, persistence: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """An index loop across three Redis restarts: while the server is down each call fails within its bound; after
    a restart with persistence every acknowledged page is still there; after one without, the index starts again,
    empty, said in one warning line per restart, and the loop goes on."""
    from conftest_redis import require_redis_server

    require_redis_server()
    with RedisServer(tmp_path / "redis", appendonly=persistence) as server:
        loop = IndexLoop(f"{server.url}?prefix=restarts&{QUICK_REDIS}")
        since_restart: list[str] = []
        with loop.index, caplog.at_level(logging.WARNING, logger="simhash_filter.index.backends.redis"):
            for _ in range(3):
                for _ in range(30):
                    assert loop.step()
                server.stop()
                assert not loop.step() and not loop.step()  # down: each call fails quickly
                server.start()
                mark = len(loop.acknowledged)
                for _ in range(10):
                    assert loop.step()
                since_restart = loop.acknowledged[mark:]
            assert loop.longest < CALL_BOUND, loop.longest
            assert len(loop.failed) == 6 and all("\n" not in e for e in loop.errors)
            gone = [r.getMessage() for r in caplog.records if "is gone" in r.getMessage()]
            if persistence:
                assert not gone and all(loop.stored(key) == 1 for key in loop.acknowledged)
                assert len(loop.index) == len(loop.acknowledged)
            else:
                assert len(gone) == 3 and all("\n" not in m and "starting it again, empty" in m for m in gone), gone
                assert all(loop.stored(key) == 1 for key in since_restart)
                assert len(loop.index) == len(since_restart)


# --- hostile pages in a real crawl ----------------------------------------------------------------------------

#: The crawl process's peak resident memory, at most (Scrapy, the spider and the filter, fingerprinting in the
#: reactor thread; about 460 MB measured; the gzip bomb decompressed whole would take 2 GB and more).
MAX_CRAWL_RSS_MB = 1000


@pytest.mark.slow
def test_a_crawl_of_hostile_pages_finishes_counts_them_and_keeps_the_ordinary_ones(tmp_path: Path) -> None:
    """``scrapy crawl`` of a local site of hostile pages (a 1 GiB gzip bomb, 20 MB gzipped, 200,000 nested
    elements, 10 MB of distinct words, binary served as text/html, an unknown charset, an empty page) beside
    ordinary articles finishes in bounded time and memory without an error, counts each hostile page under its
    ``simhash/skipped/<reason>`` (or ``simhash/truncated``), and filters the ordinary ones as always."""
    start = time.monotonic()
    with serve(hostile_site()) as port:
        crawl = scrapy_crawl(
            "site",
            tmp_path,
            args={"start_urls": f"http://127.0.0.1:{port}/"},
            settings={
                "EXTENSIONS": json.dumps({"crawl_helpers.StatsToJson": 0, "fault_helpers.PeakMemory": 0}),
                "SIMHASH_PROCESSES": 0,  # fingerprinted in the crawl process, whose memory is measured
            },
        )
    elapsed = time.monotonic() - start
    stats = crawl.stats
    items = {item["url"].split(str(port), 1)[1]: item for item in crawl.items}
    assert stats["finish_reason"] == "finished" and elapsed < 90, elapsed
    assert "Traceback" not in crawl.log and " ERROR: " not in crawl.log
    # the hostile pages: counted, let through, or (the gzip bomb) ignored by Scrapy at DOWNLOAD_MAXSIZE
    assert "/hostile/gzip-bomb" not in items and "gzip-bomb> because its body" in crawl.log
    assert "exceeded DOWNLOAD_MAXSIZE" in crawl.log
    assert stats["simhash/skipped/not_html"] == 1 and "/hostile/binary" in items
    assert stats["simhash/skipped/empty"] == 1 and "/hostile/empty" in items
    # the 20 MB of three words, and the deep nesting's two words (read: the nesting guard keeps the deep text)
    assert stats["simhash/skipped/too_few_features"] == 2
    assert "/hostile/gzip-huge" in items and "/hostile/deep-nesting" in items
    assert stats["simhash/truncated"] == 1 and "/hostile/huge-text" in items
    assert p.TEA_GARDEN.title in items["/hostile/bad-charset"]["title"]  # decoded despite its charset
    # the ordinary pages: kept, but one of the two copies of an article (whichever came first)
    assert set(ORDINARY) - {"/news/rainwater", "/blog/rainwater"} <= set(items)
    assert len({"/news/rainwater", "/blog/rainwater"} & set(items)) == 1
    assert stats["simhash/dropped"] == 1 and stats["simhash/kept"] == 7  # with /, huge-text and bad-charset
    assert stats["fault/peak_rss_mb"] < MAX_CRAWL_RSS_MB, stats["fault/peak_rss_mb"]
