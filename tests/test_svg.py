"""Tests of the SVG plots of our own (simhash_filter.report.svg): well-formed XML, escaped text, the same bytes for
the same arguments, gaps in lines, highlighted bars, stacking."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from simhash_filter.report.svg import BAR, BAR_HIGHLIGHT, bar_chart, line_chart, stack

NS = {"svg": "http://www.w3.org/2000/svg"}
SVG = "{http://www.w3.org/2000/svg}"


def parse(text: str) -> ET.Element:
    return ET.fromstring(text)


def bars(root: ET.Element) -> list[ET.Element]:
    return root.findall(".//svg:g[@aria-label='bars']/svg:rect", NS)


def points(root: ET.Element, series: str) -> list[ET.Element]:
    return root.findall(f".//svg:g[@aria-label='{series}']/svg:circle", NS)


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def test_bar_chart_is_an_accessible_svg_with_a_title():
    """A bar chart is an <svg> in the SVG namespace with role="img", a viewBox and its title first."""
    root = parse(bar_chart(["0", "1", "2"], [5, 3, 0], title="Pairs by distance", x_label="d", y_label="pairs"))
    assert root.tag == f"{SVG}svg"
    assert root.get("role") == "img"
    assert root.get("viewBox") == "0 0 640 260"
    assert root[0].tag == f"{SVG}title" and root[0].text == "Pairs by distance"
    assert "Pairs by distance" in texts(root) and "d" in texts(root) and "pairs" in texts(root)


def test_each_bar_has_a_tooltip_with_its_value():
    """Every bar is a <rect> whose <title> gives its label and value; taller values make taller bars."""
    root = parse(bar_chart(["a", "b", "c"], [4, 2, 0.5], title="t", x_label="x", y_label="y"))
    rects = bars(root)
    assert [r.find("svg:title", NS).text for r in rects] == ["a: 4", "b: 2", "c: 0.5"]
    heights = [float(r.get("height")) for r in rects]
    assert heights[0] > heights[1] > heights[2] > 0


def test_highlighted_bars_have_the_other_colour():
    """The bars whose index is in ``highlight`` are drawn in the highlight colour, the others in the bar colour."""
    root = parse(bar_chart([str(d) for d in range(6)], [1, 2, 3, 4, 5, 6], title="t", x_label="x", y_label="y",
                           highlight=range(3)))  # fmt: skip
    assert [r.get("fill") for r in bars(root)] == [BAR_HIGHLIGHT] * 3 + [BAR] * 3


def test_bar_chart_y_ticks_of_counts_are_whole_numbers():
    """Counts get whole-number ticks from zero up to at least the largest value."""
    root = parse(bar_chart(["a", "b"], [2, 1], title="t", x_label="x", y_label="y"))
    ticks = [t.text for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    assert ticks == ["0", "1", "2"]


def test_many_bar_labels_are_thinned_out():
    """With more labels than fit under the bars, every n-th label is written; each bar keeps its tooltip."""
    labels = [f"host-{i}.example" for i in range(40)]
    root = parse(bar_chart(labels, list(range(40)), title="t", x_label="x", y_label="y"))
    written = [t for t in texts(root) if t.startswith("host-")]
    assert 1 < len(written) < 40
    assert written[0] == "host-0.example"
    assert len(bars(root)) == 40


def test_text_is_escaped():
    """Markup characters in titles, labels, series and marker labels stay text and parse back as written."""
    nasty = "<b>&amp; \"quoted\" 'single' </svg>"
    root = parse(bar_chart([nasty], [1], title=nasty, x_label=nasty, y_label=nasty))
    assert root[0].text == nasty
    assert bars(root)[0].find("svg:title", NS).text == f"{nasty}: 1"
    line = line_chart([0, 1], {nasty: [0.5, 0.6]}, title=nasty, x_label="k", y_label="y", marker=1, marker_label=nasty)
    root = parse(line)
    assert root[0].text == nasty
    assert nasty in texts(root)
    assert "<b>" not in line


def test_characters_xml_cannot_hold_are_replaced():
    """Control characters (and lone surrogates) in a label become U+FFFD instead of breaking the XML."""
    root = parse(bar_chart(["a\x00b\x1bc\ud800"], [1], title="x\x07y", x_label="x", y_label="y"))
    assert root[0].text == "x\ufffdy"
    assert bars(root)[0].find("svg:title", NS).text == "a\ufffdb\ufffdc\ufffd: 1"


def test_same_arguments_give_the_same_bytes():
    """The same arguments give the same text; the legend keeps the order of the series."""
    args = ([0, 1, 2], {"precision": [1.0, 0.9, None], "recall": [0.2, 0.5, 0.7]})
    kwargs = {"title": "t", "x_label": "k", "y_label": "score", "marker": 1, "marker_label": "best"}
    assert line_chart(*args, **kwargs) == line_chart(*args, **kwargs)
    assert bar_chart(["a"], [1], title="t", x_label="x", y_label="y") == bar_chart(
        ["a"], [1], title="t", x_label="x", y_label="y"
    )
    legend = parse(line_chart(*args, **kwargs)).find(".//svg:g[@aria-label='legend']", NS)
    assert [t.text for t in legend.iter(f"{SVG}text")] == ["precision", "recall"]


def test_none_is_a_gap_in_a_line():
    """None breaks a line into two pieces and has no point; each other value has a point and a tooltip."""
    root = parse(line_chart([0, 1, 2, 3, 4], {"F1": [0.1, 0.2, None, 0.4, 0.5]}, title="t", x_label="k",
                            y_label="y"))  # fmt: skip
    path = root.find(".//svg:g[@aria-label='F1']/svg:path", NS).get("d")
    assert path.count("M") == 2 and path.count("L") == 2
    tips = [c.find("svg:title", NS).text for c in points(root, "F1")]
    assert tips == ["F1: 0.1 at k = 0", "F1: 0.2 at k = 1", "F1: 0.4 at k = 3", "F1: 0.5 at k = 4"]


def test_a_series_of_gaps_only_draws_nothing():
    """A series without any value has a legend entry but no path and no point; NaN counts as a gap."""
    root = parse(line_chart([0, 1], {"P": [None, float("nan")], "R": [0.5, 0.5]}, title="t", x_label="k",
                            y_label="y"))  # fmt: skip
    assert root.find(".//svg:g[@aria-label='P']/svg:path", NS) is None
    assert points(root, "P") == []
    assert len(points(root, "R")) == 2


def test_marker_is_a_dashed_vertical_line_with_its_label():
    """``marker`` draws a dashed vertical line at that x, labelled with ``marker_label``."""
    root = parse(line_chart(list(range(17)), {"F1": [0.5] * 17}, title="t", x_label="k", y_label="y", marker=6,
                            marker_label="best F1: k = 6"))  # fmt: skip
    dashed = [line for line in root.iter(f"{SVG}line") if line.get("stroke-dasharray")]
    assert len(dashed) == 1 and dashed[0].get("x1") == dashed[0].get("x2")
    xs = {c.get("cx"): int(c.find("svg:title", NS).text.rsplit("= ", 1)[1]) for c in points(root, "F1")}
    assert xs[dashed[0].get("x1")] == 6
    assert "best F1: k = 6" in texts(root)


def test_values_beyond_y_max_are_drawn_at_the_edge_with_their_value():
    """A value above ``y_max`` is drawn at the top of the plot; its tooltip keeps the value."""
    root = parse(line_chart([0, 1], {"s": [2.0, 1.0]}, title="t", x_label="x", y_label="y", y_max=1.0))
    a, b = points(root, "s")
    assert a.get("cy") == b.get("cy")
    assert a.find("svg:title", NS).text.startswith("s: 2 ")


def test_legend_lists_every_series_with_its_colour():
    """The legend has one line and one name per series, in the series' colours."""
    series = {name: [0.1, 0.2] for name in ("precision", "recall", "F1", "F1 at t = 0.85")}
    root = parse(line_chart([0, 1], series, title="t", x_label="x", y_label="y"))
    legend = root.find(".//svg:g[@aria-label='legend']", NS)
    assert [t.text for t in legend.iter(f"{SVG}text")] == list(series)
    colours = [line.get("stroke") for line in legend.iter(f"{SVG}line")]
    assert colours == [root.find(f".//svg:g[@aria-label='{n}']/svg:path", NS).get("stroke") for n in series]
    assert len(set(colours)) == 4


def test_empty_charts_say_no_data():
    """No bars or no points: still a valid chart, saying "no data"."""
    for text in (
        bar_chart([], [], title="t", x_label="x", y_label="y"),
        line_chart([], {"P": []}, title="t", x_label="x", y_label="y"),
    ):
        assert "no data" in texts(parse(text))


def test_bad_arguments_are_refused():
    """Lengths that differ, values that are not finite, a y_max that is not positive: ValueError."""
    with pytest.raises(ValueError, match="2 labels but 1 values"):
        bar_chart(["a", "b"], [1], title="t", x_label="x", y_label="y")
    with pytest.raises(ValueError, match="finite"):
        bar_chart(["a"], [float("inf")], title="t", x_label="x", y_label="y")
    with pytest.raises(ValueError, match="series 'P' has 1 values for 2 xs"):
        line_chart([0, 1], {"P": [1.0]}, title="t", x_label="x", y_label="y")
    with pytest.raises(ValueError, match="y_max"):
        line_chart([0, 1], {"P": [1.0, 1.0]}, title="t", x_label="x", y_label="y", y_max=0)


def test_width_and_height_set_the_view_box():
    """``width`` and ``height`` are the chart's size and viewBox."""
    root = parse(line_chart([0, 1], {"P": [1, 1]}, title="t", x_label="x", y_label="y", width=800, height=300))
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("800", "300", "0 0 800 300")


def test_stacked_charts_are_one_svg_of_nested_charts():
    """``stack`` puts charts one under the other in one valid SVG with its own title; each keeps its own."""
    a = bar_chart(["a"], [1], title="first", x_label="x", y_label="y")
    b = line_chart([0, 1], {"P": [1, 1]}, title="second", x_label="x", y_label="y", height=300)
    root = parse(stack([a, b], title="both", gap=10))
    assert root[0].text == "both"
    nested = root.findall("svg:svg", NS)
    assert [n.find("svg:title", NS).text for n in nested] == ["first", "second"]
    assert [n.get("y") for n in nested] == ["0", "270"]
    assert root.get("viewBox") == "0 0 640 570"
    with pytest.raises(ValueError):
        stack(["<svg/>"], title="x")


def test_no_ids_and_no_xml_declaration():
    """Charts carry no id attributes (two on one page cannot clash) and no XML declaration (they go inline)."""
    text = line_chart([0, 1], {"P": [1, 1]}, title="t", x_label="x", y_label="y", marker=0, marker_label="m")
    assert not re.search(r"\sid=", text)
    assert text.startswith("<svg ")
