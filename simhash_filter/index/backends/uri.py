"""Backend URIs: their scheme, their options, and how to show one without its secrets.

A URI may carry credentials (``redis://user:password@host``): show one only through :func:`redact_uri`
(an error message that may quote it through :func:`error_message`)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

#: What a masked secret is shown as.
MASK = "***"
#: Query options whose values are secrets (``password=``, ``ssl_password=``, ``token=``...).
_SECRET_OPTION = re.compile(r"pass|secret|token|credential|auth|api_?key|access_?key", re.IGNORECASE)
#: Bare secrets shorter than this are not searched for in messages (they would mask ordinary words).
_MIN_BARE_SECRET = 4


def _split_uri(uri: str) -> tuple[str, str | None, str, str, str] | None:
    """``(scheme://, userinfo or None, host and path, query, fragment)``, or None for a plain path.

    The userinfo ends at the last ``@`` before the query, so that a password holding an unquoted ``/``,
    ``#`` or ``@`` is still found."""
    scheme, sep, rest = uri.partition("://")
    if not sep or "/" in scheme:
        return None
    query_at = rest.find("?")
    at = rest.rfind("@", 0, len(rest) if query_at < 0 else query_at)
    userinfo = rest[:at] if at >= 0 else None
    rest = rest[at + 1 :]
    rest, hash_, fragment = rest.partition("#")
    rest, question, query = rest.partition("?")
    return scheme + sep, userinfo, rest, question + query, hash_ + fragment


def redact_uri(uri: str) -> str:
    """*uri* fit to show: the password of ``user:password@`` and the values of secret query options
    (``password=``, ``ssl_password=``, ``token=``...) masked as ``***``; the user name and the rest kept.

    ``redis://alice:pw@host:6379/0?prefix=site`` → ``redis://alice:***@host:6379/0?prefix=site``.  A plain
    directory path is returned as it is."""
    parts = _split_uri(uri) if isinstance(uri, str) else None
    if parts is None:
        return uri if isinstance(uri, str) else repr(uri)
    scheme, userinfo, location, query, fragment = parts
    if userinfo is not None:
        user, colon, _ = userinfo.partition(":")
        location = f"{user}:{MASK}@{location}" if colon else f"{user}@{location}"
    if query:
        query = "?" + "&".join(_redact_option(option) for option in query[1:].split("&"))
    return f"{scheme}{location}{query}{fragment}"


def _is_secret_option(name: str) -> bool:
    return _SECRET_OPTION.search(unquote(name)) is not None


def _redact_option(option: str) -> str:
    name, eq, _ = option.partition("=")
    return f"{name}={MASK}" if eq and _is_secret_option(name) else option


def _secrets(uri: str) -> list[str]:
    """The secrets written in *uri*: its password and the values of its secret options (raw and decoded)."""
    parts = _split_uri(uri) if isinstance(uri, str) else None
    if parts is None:
        return []
    _, userinfo, _, query, _ = parts
    values = [userinfo.partition(":")[2]] if userinfo is not None else []
    for option in query[1:].split("&"):
        name, eq, value = option.partition("=")
        if eq and _is_secret_option(name):
            values.append(value)
    found = {v for value in values for v in (value, unquote(value)) if v}
    return sorted(found, key=len, reverse=True)


def redact_text(text: str, uri: str) -> str:
    """*text* (a message, say of an exception) with *uri* shown as :func:`redact_uri` shows it, and the
    secrets written in *uri* masked wherever else they appear (those of at least 4 characters)."""
    text = text.replace(uri, redact_uri(uri))
    for secret in _secrets(uri):
        if len(secret) >= _MIN_BARE_SECRET:
            text = text.replace(secret, MASK)
    return text


#: Redis's answers to a client that gave no password where one is needed (RESP3's ``HELLO``, then ``NOAUTH``), and
#: the plain words said instead.
_NO_PASSWORD = ("HELLO must be called with the client already authenticated", "NOAUTH", "Authentication required")
NO_PASSWORD_MESSAGE = (
    "Redis asks for a password and the URI gives none: put it in the URI, redis://:PASSWORD@HOST:PORT/DB "
    "(or redis://USER:PASSWORD@... for an ACL user)"
)


def error_message(exc: BaseException, uri: str | None = None) -> str:
    """The message of *exc* on one line (its type's name if it has none), with *uri* and its secrets
    masked (:func:`redact_text`): fit for a one-line error or a log line.  Redis's answer to a missing
    password (redis-py's ``HELLO must be called ...``) is said plainly (:data:`NO_PASSWORD_MESSAGE`)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if text.startswith(_NO_PASSWORD):
        return NO_PASSWORD_MESSAGE
    return redact_text(text, uri) if uri else text


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
        raise ValueError(f"backend URI {redact_uri(uri)!r} has no scheme; expected e.g. 'memory://'")
    return scheme.lower()


def with_uri_option(uri: str, name: str, value: str) -> str:
    """*uri* with the query option ``name=value`` added, unless it has that option already.

    A plain directory path becomes a ``file://`` URI, which can carry options."""
    if "://" not in uri:
        uri = "file://" + quote(uri)
    if any(key == name for key, _ in parse_qsl(urlsplit(uri).query, keep_blank_values=True)):
        return uri
    return uri + ("&" if "?" in uri else "?") + f"{name}={quote(value)}"


#: The values of a true-or-false option.
_BOOLS = {**dict.fromkeys(("1", "true", "yes", "on"), True), **dict.fromkeys(("0", "false", "no", "off", ""), False)}
_KINDS = {int: "an integer", float: "a number", bool: "true or false"}


def uri_options(uri: str, query: str, kinds: dict[str, type]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The options of *query* (the query of *uri*) named in *kinds*, each as its kind (``int``, ``float``, ``str``
    or ``bool``: :data:`_BOOLS`), and the others, in order; a value of the wrong kind is a ``ValueError`` naming the
    option and the URI (its secrets masked)."""
    known: dict[str, Any] = {}
    others = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        kind = kinds.get(name)
        if kind is None:
            others.append((name, value))
            continue
        try:
            known[name] = _BOOLS[value.lower()] if kind is bool else kind(value)
        except (KeyError, ValueError):
            what = _KINDS.get(kind, kind.__name__)
            raise ValueError(f"option {name} must be {what}, got {value!r} in {redact_uri(uri)!r}") from None
    return known, others


def no_other_options(uri: str, others: list[tuple[str, str]], store: str) -> None:
    """Raise the ``ValueError`` of an option that *store*'s URIs do not take, if *others* holds one."""
    if others:
        raise ValueError(f"unknown {store} backend option {others[0][0]!r} in {redact_uri(uri)!r}")
