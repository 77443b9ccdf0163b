"""The in-process backend (``memory://``): :class:`MemoryBackend`, and the parts the on-disk store shares with it:
the bounded tables and their engines (:mod:`.tables`, over the bucketed runs of :mod:`.runs`), the rows' columns
(:mod:`.rows`) and the base of both stores (:mod:`.store`)."""

from simhash_filter.index.backends.memory.backend import MemoryBackend

__all__ = ["MemoryBackend"]
