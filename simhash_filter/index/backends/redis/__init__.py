"""Redis backend (``redis://``, ``rediss://``): one index shared by many processes and machines, every call one
server-side Lua script (probe, verify and add in one atomic step; batches pipelined).  The keys, the layout of
the entries and records (:mod:`.layout`), the options and what a lost connection or a restarted server does:
docs/stores.md ("The Redis index")."""

from __future__ import annotations

try:
    import redis  # noqa: F401 - the extra's presence, checked once with the way to install it
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(
        "the redis:// index backend needs the redis package: pip install 'simhash-filter[redis]'"
    ) from exc

from simhash_filter.index.backends.redis.backend import RedisBackend

__all__ = ["RedisBackend"]
