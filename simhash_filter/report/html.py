"""The report as one self-contained HTML file: the data compressed in inert script blocks (decoded by
``report.js``), the assets and charts inlined, and a Content-Security-Policy that keeps it off the network.  The
same data gives the same bytes.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from collections.abc import Mapping, Sequence
from importlib.resources import files
from string import Template
from typing import Any

__all__ = ["CSP", "Encoded", "encode", "render"]

#: Nothing may be fetched: inline style and script only, images only as data: URLs (the favicon below).
#: The labels' export is a download of a blob: URL, which no fetch directive governs.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

_DATA_ID = "simhash-data"
_CHUNK_ID = "simhash-chunk-{}"
_SCRIPT_END = re.compile(r"</script", re.IGNORECASE)
_STYLE_END = re.compile(r"</style", re.IGNORECASE)


def _asset(name: str) -> str:
    """The text of one of the package's report assets (``report.js``, ``report.css``)."""
    return (files("simhash_filter.report") / "assets" / name).read_text(encoding="utf-8")


class Encoded(str):
    """A value already encoded by :func:`encode` (a report's chunks are encoded as they are made, so that only
    their compressed text is kept)."""


def encode(value: Any) -> Encoded:
    """Compact JSON of ``value``, gzip-compressed without a timestamp, as base64 text."""
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    return Encoded(base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii"))


def _data_block(element_id: str, value: Any) -> str:
    """An inert script element carrying ``value`` encoded (never run: its type is not JavaScript)."""
    text = value if isinstance(value, Encoded) else encode(value)
    return f'<script type="application/octet-stream" id="{element_id}">{text}</script>\n'


def _checked(text: str, pattern: re.Pattern[str], what: str) -> str:
    """``text`` unchanged, or ValueError when it holds an end tag that would close its element early."""
    if pattern.search(text):
        raise ValueError(f"{what} contains {pattern.pattern!r}, which would end its element in the HTML")
    return text


def _chart_id(name: str) -> str:
    """The element id of a chart other than the distance histogram: ``chart-`` and the name's safe letters."""
    return "chart-" + (re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-") or "unnamed")


def _charts(charts: Mapping[str, str]) -> str:
    """The charts' markup: the distance histogram in ``#histogram``, any others after it."""
    parts = [f'<div id="histogram" class="chart">{_checked(charts.get("distance", ""), _SCRIPT_END, "chart")}</div>']
    for name, svg in charts.items():
        if name != "distance":
            label = html.escape(name)
            parts.append(
                f'<div id="{_chart_id(name)}" class="chart" aria-label="{label}">'
                f"{_checked(svg, _SCRIPT_END, f'chart {name!r}')}</div>"
            )
    return "\n".join(parts)


def render(
    summary: dict[str, Any], chunks: Sequence[dict[str, Any] | Encoded], charts: Mapping[str, str], *, title: str
) -> str:
    """The whole report page for ``summary`` and its pair ``chunks`` (dicts, or :class:`Encoded` already), with
    the SVG ``charts`` inlined."""
    script = _checked(_asset("report.js"), _SCRIPT_END, "report.js")
    style = _checked(_asset("report.css"), _STYLE_END, "report.css")
    heading = html.escape(title)
    data = _data_block(_DATA_ID, summary) + "".join(
        _data_block(_CHUNK_ID.format(i), chunk) for i, chunk in enumerate(chunks)
    )
    page = Template(_asset("report.html"))
    return page.substitute(csp=CSP, heading=heading, style=style, charts=_charts(charts), data=data, script=script)
