"""Notes (:meth:`~simhash_filter.index.backends.base.Backend.notes`): counters kept in ``notes.json`` in the
index's directory, replaced atomically on each change."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from simhash_filter.index.backends.file.osfiles import replace_whole, write_all


class NotesFile:
    """``notes.json`` in the directory *path*, for :class:`~simhash_filter.index.backends.file.FileBackend`
    (*readonly*: never written; *sync*: each change synced, and the directory after it).  The caller serialises
    the writes."""

    NOTES_FILE = "notes.json"

    def __init__(self, path: Path, *, readonly: bool, sync: bool) -> None:
        self.path = path
        self.readonly = readonly
        self.sync = sync

    def read(self) -> dict[str, int]:
        """The counters of ``notes.json`` (none when it is missing; a damaged file counts as none, with its
        name in the log of the caller's next write, which replaces it)."""
        try:
            data = json.loads((self.path / self.NOTES_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)}

    def add(self, increments: Mapping[str, int]) -> dict[str, int]:
        """Add to the counters and write ``notes.json`` anew (a temporary file renamed over it: a crash leaves
        the old file or the new one)."""
        notes = self.read()
        if not increments:
            return notes
        if self.readonly:
            raise ValueError("the index was opened read-only: its notes cannot change")
        for key, n in increments.items():
            notes[key] = notes.get(key, 0) + int(n)
        target = self.path / self.NOTES_FILE
        data = json.dumps(notes, sort_keys=True, separators=(",", ":")).encode("utf-8")
        replace_whole(target, target.with_name(f".{self.NOTES_FILE}.{os.getpid()}.tmp"), lambda fd: write_all(fd, data),
                      sync=self.sync)  # fmt: skip
        return notes
