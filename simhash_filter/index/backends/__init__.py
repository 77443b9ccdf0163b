"""Index backends, chosen by URI scheme.

``BACKENDS_BASE`` maps a scheme to the dotted path of a :class:`Backend` subclass; callers merge
their own table over it (as Scrapy merges ``FEED_STORAGES`` over ``FEED_STORAGES_BASE``), where
``None`` disables a scheme.  Classes are imported only when a URI asks for them.

A URI may carry credentials: show one only through :func:`redact_uri` (:mod:`~simhash_filter.index.backends.uri`)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from simhash_filter.errors import IndexFullError, MetadataMismatchError, StoreError
from simhash_filter.index.backends.base import Backend, Candidate, check_metadata
from simhash_filter.index.backends.uri import error_message, redact_text, redact_uri, uri_scheme, with_uri_option

if TYPE_CHECKING:
    from simhash_filter.index.tables import TableDesign

__all__ = [
    "BACKENDS_BASE",
    "Backend",
    "Candidate",
    "IndexFullError",
    "MetadataMismatchError",
    "backend_registry",
    "check_metadata",
    "error_message",
    "open_backend",
    "open_errors",
    "redact_text",
    "redact_uri",
    "store_errors",
    "uri_scheme",
    "with_uri_option",
]

#: Built-in backends by URI scheme.
BACKENDS_BASE: dict[str, str] = {
    "file": "simhash_filter.index.backends.file.FileBackend",
    "memory": "simhash_filter.index.backends.memory.MemoryBackend",
    "redis": "simhash_filter.index.backends.redis.sharded.ShardedRedisBackend",  # one server, or sharded
    "rediss": "simhash_filter.index.backends.redis.sharded.ShardedRedisBackend",
}


def store_errors() -> tuple[type[BaseException], ...]:
    """The exception types by which a store reports that it cannot serve (not a bug): unreachable or
    refusing the connection (``OSError``, Redis errors), locked by another process, damaged, or holding
    another model's fingerprints.  Redis's are among them once ``redis`` is imported."""
    errors: list[type[BaseException]] = [OSError, StoreError]
    redis_exceptions = sys.modules.get("redis.exceptions")
    if redis_exceptions is not None:
        errors.append(redis_exceptions.RedisError)
    return tuple(errors)


def open_errors() -> tuple[type[BaseException], ...]:
    """:func:`store_errors` and the errors of a bad URI (``ValueError``; ``ImportError``: a backend whose
    package is missing), by which opening a backend fails."""
    return (ValueError, ImportError, *store_errors())


def backend_registry(backends: Mapping[str, str | type[Backend] | None] | None = None) -> dict[str, Any]:
    """``BACKENDS_BASE`` updated with *backends*; entries set to ``None`` are removed."""
    merged: dict[str, Any] = {**BACKENDS_BASE, **{s.lower(): v for s, v in (backends or {}).items()}}
    return {scheme: spec for scheme, spec in merged.items() if spec is not None}


def _load(spec: str | type[Backend]) -> type[Backend]:
    if isinstance(spec, str):
        module_name, _, attr = spec.rpartition(".")
        if not module_name:
            raise ValueError(f"backend {spec!r} is not a dotted path like 'package.module.Class'")
        obj = getattr(importlib.import_module(module_name), attr)
    else:
        obj = spec
    if not (isinstance(obj, type) and issubclass(obj, Backend)):
        raise TypeError(f"backend {spec!r} is not a subclass of simhash_filter.index.backends.Backend")
    return obj


def open_backend(
    uri: str,
    *,
    k: int,
    design: TableDesign,
    metadata: Mapping[str, Any] | None = None,
    backends: Mapping[str, str | type[Backend] | None] | None = None,
) -> Backend:
    """Open the backend named by *uri* for distances up to *k* with the table *design*.

    *backends* is merged over :data:`BACKENDS_BASE` (``None`` disables a scheme)."""
    scheme = uri_scheme(uri)
    registry = backend_registry(backends)
    spec = registry.get(scheme)
    if spec is None:
        known = ", ".join(f"{s}://" for s in sorted(registry)) or "none"
        raise ValueError(f"unknown index backend scheme {scheme!r} in {redact_uri(uri)!r}; known schemes: {known}")
    return _load(spec).from_uri(uri, k=k, design=design, metadata=metadata)
