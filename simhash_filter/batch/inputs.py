"""Which files a batch run reads, one rule for ``simhash-filter dedup`` and the Spark job: a file named is read
whatever its name (WARC when it ends with ``.warc`` or ``.warc.gz``, any case, else JSON Lines); a directory gives
its files of :data:`WARC_SUFFIXES` and :data:`JSONL_SUFFIXES` at any depth, except under a name that starts with
``.`` or ``_`` (Hadoop's rule) and the run's output; a glob gives what it matches.  The files are read once each,
sorted by path (the order the Spark job numbers pages in).
"""

from __future__ import annotations

import errno
import glob
import os
from collections.abc import Iterable, Sequence

__all__ = [
    "GZIP_MAGIC",
    "JSONL",
    "JSONL_SUFFIXES",
    "WARC",
    "WARC_SUFFIXES",
    "input_files",
    "is_glob",
    "is_input_name",
    "kind",
    "same_file",
]

#: WARC files (compared in lower case).
WARC_SUFFIXES = (".warc", ".warc.gz")
#: JSON Lines files taken from a directory (compared in lower case).
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".json.gz")
#: The two kinds of input file.
WARC, JSONL = "warc", "jsonl"
#: The first bytes of a gzip stream.
GZIP_MAGIC = b"\x1f\x8b"


def kind(name: str) -> str:
    """:data:`WARC` for a name ending with ``.warc`` or ``.warc.gz`` (any case), else :data:`JSONL`."""
    return WARC if name.lower().endswith(WARC_SUFFIXES) else JSONL


def is_glob(path: str) -> bool:
    return "*" in path or "?" in path


def is_input_name(relative: str) -> bool:
    """Whether a directory takes the file at ``relative`` (its path under the directory, ``/``-separated) as
    input: a JSON Lines or WARC name, with no part that starts with ``.`` or ``_``."""
    parts = relative.replace(os.sep, "/").split("/")
    if any(part.startswith((".", "_")) for part in parts):
        return False
    return parts[-1].lower().endswith(WARC_SUFFIXES + JSONL_SUFFIXES)


def _files_under(directory: str) -> list[str]:
    found = []
    for parent, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in names:
            path = os.path.join(parent, name)
            if is_input_name(os.path.relpath(path, directory)):
                found.append(path)
    return found


def same_file(a: str, b: str) -> bool:
    """Whether paths *a* and *b* name one file (through links too)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def input_files(paths: Sequence[str], *, exclude: Iterable[str | None] = ()) -> list[str]:
    """The local files the inputs ``paths`` name (the module's rule), once each, sorted by absolute path; those of
    ``exclude`` a directory or a glob gives are left out.  Raises :class:`FileNotFoundError` naming an input that
    gives no file."""
    excluded = [path for path in exclude if path and path != "-" and os.path.exists(path)]

    def kept(path: str) -> bool:
        return not any(same_file(path, other) for other in excluded)

    found: dict[str, str] = {}  # absolute path -> the name it is read under
    for given in paths:
        if os.path.isdir(given):
            files = [path for path in _files_under(given) if kept(path)]
            if not files:
                raise FileNotFoundError(errno.ENOENT, "no .jsonl or .warc files in this directory", given)
        elif os.path.exists(given):
            files = [given]
        elif not is_glob(given):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), given)
        else:
            files = []
            for match in glob.glob(given, recursive=True):
                files.extend(_files_under(match) if os.path.isdir(match) else [match])
            files = [path for path in files if kept(path)]
            if not files:
                raise FileNotFoundError(errno.ENOENT, "no files match", given)
        for path in files:
            found.setdefault(os.path.abspath(path), path)
    return [found[key] for key in sorted(found)]

