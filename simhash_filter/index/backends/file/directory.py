"""The index's directory: the writer's lock, ``CURRENT`` and the generations of files it names (creating one,
switching to it, opening it whole while a compaction may switch, removing what a failed one left)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simhash_filter.errors import CorruptIndexError, IndexLockedError
from simhash_filter.index.backends.file.osfiles import close_all, pread, replace_whole, write_all
from simhash_filter.index.backends.file.records import (
    DELETED_MAGIC,
    FORMAT,
    HEADER_SIZE,
    MAGIC,
    URLS_MAGIC,
    format_for,
    header,
    read_header,
    record_dtype,
)
from simhash_filter.index.backends.file.runfiles import run_names
from simhash_filter.index.tables import TableDesign

#: The files of a generation.
KINDS = ("records", "urls", "deleted")
#: Times an open tries again when a compaction switched CURRENT between reading it and opening the files.
_OPEN_ATTEMPTS = 100


class IndexDirectory:
    """The directory's files, for :class:`~simhash_filter.index.backends.file.FileBackend`: the lock, ``CURRENT``
    and the generations' files of an index of *design* and *k* at *path* (*readonly*: no lock, nothing written
    but the files' headers of a new generation).  It holds nothing of a generation but its number, passed in."""

    def __init__(self, path: Path, *, readonly: bool, k: int, design: TableDesign) -> None:
        self.path = path
        self.readonly = readonly
        self.k = k
        self.design = design
        #: The descriptor that holds the writer's lock (None: not taken).
        self.lock_fd: int | None = None

    def file(self, kind: str, generation: int) -> Path:
        """The file of *kind* (:data:`KINDS`) of *generation*."""
        return self.path / f"{kind}.{generation}"

    def take_lock(self) -> None:
        """Take the writer's lock (:class:`IndexLockedError` if another process holds it), creating the directory."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise IndexLockedError(
                f"the index {self.path} is open for writing in another process (pid {holder}); one process writes "
                "an index at a time: give each crawl its own index, or share one through redis://"
            ) from None
        with contextlib.suppress(OSError):  # the pid is for the error message only: a full disk opens too
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self.lock_fd = fd

    def release_lock(self) -> None:
        """Release the writer's lock, if taken."""
        if self.lock_fd is not None:
            os.close(self.lock_fd)  # releases the flock
            self.lock_fd = None

    def generation(self) -> int | None:
        """The generation ``CURRENT`` names (None: there is no ``CURRENT``)."""
        try:
            text = (self.path / "CURRENT").read_text("ascii").strip()
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            text = ""
        if not text.isdigit():
            raise CorruptIndexError(f"{self.path / 'CURRENT'} is damaged (expected a generation number)")
        return int(text)

    def create(
        self,
        generation: int,
        salt: int,
        created: float,
        metadata: Mapping[str, Any],
        sketch_bytes: int,
        fmt: int = FORMAT,
    ) -> None:
        """Write the empty files of a generation (not yet current), of records with *sketch_bytes* sketches, in
        format *fmt*."""
        fields = {
            "format": fmt,
            "salt": salt,
            "created": created,
            "record_bytes": record_dtype(sketch_bytes).itemsize,
            "metadata": dict(metadata),
            "k": self.k,
            "design": self.design.name,
        }
        for kind, magic in (("records", MAGIC), ("urls", URLS_MAGIC), ("deleted", DELETED_MAGIC)):
            fd = os.open(self.file(kind, generation), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_all(fd, header(magic, fields if kind == "records" else {"format": fmt, "salt": salt}))
                os.fsync(fd)
            finally:
                os.close(fd)

    def rewrite_headers(self, generation: int, fds: Mapping[str, int], write_format: int) -> None:
        """Make the headers of *generation* (open as *fds*) name *write_format* and this design, the records file's
        first, each synced before the next, writing only the bytes that change (a write cut short leaves a header of
        one version or the other)."""
        for kind, magic in (("records", MAGIC), ("urls", URLS_MAGIC), ("deleted", DELETED_MAGIC)):
            path = self.file(kind, generation)
            old = pread(fds[kind], HEADER_SIZE, 0)
            fields = read_header(fds[kind], path, magic)
            fields["format"] = write_format
            if kind == "records":
                fields["design"] = self.design.name
            new = header(magic, fields)
            changed = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
            if not changed:
                continue
            fd = os.open(path, os.O_WRONLY)  # not the O_APPEND descriptor: Linux appends a pwrite there
            try:
                if os.fstat(fd).st_ino != os.fstat(fds[kind]).st_ino:
                    raise CorruptIndexError(f"{path} was replaced while the index was open for writing")
                start, end = changed[0], changed[-1] + 1
                os.pwrite(fd, new[start:end], start)
                os.fsync(fd)
            finally:
                os.close(fd)

    def write_current(self, generation: int) -> None:
        """Make *generation* current: write ``CURRENT.tmp``, then rename it to ``CURRENT`` (atomically)."""
        line = f"{generation}\n".encode("ascii")
        replace_whole(self.path / "CURRENT", self.path / "CURRENT.tmp", lambda fd: write_all(fd, line))

    def current_is(self, generation: int) -> bool:
        """Whether CURRENT names *generation* (False if it cannot be read)."""
        try:
            return self.generation() == generation
        except (OSError, CorruptIndexError):
            return False

    def discard(self, generation: int) -> None:
        """Remove what a creation or compaction of *generation* that failed wrote (best effort)."""
        runs = [path for _, _, path in run_names(self.path, generation)]
        for path in (*(self.file(kind, generation) for kind in KINDS), *runs, self.path / "CURRENT.tmp"):
            with contextlib.suppress(OSError):
                path.unlink()

    def remove_stale(self, generation: int) -> None:
        """Remove the files of generations other than *generation* (a compaction's old one, or what one that
        died left) and a stale ``CURRENT.tmp``.  Readers that hold them open go on reading them."""
        for stale in self.path.iterdir():
            kind, _, number = stale.name.partition(".")
            if kind == "tables":  # a run file (:mod:`.runfiles`) of another generation, or one cut short
                number = number.split(".", 1)[0] if not stale.name.endswith(".tmp") else ""
                if number != str(generation):
                    with contextlib.suppress(FileNotFoundError):
                        stale.unlink()
            elif stale.name == "CURRENT.tmp" or (kind in KINDS and number.isdigit() and int(number) != generation):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()

    def create_index(self, metadata: Mapping[str, Any], created: float, sketch_bytes: int) -> None:
        """Create generation 1 (of *metadata*, *created* then, records with *sketch_bytes* sketches) and make it
        current; if that fails (a full disk), remove what was written."""
        try:
            fmt = format_for(self.design.n_tables)
            self.create(1, secrets.randbits(63), created, metadata, sketch_bytes, fmt)
            self.write_current(1)
        except BaseException:
            if not self.current_is(1):
                self.discard(1)
            raise

    def open_generation(self) -> tuple[int, dict[str, int]] | None:
        """Read CURRENT and open the files of its generation, all at once: ``(generation, fds)``, or None if
        there is no CURRENT.  If a compaction switched CURRENT in between (and removed the files it named), try
        again with the new one."""
        flags = os.O_RDONLY if self.readonly else os.O_RDWR | os.O_APPEND
        for attempt in range(_OPEN_ATTEMPTS):
            generation = self.generation()
            if generation is None:
                return None
            fds: dict[str, int] = {}
            try:
                for kind in KINDS:
                    fds[kind] = os.open(self.file(kind, generation), flags)
            except FileNotFoundError:
                close_all(fds)
                if self.generation() != generation:
                    continue  # a compaction switched to its new generation and removed this one
                missing = next(self.file(k, generation) for k in KINDS if k not in fds)
                raise CorruptIndexError(
                    f"{missing} is missing: the index {self.path} is incomplete, or its CURRENT is damaged "
                    f"({self.path / 'CURRENT'} names generation {generation})"
                ) from None
            except BaseException:
                close_all(fds)
                raise
            if attempt + 1 < _OPEN_ATTEMPTS and self.generation() != generation:
                close_all(fds)  # CURRENT moved on meanwhile: open the newer generation
                continue
            return generation, fds
        raise FileNotFoundError(
            errno.ENOENT, f"the index {self.path} was compacted {_OPEN_ATTEMPTS} times while being opened; try again"
        )

    def no_index(self) -> Exception:
        """The error of a read-only open where there is no CURRENT."""
        if not self.path.exists():
            return FileNotFoundError(f"no index at {self.path}")
        if self.path.is_dir() and {p.name for p in self.path.iterdir()} <= {"LOCK", "CURRENT.tmp"}:
            return FileNotFoundError(f"no index at {self.path} (none was created there, or its creation failed)")
        return CorruptIndexError(f"{self.path} is not a simhash-filter index (no CURRENT file)")
