"""Plots as SVG of our own, no dependencies: a bar chart and a line chart, each a standalone ``<svg>`` element
(accessible, a tooltip on every bar and point, no ``id`` attributes, so that charts can be stacked), the same bytes
for the same arguments.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence

__all__ = ["bar_chart", "line_chart", "stack"]

SVG_NS = "http://www.w3.org/2000/svg"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
#: Bars, and bars drawn highlighted.
BAR = "#4c78a8"
BAR_HIGHLIGHT = "#e45756"
#: Series colours, in order (distinguishable with the common kinds of colour blindness).
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")
AXIS, GRID, TEXT, MUTED = "#555555", "#e3e3e3", "#222222", "#666666"
#: An estimate of the width of one character of the tick and legend labels (11 px text), for the layout.
CHAR_WIDTH = 6.4
_TITLE_ROW, _LEGEND_ROW = 24, 18
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ROOT_SIZE = re.compile(r'^<svg\b[^>]*?\swidth="(\d+)" height="(\d+)"')


def _esc(text: object) -> str:
    """``text`` for XML character data or a quoted attribute value."""
    s = _XML_ILLEGAL.sub("\ufffd", str(text))
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace('"', "&quot;").replace("'", "&#39;")


def _c(v: float) -> str:
    """A coordinate: one decimal, never ``-0.0``."""
    return f"{round(v, 1) + 0.0:.1f}"


def _value(v: float) -> str:
    """A value in a tooltip: an integer as one, else at most three decimals."""
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    text = f"{v:.3f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else f"{v:.3g}"


def _finite(v: float | None) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _nice_ticks(lo: float, hi: float, max_ticks: int = 5, *, integer: bool = False) -> tuple[list[float], int]:
    """Round tick values covering [lo, hi] (about ``max_ticks`` of them; whole numbers only if ``integer``), and
    the decimals their labels need."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, max_ticks)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * magnitude >= raw * (1 - 1e-9))
    if integer:
        step = max(1.0, float(math.ceil(step)))
    fraction = f"{step:.10f}".rstrip("0").partition(".")[2]
    decimals = len(fraction)  # 5: 0, 0.2: 1, 0.25: 2
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    return [round(i * step, decimals + 1) for i in range(first, last + 1)], decimals


class _Frame:
    """The layout of one chart: the plot area inside its margins, the title, the legend rows and the axes."""

    def __init__(
        self,
        *,
        width: int,
        height: int,
        title: str,
        x_label: str,
        y_label: str,
        y_ticks: list[float],
        y_decimals: int,
        legend: Sequence[tuple[str, str]] = (),
    ) -> None:
        if width < 120 or height < 100:
            raise ValueError(f"a chart needs at least 120 x 100 pixels, got {width} x {height}")
        self.width, self.height = int(width), int(height)
        self.title, self.x_label, self.y_label = title, x_label, y_label
        self.y_ticks, self.y_decimals = y_ticks, y_decimals
        self.legend_rows = self._legend_rows(legend)
        tick_chars = max((len(self.y_tick_label(v)) for v in y_ticks), default=1)
        self.left = 24 + tick_chars * CHAR_WIDTH + 8
        self.right = self.width - 16
        self.top = _TITLE_ROW + _LEGEND_ROW * len(self.legend_rows) + 10
        self.bottom = self.height - 38
        self.y_lo, self.y_hi = y_ticks[0], y_ticks[-1]

    def _legend_rows(self, legend: Sequence[tuple[str, str]]) -> list[list[tuple[float, str, str]]]:
        rows: list[list[tuple[float, str, str]]] = []
        x = 0.0
        for name, colour in legend:
            w = 22 + len(name) * CHAR_WIDTH + 14
            if not rows or (x + w > self.width - 16 and rows[-1]):
                rows.append([])
                x = 0.0
            rows[-1].append((x, name, colour))
            x += w
        return rows

    def y_tick_label(self, v: float) -> str:
        return f"{v:.{self.y_decimals}f}"

    def y(self, v: float) -> float:
        """The y coordinate of value ``v``, clamped into the plot area."""
        v = min(max(v, self.y_lo), self.y_hi)
        return self.bottom - (v - self.y_lo) / (self.y_hi - self.y_lo) * (self.bottom - self.top)

    def open(self) -> list[str]:
        """The root element, the title, the legend, the horizontal grid and the y axis."""
        out = [
            f'<svg xmlns="{SVG_NS}" role="img" viewBox="0 0 {self.width} {self.height}" width="{self.width}" '
            f'height="{self.height}" font-family="{_esc(FONT)}" font-size="11" fill="{TEXT}">',
            f"<title>{_esc(self.title)}</title>",
            f'<rect width="{self.width}" height="{self.height}" fill="#ffffff"/>',
            f'<text x="8" y="17" font-size="14" font-weight="600">{_esc(self.title)}</text>',
        ]
        for row_number, row in enumerate(self.legend_rows):
            y = _TITLE_ROW + _LEGEND_ROW * row_number + 10
            out.append(f'<g aria-label="legend" transform="translate({_c(self.left)} {y})">')
            for x, name, colour in row:
                out.append(f'<line x1="{_c(x)}" y1="-4" x2="{_c(x + 18)}" y2="-4" stroke="{colour}" stroke-width="3"/>')
                out.append(f'<text x="{_c(x + 22)}" y="0">{_esc(name)}</text>')
            out.append("</g>")
        for v in self.y_ticks:
            at = _c(self.y(v))
            out.append(f'<line x1="{_c(self.left)}" y1="{at}" x2="{_c(self.right)}" y2="{at}" stroke="{GRID}"/>')
            out.append(
                f'<text x="{_c(self.left - 6)}" y="{at}" dy="0.32em" text-anchor="end" fill="{MUTED}">'
                f"{_esc(self.y_tick_label(v))}</text>"
            )
        mid = _c((self.top + self.bottom) / 2)
        out.append(
            f'<text transform="translate(12 {mid}) rotate(-90)" text-anchor="middle">{_esc(self.y_label)}</text>'
        )
        return out

    def close(self) -> list[str]:
        """The axis lines and the x label, then the end of the root element."""
        bottom, left = _c(self.bottom), _c(self.left)
        return [
            f'<line x1="{left}" y1="{_c(self.top)}" x2="{left}" y2="{bottom}" stroke="{AXIS}"/>',
            f'<line x1="{left}" y1="{bottom}" x2="{_c(self.right)}" y2="{bottom}" stroke="{AXIS}"/>',
            f'<text x="{_c((self.left + self.right) / 2)}" y="{self.height - 6}" text-anchor="middle">'
            f"{_esc(self.x_label)}</text>",
            "</svg>",
        ]

    def no_data(self) -> str:
        x, y = _c((self.left + self.right) / 2), _c((self.top + self.bottom) / 2)
        return f'<text x="{x}" y="{y}" text-anchor="middle" fill="{MUTED}">no data</text>'

    def x_tick(self, x: float, label: str) -> list[str]:
        bottom = self.bottom
        return [
            f'<line x1="{_c(x)}" y1="{_c(bottom)}" x2="{_c(x)}" y2="{_c(bottom + 4)}" stroke="{AXIS}"/>',
            f'<text x="{_c(x)}" y="{_c(bottom + 16)}" text-anchor="middle" fill="{MUTED}">{_esc(label)}</text>',
        ]


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    x_label: str,
    y_label: str,
    width: int = 640,
    height: int = 260,
    highlight: Collection[int] = (),
) -> str:
    """One bar per label, from zero to its value (finite numbers; negative ones go down); the bars whose index is
    in ``highlight`` are drawn in another colour (e.g. the distances within k).  When the labels would overlap,
    every n-th one is written under its bar.  Returns the SVG text."""
    if len(labels) != len(values):
        raise ValueError(f"{len(labels)} labels but {len(values)} values")
    vals = [float(v) for v in values]
    if not all(math.isfinite(v) for v in vals):
        raise ValueError("bar values must be finite numbers")
    lo, hi = min([0.0, *vals]), max([0.0, *vals])
    ticks, decimals = _nice_ticks(lo, hi if hi > lo else lo + 1.0, integer=all(v.is_integer() for v in vals))
    frame = _Frame(width=width, height=height, title=title, x_label=x_label, y_label=y_label, y_ticks=ticks,
                   y_decimals=decimals)  # fmt: skip
    out = frame.open()
    n = len(vals)
    if n == 0:
        out.append(frame.no_data())
        return "\n".join(out + frame.close()) + "\n"
    band = (frame.right - frame.left) / n
    widest = max(len(str(label)) for label in labels) * CHAR_WIDTH + 8
    every = max(1, math.ceil(widest / band))
    zero = frame.y(0.0)
    marked = {int(i) for i in highlight}
    out.append('<g aria-label="bars">')
    for i, (label, v) in enumerate(zip(labels, vals, strict=True)):
        x = frame.left + i * band + band * 0.1
        top = frame.y(v)
        y, h = min(top, zero), abs(zero - top)
        colour = BAR_HIGHLIGHT if i in marked else BAR
        out.append(
            f'<rect x="{_c(x)}" y="{_c(y)}" width="{_c(max(band * 0.8, 1.0))}" height="{_c(h)}" fill="{colour}">'
            f"<title>{_esc(label)}: {_value(v)}</title></rect>"
        )
    out.append("</g>")
    for i, label in enumerate(labels):
        if i % every == 0:
            out.extend(frame.x_tick(frame.left + (i + 0.5) * band, str(label)))
    return "\n".join(out + frame.close()) + "\n"


def line_chart(
    xs: Sequence[float],
    series: Mapping[str, Sequence[float | None]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    marker: float | None = None,
    marker_label: str = "",
    y_max: float = 1.0,
    width: int = 640,
    height: int = 260,
) -> str:
    """One line per series over the numbers ``xs``, the y axis from 0 to ``y_max`` (values beyond it are drawn at
    its edge; their tooltips keep the value), a legend of the series in their order, and each point a dot with
    its value as a tooltip.  ``None`` (or a value that is not finite) is a gap: the line stops and starts again.
    ``marker``: a vertical dashed line at that x, with ``marker_label`` beside it.  Returns the SVG text."""
    xvals = [float(x) for x in xs]
    if not all(math.isfinite(x) for x in xvals):
        raise ValueError("xs must be finite numbers")
    for name, ys in series.items():
        if len(ys) != len(xvals):
            raise ValueError(f"series {name!r} has {len(ys)} values for {len(xvals)} xs")
    if not (math.isfinite(y_max) and y_max > 0):
        raise ValueError(f"y_max must be a positive number, got {y_max!r}")
    ticks, decimals = _nice_ticks(0.0, float(y_max))
    ticks = [v for v in ticks if v <= y_max + 1e-12]
    if ticks[-1] < y_max:
        ticks.append(float(y_max))
    legend = [(str(name), PALETTE[i % len(PALETTE)]) for i, name in enumerate(series)]
    frame = _Frame(width=width, height=height, title=title, x_label=x_label, y_label=y_label, y_ticks=ticks,
                   y_decimals=decimals, legend=legend)  # fmt: skip
    out = frame.open()
    if not xvals:
        out.append(frame.no_data())
        return "\n".join(out + frame.close()) + "\n"
    x_lo, x_hi = min(xvals), max(xvals)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 0.5, x_hi + 0.5
    inner_left, inner_right = frame.left + 10, frame.right - 10

    def px(x: float) -> float:
        return inner_left + (x - x_lo) / (x_hi - x_lo) * (inner_right - inner_left)

    x_ticks, x_decimals = _nice_ticks(x_lo, x_hi, max_ticks=max(2, min(10, int((inner_right - inner_left) // 48))))
    for v in x_ticks:
        if x_lo - 1e-9 <= v <= x_hi + 1e-9:
            out.extend(frame.x_tick(px(v), f"{v:.{x_decimals}f}"))
    if marker is not None and math.isfinite(marker):
        mx = px(min(max(float(marker), x_lo), x_hi))
        out.append(
            f'<line x1="{_c(mx)}" y1="{_c(frame.top)}" x2="{_c(mx)}" y2="{_c(frame.bottom)}" stroke="{AXIS}" '
            'stroke-width="1.5" stroke-dasharray="5 4"/>'
        )
        if marker_label:
            room = frame.right - mx
            anchor, dx = ("start", 5) if room > len(marker_label) * CHAR_WIDTH + 8 else ("end", -5)
            out.append(
                f'<text x="{_c(mx + dx)}" y="{_c(frame.bottom - 6)}" text-anchor="{anchor}" fill="{AXIS}" '
                f'stroke="#ffffff" stroke-width="3" paint-order="stroke">{_esc(marker_label)}</text>'
            )
    for (name, colour), ys in zip(legend, series.values(), strict=True):
        points = [(x, _finite(y)) for x, y in zip(xvals, ys, strict=True)]
        path: list[str] = []
        pen_down = False
        for x, y in points:
            if y is None:
                pen_down = False
                continue
            path.append(f"{'L' if pen_down else 'M'}{_c(px(x))} {_c(frame.y(y))}")
            pen_down = True
        out.append(f'<g aria-label="{_esc(name)}">')
        if path:
            out.append(f'<path d="{" ".join(path)}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in points:
            if y is not None:
                out.append(
                    f'<circle cx="{_c(px(x))}" cy="{_c(frame.y(y))}" r="3" fill="{colour}">'
                    f"<title>{_esc(name)}: {_value(y)} at {_esc(x_label)} = {_value(x)}</title></circle>"
                )
        out.append("</g>")
    return "\n".join(out + frame.close()) + "\n"


def stack(charts: Sequence[str], *, title: str, gap: int = 12) -> str:
    """Charts made here, one under the other, in one SVG document with its own ``<title>`` (each chart keeps its
    own): the charts become nested ``<svg>`` elements at their offsets."""
    parts: list[str] = []
    y, width = 0, 0
    for chart in charts:
        m = _ROOT_SIZE.match(chart)
        if m is None:
            raise ValueError("not a chart made by simhash_filter.report.svg")
        w, h = int(m[1]), int(m[2])
        parts.append(f'<svg x="0" y="{y}" ' + chart.removeprefix("<svg ").rstrip("\n"))
        y += h + gap
        width = max(width, w)
    height = max(0, y - gap) if charts else 0
    head = (
        f'<svg xmlns="{SVG_NS}" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}">\n'
        f"<title>{_esc(title)}</title>\n"
    )
    return head + "\n".join(parts) + ("\n" if parts else "") + "</svg>\n"
