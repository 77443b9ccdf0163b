"""Index backends, chosen by URI scheme.

``BACKENDS_BASE`` maps a scheme to the dotted path of a :class:`Backend` subclass; callers merge
their own table over it (as Scrapy merges ``FEED_STORAGES`` over ``FEED_STORAGES_BASE``), where
``None`` disables a scheme.  Classes are imported only when a URI asks for them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlsplit

from simhash_filter.backends.base import Backend, MetadataMismatchError, check_metadata

if TYPE_CHECKING:
    from simhash_filter.index import TableDesign

__all__ = [
    "BACKENDS_BASE",
    "Backend",
    "MetadataMismatchError",
    "backend_registry",
    "check_metadata",
    "open_backend",
    "uri_scheme",
    "with_uri_option",
]

#: Built-in backends by URI scheme.
BACKENDS_BASE: dict[str, str] = {
    "file": "simhash_filter.backends.file.FileBackend",
    "memory": "simhash_filter.backends.memory.MemoryBackend",
    "redis": "simhash_filter.backends.redis.RedisBackend",
    "rediss": "simhash_filter.backends.redis.RedisBackend",
}


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
        raise TypeError(f"backend {spec!r} is not a subclass of simhash_filter.backends.Backend")
    return obj


def uri_scheme(uri: str) -> str:
    """The scheme of a backend URI, lower-cased: ``"memory"`` for ``"memory://"``, ``"file"`` for a plain path."""
    if not isinstance(uri, str):
        raise TypeError(f"a backend URI must be a str, got {type(uri).__name__}")
    if not uri.strip():
        raise ValueError("empty backend URI; expected e.g. 'memory://', 'file:///path/to/index' or a directory path")
    scheme, sep, _ = uri.partition("://")
    if not sep:
        return "file"  # a directory path
    if not scheme:
        raise ValueError(f"backend URI {uri!r} has no scheme; expected e.g. 'memory://'")
    return scheme.lower()


def with_uri_option(uri: str, name: str, value: str) -> str:
    """*uri* with the query option ``name=value`` added, unless it has that option already.

    A plain directory path becomes a ``file://`` URI, which can carry options.
    """
    if "://" not in uri:
        uri = "file://" + quote(uri)
    if any(key == name for key, _ in parse_qsl(urlsplit(uri).query, keep_blank_values=True)):
        return uri
    return uri + ("&" if "?" in uri else "?") + f"{name}={quote(value)}"


def open_backend(
    uri: str,
    *,
    k: int,
    design: TableDesign,
    metadata: Mapping[str, Any] | None = None,
    backends: Mapping[str, str | type[Backend] | None] | None = None,
) -> Backend:
    """Open the backend named by *uri* for distances up to *k* with the table *design*.

    *backends* is merged over :data:`BACKENDS_BASE` (``None`` disables a scheme).
    """
    scheme = uri_scheme(uri)
    registry = backend_registry(backends)
    spec = registry.get(scheme)
    if spec is None:
        known = ", ".join(f"{s}://" for s in sorted(registry)) or "none"
        raise ValueError(f"unknown index backend scheme {scheme!r} in {uri!r}; known schemes: {known}")
    return _load(spec).from_uri(uri, k=k, design=design, metadata=metadata)
