"""The few operations on file descriptors the on-disk backend needs: whole writes and reads, a file replaced whole
or not at all, closing a set of files, syncing a directory, handing freed memory back."""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable, Mapping
from pathlib import Path


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of *data* to *fd* (``write(2)`` may write less)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def replace_whole(
    path: Path, tmp: Path, write: Callable[[int], object], *, sync: bool = True, mode: int = 0o644
) -> None:
    """Write *path* whole or not at all: *write* fills the file descriptor of *tmp* (made with *mode*, less the
    umask: an index's files 0o644, a user's output 0o666 as ``open()`` makes it), which then replaces *path*; with
    *sync*, the file and the rename are made durable first.  On an error *tmp* is removed and *path* is left as it
    was."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        write(fd)
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def pread(fd: int, size: int, offset: int) -> bytes:
    """*size* bytes at *offset* (fewer at the end of the file)."""
    data = os.pread(fd, size, offset)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def close_all(fds: Mapping[str, int]) -> None:
    """Close every file of *fds*, whatever fails."""
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make the entries of the directory *path* (a rename, a new file) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def release_freed_memory() -> None:
    """Hand the temporary arrays of a load back to the OS (glibc keeps freed blocks under 32 MB otherwise)."""
    with contextlib.suppress(AttributeError, OSError):  # not glibc: nothing to do
        ctypes.CDLL(None).malloc_trim(0)
