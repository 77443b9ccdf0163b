"""The in-process backend (``memory://``), and the parts the on-disk store shares with it."""

from simhash_filter.index.backends.memory.backend import MemoryBackend

__all__ = ["MemoryBackend"]
