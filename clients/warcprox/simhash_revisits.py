"""A warcprox plugin: every HTML page warcprox records is checked and stored by ``simhash-filter serve``, and a
near-duplicate is written as a ``revisit`` record that points at the capture kept (its URL, its WARC-Date, its
payload digest), which pywb replays with the kept page's body.

    PYTHONPATH=clients/warcprox FILTER_URL=http://127.0.0.1:8750 \\
        warcprox --plugin simhash_revisits.NearDuplicateRevisits --dedup-db-file /dev/null -z -d warcs

Environment: ``FILTER_URL`` (default ``http://127.0.0.1:8750``), ``SIMHASH_SERVE_TOKEN`` (the service's token, if
it has one).  This file needs warcprox and the standard library only: it runs in warcprox's own environment.

How it fits warcprox's plugin interface: a plugin of ``CHAIN_POSITION = "early"`` runs first in warcprox's chain of
postfetch processors, before the WARC writer, one recorded URL at a time.  It sends the response as warcprox
recorded it (status line, headers, body as received) to the service as a WARC response record; on a near-duplicate
it sets ``recorded_url.dedup_info``, the field warcprox's own digest dedup sets, and warcprox's writer then writes a
revisit.  What the interface cannot do: warcprox writes every revisit with the ``identical-payload-digest`` profile
(its ``WarcRecordBuilder`` takes no profile), so the record says the bodies are identical where they are only near
-duplicates, and no header of the filter's own (distance, similarity) can be added; a profile and extra headers taken
from ``dedup_info`` would be needed in warcprox.  warcprox's own dedup loader runs after this plugin and overwrites
``dedup_info``: run with ``--dedup-db-file /dev/null`` (a byte-identical copy is a near-duplicate at distance 0).
"""

from __future__ import annotations

import json
import logging
import os
import urllib.request
import uuid
from urllib.parse import quote

import warcprox

__all__ = ["NearDuplicateRevisits"]

logger = logging.getLogger("simhash_revisits")
#: Captures remembered (URL -> the kept capture it stands for), at most; older ones are forgotten first.
REMEMBERED = 1_000_000


class NearDuplicateRevisits(warcprox.BaseStandardPostfetchProcessor):
    """Asks the service about each HTML response; a near-duplicate becomes a revisit of the capture kept."""

    CHAIN_POSITION = "early"

    def __init__(self, options: warcprox.Options = warcprox.Options(), controller: object = None) -> None:  # noqa: B008
        super().__init__(options=options)
        self.service = os.environ.get("FILTER_URL", "http://127.0.0.1:8750").rstrip("/")
        self.token = os.environ.get("SIMHASH_SERVE_TOKEN")
        #: URL -> (kept URL, its WARC-Date, its payload digest): the capture a page's revisit points at.
        self.kept: dict[str, tuple[bytes, bytes, object]] = {}

    def _process_url(self, recorded_url: object) -> None:
        if isinstance(recorded_url, warcprox.warcproxy.FailedUrl):
            return
        mimetype = (getattr(recorded_url, "mimetype", None) or "").lower()
        if not recorded_url.response_recorder or recorded_url.status != 200 or mimetype not in (
            "text/html", "application/xhtml+xml"):  # fmt: skip
            return
        url = recorded_url.url.decode("utf-8", "replace")
        date = recorded_url.timestamp.strftime("%Y-%m-%dT%H:%M:%SZ").encode("ascii")
        try:
            decision = self._decide(url, date, self._http(recorded_url))
        except Exception as exc:  # the service is down: the page is recorded as a response, as without the plugin
            logger.warning("simhash-filter serve did not decide %s: %s", url, exc)
            return
        if decision.get("duplicate_of") is None:
            self._remember(url, (recorded_url.url, date, recorded_url.payload_digest))
            return
        # a near-duplicate: a revisit of the capture kept, the root of the chain when this process recorded it
        target = self.kept.get(decision["duplicate_of"])
        if target is None:  # kept by another process or an earlier crawl: its URL only, replay takes the nearest
            recorded_url.dedup_info = {"url": decision["duplicate_of"].encode("utf-8"), "date": None}
            return
        kept_url, kept_date, kept_digest = target
        self._remember(url, target)
        recorded_url.dedup_info = {"url": kept_url, "date": kept_date}
        recorded_url.payload_digest = kept_digest  # what pywb looks the revisit's body up by

    def _remember(self, url: str, capture: tuple[bytes, bytes, object]) -> None:
        if len(self.kept) >= REMEMBERED:
            del self.kept[next(iter(self.kept))]
        self.kept[url] = capture

    @staticmethod
    def _http(recorded_url: object) -> bytes:
        tempfile = recorded_url.response_recorder.tempfile
        tempfile.seek(0)
        return tempfile.read()

    def _decide(self, url: str, date: bytes, http: bytes) -> dict:
        """The service's decision on the response, sent as one WARC response record (the service reads its charset,
        its Content-Encoding and chunks as it reads a WARC file)."""
        head = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{uuid.uuid4()}>\r\n"
                f"WARC-Date: {date.decode()}\r\nWARC-Target-URI: {url}\r\n"
                f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(http)}\r\n\r\n")  # fmt: skip
        headers = {"Content-Type": "application/warc"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(f"{self.service}/v1/pages?url={quote(url, safe='')}",
                                         data=head.encode("utf-8") + http + b"\r\n\r\n", headers=headers)  # fmt: skip
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read())
