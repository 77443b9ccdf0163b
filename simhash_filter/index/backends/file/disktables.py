"""Tables on disk (``?tables=disk``): the older rows' tables written to run files (:mod:`.runfiles`) once the rows
in memory reach ``spill_rows``, merged in a thread of their own; a check never waits for a merge.  Run files are
derived from the records: a damaged block is made again from the columns in memory, and a spill that fails leaves
the rows in memory, stored.  Memory, merging and failures: docs/stores.md ("Tables on disk")."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simhash_filter.errors import CorruptIndexError
from simhash_filter.index.backends.base import MetadataMismatchError
from simhash_filter.index.backends.file.runfiles import MergeCancelled, RunFile, run_names, write_run
from simhash_filter.index.backends.memory.tables import BoundedTables, Part
from simhash_filter.index.tables import is_count

if TYPE_CHECKING:
    from simhash_filter.index.backends.file.rows import FileRows

logger = logging.getLogger("simhash_filter.index.backends.file")

#: The ``tables`` option: ``auto`` (on disk when the index has run files), ``memory``, ``disk``.
TABLE_MODES = ("auto", "memory", "disk")
#: A run file is rewritten with the newer one after it while it is at most this many times larger: about log2(N /
#: spill_rows) run files, and fewer bytes written than a larger factor (whose runs are rewritten more often).
MERGE_FACTOR = 2
#: In the index's directory, written by an open with ``tables=disk`` (removed by one with ``tables=memory``): later
#: opens with ``tables=auto`` keep the tables on disk, run files or not.
MODE_FILE = "TABLES"


class DiskTables:
    """The run files of a :class:`~simhash_filter.index.backends.file.FileBackend`'s older *rows*, whose *tables*
    drop their runs once a spill holds their rows; *lock* is the store's (a merge swaps its run file in under it)."""

    def __init__(
        self, rows: FileRows, tables: BoundedTables, lock: threading.Lock, *, mode: str, spill_rows: int
    ) -> None:
        if mode not in TABLE_MODES:
            raise ValueError(f"tables must be one of {', '.join(TABLE_MODES)}, got {mode!r}")
        if not is_count(spill_rows, 1):
            raise ValueError(f"spill_rows must be an int >= 1, got {spill_rows!r}")
        self._rows = rows
        self._tables = tables
        self._lock = lock
        self.path = rows.path
        self.design = tables.design
        self._lead_masks = np.array(tables.design.lead_masks, dtype=np.uint64)
        self._readonly = rows.readonly
        self._table_mode = mode
        self.spill_rows = spill_rows
        self._disk: list[RunFile] = []
        self.spilled = 0  # rows below this are in run files
        self._merger: threading.Thread | None = None  # the merge under way
        self._stop_merging = threading.Event()
        self._damaged_blocks = 0  # blocks of entries found damaged (and made again) since opening
        self._damage_told: set[Path] = set()  # the run files whose damage was logged
        self._spill_failures = 0  # spills failed in a row (0: the last one worked)
        self._spill_again_at = 0  # no spill is tried before this many rows after a failed one

    @property
    def table_options(self) -> str:
        """The URI option that keeps an index's tables where this one's are (``index rebuild`` in place)."""
        return f"tables={self._table_mode}"

    @property
    def tables_on_disk(self) -> bool:
        """Whether the tables of older rows are kept in run files (decided on the first open for ``auto``)."""
        return self._table_mode == "disk"

    def open_runs(self, total: int) -> int:
        """Open this generation's run files that tile rows ``0..S-1`` (leaving out damaged ones and those a merge
        replaced), fill the columns of those rows (reserved for *total* rows), reserve the sketches of the rows read
        from the records; S (0 without tables on disk)."""
        at = self._tile_runs(total)
        self.spilled = at
        self._tables.clear(at)
        self._merge_later()  # a merge a close stopped
        self._rows.rebase_sketches(at, total - at)  # the rows read from records
        return at

    def _tile_runs(self, total: int) -> int:
        """:meth:`open_runs`' run files: the rows they hold."""
        found = sorted(run_names(self.path, self._rows.generation), key=lambda f: (f[0], -f[1]))
        marker = self.path / MODE_FILE
        if self._table_mode == "auto":
            self._table_mode = "disk" if found or marker.exists() else "memory"
        elif not self._readonly and (self._table_mode == "disk") != marker.exists():  # what auto opens next
            if self._table_mode == "disk":
                marker.write_text("disk\n", encoding="ascii")
            else:
                marker.unlink()
        if self._table_mode != "disk":
            return 0
        if self._rows.stored_design not in (None, self.design.name):  # opened with another design: its run files stay
            if found and not self._readonly:
                raise MetadataMismatchError(
                    f"{self.path}: the index keeps the tables of the design {self._rows.stored_design} on disk: "
                    "open it with that design (the SIMHASH_EXPECTED_PAGES it was built for), or rebuild it for another "
                    "size with `simhash-filter index rebuild`"
                )
            return 0
        at = 0
        for start, end, path in found:
            if start != at or end > total:
                if start == at:
                    raise CorruptIndexError(
                        f"{path} holds the tables of rows up to {end}, but {self._rows.file_name()} ends at row "
                        f"{total}: the records file was cut"
                    )
                self._stale(path)
                continue
            try:
                run = RunFile.open(
                    path, self._rows.salt, self.design, self._columns(start, end), on_damage=self._damaged
                )
            except (CorruptIndexError, OSError, ValueError) as exc:
                logger.warning("simhash index %s: %s; its rows are read from the records", self.path, exc)
                self._stale(path)
                continue
            self._disk.append(run)
            at = end
        return at

    def _stale(self, path: Path) -> None:
        if not self._readonly:
            path.unlink(missing_ok=True)

    def spill(self) -> bool:
        """Write the rows in memory as a run file once they are ``spill_rows`` (then merge run files): True if it
        did, False if it is not due or failed.  A failed spill (a full disk) fails no add: the rows are stored (their
        records are written), stay in memory, and the spill is tried again after :meth:`_spill_pause` more rows."""
        start, end = self.spilled, self._rows.stored
        due = end - start >= self.spill_rows and end >= self._spill_again_at
        if self._table_mode != "disk" or self._readonly or not due:
            return False
        try:
            run = self._spill(start, end)
        except (OSError, CorruptIndexError) as exc:
            self._spill_failed(start, end, exc)
            return False
        if self._spill_failures:
            logger.warning("simhash index %s: rows %d..%d written to a run file at last", self.path, start, end - 1)
        self._spill_failures = 0
        self._disk.append(run)
        self.spilled = end
        self._rows.rebase_sketches(end, self._tables.buffer_size)  # nothing past the spilled rows yet
        self._merge_later()
        return True

    def _spill(self, start: int, end: int) -> RunFile:
        """The run file of rows ``start..end-1``, written (their keys and records synced first) and opened."""
        fds = self._rows.fds
        for fd in (fds["urls"], fds["records"]):  # the rows a run file covers are on the disk first
            os.fsync(fd)
        return self._run_file(start, self._columns(start, end))

    def _spill_failed(self, start: int, end: int, exc: Exception) -> None:
        """Note a failed spill: a warning the first time in a row, the next try after :meth:`_spill_pause` rows."""
        self._spill_failures += 1
        self._spill_again_at = self._rows.stored + self._spill_pause()
        logger.log(
            logging.WARNING if self._spill_failures == 1 else logging.DEBUG,
            "simhash index %s: writing rows %d..%d to a run file failed (%s); they are stored (their records are "
            "written) and their tables kept in memory; tried again after %d more pages",
            self.path, start, end - 1, exc, self._spill_pause(),
        )  # fmt: skip

    def _spill_pause(self) -> int:
        """Rows added between two tries of a failed spill: an eighth of ``spill_rows`` (a try on a disk that is
        still full writes up to a run file's bytes before it fails), at least a buffer."""
        return max(self._tables.buffer_size, self.spill_rows // 8)

    def _columns(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The fingerprints, added times and refusals of rows ``start..end-1`` (views: a row's never change)."""
        return self._rows.fingerprints[start:end], self._rows.times[start:end], self._rows.refusals[start:end]

    def _run_file(
        self, start: int, columns: tuple[np.ndarray, np.ndarray, np.ndarray], cancelled: Any = lambda: False
    ) -> RunFile:
        """Write and open the run file of the rows from *start* whose *columns* these are."""
        path = write_run(
            self.path, self._rows.generation, self._rows.salt, self.design, start, *columns, self._rows.format,
            cancelled=cancelled,
        )  # fmt: skip
        return RunFile.open(path, self._rows.salt, self.design, columns, read=False, on_damage=self._damaged)

    def _merge_later(self) -> None:
        """Write a run file again in a thread of its own, one at a time (the checks go on with the run files as they
        are): a damaged one first, else the newest two that the merge rule merges.  Called with the backend's lock
        held."""
        if self._merger is not None or self._readonly:
            return
        job = self._next_job()
        if not job:
            return
        columns = self._columns(job[0].start, job[-1].end)  # the arrays may grow meanwhile: these views stay
        self._merger = threading.Thread(target=self._merge, args=(job, columns), name="simhash-merge", daemon=True)
        self._merger.start()

    def _next_job(self) -> list[RunFile]:
        """The run files to write again as one (none: nothing to do)."""
        runs = self._disk
        for run in runs:
            if run.damaged:
                return [run]
        pairs = [i for i in range(len(runs) - 1) if runs[i].size <= MERGE_FACTOR * runs[i + 1].size]
        return runs[pairs[-1] : pairs[-1] + 2] if pairs else []  # the newest pair the rule merges

    def _merge(self, job: list[RunFile], columns: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Write the run file of *job*'s rows; swap it in under the lock; then merge on."""
        stop = self._stop_merging
        try:
            run = self._run_file(job[0].start, columns, stop.is_set)
        except MergeCancelled:
            return
        except Exception as exc:  # a full disk, say: the run files stay as they are (they are derived data)
            what = "merging run files" if len(job) > 1 else f"writing {job[0].path.name} again"
            logger.warning("simhash index %s: %s failed (%s); the run files stay as they are", self.path, what, exc)
            self._merger = None  # the next spill tries again
            return
        while not stop.is_set():
            if self._lock.acquire(timeout=0.1):
                try:
                    i = self._disk.index(job[0])  # run files were maybe written after these meanwhile
                    self._disk[i : i + len(job)] = [run]
                    for old in job:
                        old.close(remove=old.path != run.path)  # a run file written again has the same name
                    self._merger = None
                    self._merge_later()
                finally:
                    self._lock.release()
                return
        run.close()  # closing: the next open uses it (and removes those it replaces)

    def _damaged(self, run: RunFile, what: str) -> None:
        """A block of *run*'s entries failed its check (and was made again from the columns): count it, say so once
        per run file, and write the run file again (a writer).  Called with the backend's lock held (a check)."""
        self._damaged_blocks += 1
        if run.path not in self._damage_told:
            self._damage_told.add(run.path)
            logger.warning(
                "simhash index %s: %s: %s (the file was changed or damaged); its rows are taken from the records' "
                "fingerprints in memory%s", self.path, run.path.name, what,
                "" if self._readonly else ", and the run file is written again",
            )  # fmt: skip
        self._merge_later()

    def wait_for_merges(self) -> None:
        """Return once no run files are being merged (for benchmarks and tests: merges run in the background)."""
        while (merger := self._merger) is not None:
            merger.join()
            if merger is self._merger:  # it stopped without swapping (closing, or a failure)
                return

    def lower_buckets(self, fingerprint: int, leads: list[int]) -> Iterator[Part]:
        """Per run file, the rows of the page's blocks (its buckets' rows whose whole lead is the page's), their
        fingerprints (in memory: the entries are row numbers) and tables, in one numpy pass."""
        for run in self._disk:
            rows, tables = run.buckets(leads)
            if len(rows):
                values = self._rows.fingerprints[rows]
                same = ((values ^ np.uint64(fingerprint)) & self._lead_masks[tables]) == 0
                yield values[same], rows[same], tables[same]

    def close(self) -> None:
        """Stop a merge under way (it stops between two tables, its file removed) and close the run files."""
        if self._merger is not None:
            self._stop_merging.set()
            self._merger.join()
            self._merger = None
            self._stop_merging = threading.Event()
        for run in self._disk:
            run.close()
        self._disk = []
        self.spilled = 0
        self._damage_told = set()

    def info(self) -> dict[str, Any]:
        """The tables' part of the store's ``info()``."""
        return {
            "tables": self._table_mode,
            "run_files": len(self._disk),
            "rows_in_run_files": self.spilled,
            "run_file_bytes": sum(os.fstat(run.fd).st_size for run in self._disk),
            "damaged_blocks": self._damaged_blocks,
            "spills_failed": self._spill_failures,
        }

    @property
    def nbytes(self) -> int:
        """Bytes of the run files' directories in memory."""
        return sum(run.nbytes for run in self._disk)
