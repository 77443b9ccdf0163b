"""The in-process backend (``memory://``): :class:`MemoryBackend` over the bucketed runs of :mod:`.runs`."""

from simhash_filter.index.backends.memory.backend import MemoryBackend

__all__ = ["MemoryBackend"]
