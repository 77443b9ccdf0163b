"""A page given by its URL (``compare https://a.example/x https://b.example/x``): one plain GET, the bytes given
to the fingerprinter with the charset of the ``Content-Type`` header, as a crawl's first request would see them.
"""

from __future__ import annotations

from dataclasses import dataclass

from simhash_filter import __version__

__all__ = ["FETCH_TIMEOUT", "USER_AGENT", "FetchError", "Fetched", "fetch", "is_url"]

#: Seconds a fetch may wait for the server (connecting, then each read).
FETCH_TIMEOUT = 30.0
#: The User-Agent of a fetch: the tool and its version, so a site's owner sees who asked.
USER_AGENT = f"simhash-filter/{__version__} (+compare)"


class FetchError(OSError):
    """A page that could not be fetched; the message is one line that says why."""


@dataclass(frozen=True)
class Fetched:
    """A fetched page: its first bytes (up to the cap) and the charset its ``Content-Type`` names, if any."""

    body: bytes
    charset: str | None


def is_url(arg: str) -> bool:
    """Whether a command-line argument is an http(s) URL rather than a file name."""
    return arg.lower().startswith(("http://", "https://"))


def fetch(url: str, max_bytes: int, timeout: float = FETCH_TIMEOUT) -> Fetched:
    """GET *url* and read at most *max_bytes* of its body (a huge page costs no more than the work cap);
    :class:`FetchError` for an HTTP error status, an unreachable host, a timeout or a cut connection."""
    import urllib.error  # on first use: every command imports this module, only ``compare URL`` fetches
    import urllib.request

    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept": "text/html,*/*;q=0.5"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(max_bytes)
            return Fetched(body, response.headers.get_content_charset())
    except urllib.error.HTTPError as exc:
        raise FetchError(f"cannot fetch: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise FetchError(f"cannot fetch: {_reason(exc.reason)}") from None
    except TimeoutError:
        raise FetchError(f"cannot fetch: no answer within {timeout:g} s") from None
    except (OSError, ValueError) as exc:  # a connection reset mid-body, a malformed URL or status line
        raise FetchError(f"cannot fetch: {exc or type(exc).__name__}") from None


def _reason(reason: object) -> str:
    """urllib's reason for a failed request, on one line (a timeout said in words)."""
    if isinstance(reason, TimeoutError):
        return "no answer in time"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return " ".join(str(reason).split()) or type(reason).__name__
