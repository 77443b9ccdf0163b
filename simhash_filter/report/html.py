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
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="simhash-filter report">
<link rel="icon" href="data:,">
<title>{heading}</title>
<style>
{style}</style>
</head>
<body>
<header id="top">
<div class="top-row">
<h1 id="title">{heading}</h1>
<div id="labels-bar" class="labels-bar">
<span id="labels-count">0 labelled pairs</span>
<button type="button" id="labels-export" disabled>Export labels.jsonl</button>
</div>
</div>
<dl id="meta" class="meta"></dl>
<nav class="sections">
<a href="#summary">Overview</a> <a href="#clusters">Clusters</a>
<a href="#near-misses" id="nav-near-misses">Near misses</a> <a href="#hosts">Hosts</a> <a href="#skipped">Skipped</a>
</nav>
</header>
<noscript><p class="error">This report needs JavaScript to show its data.</p></noscript>
<div id="error" class="error" role="alert" hidden></div>
<main>
<section id="summary">
<h2>Overview</h2>
<div id="summary-numbers" class="cards"></div>
<ul id="notes" class="notes"></ul>
<div class="charts">
{_charts(charts)}
</div>
</section>
<section id="clusters">
<h2>Clusters of near-duplicates</h2>
<p class="hint">Each cluster is a kept page and the pages judged its near-duplicates, largest first.
Click a cluster to list its members.</p>
<div class="toolbar">
<input type="search" id="clusters-filter" placeholder="Filter by URL or host of any page" aria-label="Filter clusters">
<span class="count" id="clusters-count"></span>
</div>
<div class="pager" id="clusters-pager-top"></div>
<div id="clusters-list" class="cluster-list"></div>
<div class="pager" id="clusters-pager"></div>
</section>
<section id="near-misses">
<h2>Near misses</h2>
<p class="hint">Kept pages that came close to an earlier page without being flagged as near-duplicates.</p>
<div class="toolbar"><span class="count" id="near-misses-count"></span></div>
<div class="table-wrap"><table id="near-misses-table" class="data">
<thead><tr><th>Page (kept)</th><th>Host</th><th>Nearest earlier page</th><th class="num">Distance</th>
<th class="num">Similarity</th><th>Label</th><th></th></tr></thead>
<tbody></tbody></table></div>
<div class="pager" id="near-misses-pager"></div>
</section>
<section id="hosts">
<h2>Hosts</h2>
<div class="toolbar">
<input type="search" id="hosts-filter" placeholder="Filter hosts" aria-label="Filter hosts">
<span class="count" id="hosts-count"></span>
</div>
<div class="table-wrap"><table id="hosts-table" class="data sortable">
<thead><tr></tr></thead><tbody></tbody></table></div>
<div class="pager" id="hosts-pager"></div>
</section>
<section id="skipped">
<h2>Skipped pages</h2>
<p class="hint">Pages that were not fingerprinted, and why.</p>
<table id="skipped-reasons" class="data compact"><thead><tr><th>Reason</th><th class="num">Pages</th>
<th class="num">Share of skipped</th></tr></thead><tbody></tbody></table>
<div class="toolbar">
<label>Reason <select id="skipped-reason"><option value="">all reasons</option></select></label>
<span class="count" id="skipped-count"></span>
</div>
<div class="table-wrap"><table id="skipped-table" class="data">
<thead><tr><th>Page</th><th>Host</th><th>Reason</th></tr></thead><tbody></tbody></table></div>
<div class="pager" id="skipped-pager"></div>
</section>
</main>
<section id="pair" class="pair-view" hidden aria-labelledby="pair-title">
<div class="pair-bar">
<button type="button" id="pair-close" class="close" title="Close (Esc)">&larr; Back to the report</button>
<h2 id="pair-title" tabindex="-1">Pair</h2>
<span class="pair-nav">
<button type="button" id="pair-prev" title="Previous pair (&larr;)">&lsaquo; Previous</button>
<span id="pair-position" class="count"></span>
<button type="button" id="pair-next" title="Next pair (&rarr;)">Next &rsaquo;</button>
</span>
<span class="pair-label" role="group" aria-label="Label this pair">
<span id="pair-label-state" class="label-state"></span>
<button type="button" id="label-duplicate" class="mark dup" title="Mark as near-duplicate (1)">near-duplicate</button>
<button type="button" id="label-distinct" class="mark distinct" title="Mark as distinct (2)">distinct</button>
<button type="button" id="label-clear" class="mark" title="Clear the label (0)">clear</button>
<span id="pair-labels-count" class="count"></span>
<button type="button" id="pair-labels-export" title="Download the labels as labels.jsonl" disabled>Export</button>
</span>
</div>
<div id="pair-body" class="pair-body"></div>
</section>
{data}<script>
{script}</script>
</body>
</html>
"""
