"""The connection to Redis: a client from a backend URI, the script sent (loaded again when the server lost it,
pipelined for batches), and the tries again after a connection error or a timeout."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar
from urllib.parse import urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, OutOfMemoryError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from simhash_filter.errors import StoreFullError
from simhash_filter.index.backends.redis.script import NOINDEX
from simhash_filter.index.backends.uri import redact_uri, uri_options

#: The errors after which a call is tried again (on a new connection).
CONNECTION_ERRORS = (RedisConnectionError, RedisTimeoutError)
#: redis-py options whose default differs here (seconds).
_DEFAULTS = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}
#: Tries again after a connection error or a timeout, and the first wait (seconds, doubled each time): the
#: defaults of the URI options ``retries`` and ``retry_backoff``.
DEFAULT_RETRIES, DEFAULT_BACKOFF = 2, 0.1

#: One script call: its KEYS and its ARGV after the header.
Call = tuple[list[Any], list[Any]]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Retries:
    """How every Redis call of an index is tried again after a connection error or a timeout (it must be
    idempotent): at most *retries* more times, after *backoff* seconds doubled each time, then the error is raised
    naming the index (*where*); *check_open* raises when the index was closed meanwhile."""

    retries: int = DEFAULT_RETRIES
    backoff: float = DEFAULT_BACKOFF
    where: str = "Redis"
    check_open: Callable[[], None] = lambda: None

    def failed(self, exc: BaseException, attempt: int) -> None:
        """Attempt number *attempt* (1 for the first) failed with *exc*: wait before the next one, or raise when
        it was the last."""
        self.check_open()
        if attempt > self.retries:
            raise type(exc)(f"{self.where}: {exc} (tried {attempt} times)") from exc
        time.sleep(self.backoff * 2 ** (attempt - 1))

    def call(self, func: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``func(*args, **kwargs)``, tried again after a connection error or a timeout."""
        attempt = 0
        while True:
            self.check_open()
            try:
                return func(*args, **kwargs)
            except CONNECTION_ERRORS as exc:
                attempt += 1
                self.failed(exc, attempt)
            except OutOfMemoryError as exc:
                raise StoreFullError(str(exc)) from exc


class IndexGone(Exception):
    """The script found no meta hash: the index is gone.  *replies*: those of the calls before."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__("the index is gone")
        self.replies = replies


def raise_reply(error: BaseException, replies_before: list[Any]) -> None:
    """Raise :class:`IndexGone` for the script's answer that the index is gone, :class:`StoreFullError` for Redis's
    that it is full, else *error*."""
    if isinstance(error, OutOfMemoryError):
        raise StoreFullError(str(error)) from error
    if NOINDEX in str(error):
        raise IndexGone(replies_before)
    raise error


class Opened(NamedTuple):
    """A client made from a URI: the client, where it points (no credentials), the backend's own options."""

    client: Any
    location: str
    options: dict[str, Any]


def _redis_options() -> set[str]:
    """Keyword arguments of ``redis.Redis`` that a URI may carry (``socket_timeout``, ``ssl_ca_certs``...)."""
    names = set(inspect.signature(redis.Redis.__init__).parameters) | {"timeout"}
    return names - {"self", "connection_pool", "retry", "decode_responses", "encoding", "encoding_errors"}


def client_from_uri(uri: str) -> Opened:
    """``redis://[[user]:password@]host:port/db?options`` (or ``rediss://``) as a redis-py client (a cluster
    client with ``cluster=1``) that does not try again itself, and the backend's own options, parsed."""
    parts = urlsplit(uri)
    if not parts.hostname:
        raise ValueError(f"a Redis backend needs a host: {redact_uri(uri)!r} (e.g. 'redis://127.0.0.1:6379/0')")
    kinds = {"prefix": str, "servers": str, "bucket_bits": int, "retries": int, "shards": int, "retry_backoff": float,
             "max_age": float, "cluster": bool}  # fmt: skip
    own, passed = uri_options(uri, parts.query, kinds)
    allowed = _redis_options()
    for name, _ in passed:
        if name not in allowed:
            known = ", ".join(kinds) + ", and redis-py's (socket_timeout, ...)"
            raise ValueError(f"unknown Redis backend option {name!r} in {redact_uri(uri)!r}; known: {known}")
    scheme = parts.scheme.lower()
    names = {name for name, _ in passed}
    url = urlunsplit((scheme, parts.netloc, parts.path, urlencode(passed), ""))
    kwargs: dict[str, Any] = {name: value for name, value in _DEFAULTS.items() if name not in names}
    kwargs["retry"] = Retry(NoBackoff(), 0)  # the backend tries again itself (run_with_retries)
    if own.pop("cluster", False):
        from redis.cluster import RedisCluster

        client: Any = RedisCluster.from_url(url, **kwargs)
    else:
        client = redis.Redis.from_url(url, **kwargs)
    location = urlunsplit((scheme, parts.hostname or "", parts.path, "", ""))
    if parts.port:
        location = urlunsplit((scheme, f"{parts.hostname}:{parts.port}", parts.path, "", ""))
    return Opened(client, location, own)


class ScriptRunner:
    """Sends one script's calls to *client*: by ``EVALSHA``, loading the script again when the server lost it (a
    ``SCRIPT FLUSH``, a restart, a failover); a batch is pipelined, but in a cluster (redis-py refuses
    ``EVALSHA`` in cluster pipelines)."""

    def __init__(self, client: Any, script: bytes) -> None:
        self._client = client
        self._script = script
        self._cluster = not isinstance(client, redis.Redis)
        self._sha = client.script_load(script)

    def send(self, header: list[Any], calls: list[Call]) -> list[Any]:
        """Send the script calls; return their replies in order (raises :class:`IndexGone` with the replies
        before, if the index is gone)."""
        if len(calls) == 1 or self._cluster:
            replies: list[Any] = []
            for call_keys, args in calls:
                try:
                    replies.append(self._evalsha(call_keys, header + args))
                except IndexGone as gone:
                    gone.replies = replies
                    raise
            return replies
        pipe = self._client.pipeline(transaction=False)
        for call_keys, args in calls:
            pipe.evalsha(self._sha, len(call_keys), *call_keys, *header, *args)
        results: list[Any] = pipe.execute(raise_on_error=False)
        for i, result in enumerate(results):
            if isinstance(result, NoScriptError):
                self._sha = self._client.script_load(self._script)
                return results[:i] + self.send(header, calls[i:])
            if isinstance(result, BaseException):
                raise_reply(result, results[:i])
        return results

    def _evalsha(self, call_keys: list[Any], args: list[Any]) -> Any:
        try:
            try:
                return self._client.evalsha(self._sha, len(call_keys), *call_keys, *args)
            except NoScriptError:
                self._sha = self._client.script_load(self._script)
                return self._client.evalsha(self._sha, len(call_keys), *call_keys, *args)
        except ResponseError as exc:
            raise_reply(exc, [])
            raise  # pragma: no cover - raise_reply always raises


def run_with_retries(
    send: Callable[[list[Any], list[Call]], list[Any]],
    header: list[Any],
    calls: list[Call],
    *,
    retry_at: int,
    retries: Retries,
    recreate: Callable[[], None],
) -> list[Any]:
    """The replies of *calls*, sent by *send*: after a connection error or a timeout, the calls not answered yet
    are sent again (``header[retry_at]`` set to ``"1"``: an earlier attempt may have run, and the script then
    never adds a page twice) as *retries* says.  If the index is gone, *recreate* makes it again and the rest is
    sent to it."""
    replies: list[Any] = []
    attempt = 0
    while len(replies) < len(calls):
        header[retry_at] = "1" if attempt else "0"
        try:
            replies.extend(send(header, calls[len(replies) :]))
        except CONNECTION_ERRORS as exc:
            attempt += 1
            retries.failed(exc, attempt)
        except IndexGone as gone:
            replies.extend(gone.replies)
            recreate()
    return replies
