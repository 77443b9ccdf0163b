"""``simhash-filter calibrate``: precision, recall and F1 of every (k, t) on pairs of pages labelled by hand, the
settings to use, and plots (``--plot FILE.svg|.html|.png``).

The work is :mod:`simhash_filter.report.calibrate`'s, imported when the command runs.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from simhash_filter.cli.common import EXIT_FAILED, EXIT_OK, UsageError, by_reason, filter_config, warn

if TYPE_CHECKING:
    from simhash_filter.report.calibrate import Analysis, Calibration, Choice, Group, Metrics

__all__ = ["add_calibrate_parser", "cmd_calibrate"]

EXIT_MALFORMED = 2
#: Malformed lines named on stderr (of the labels, and of the pages); the rest are counted.
SHOWN = 20
PLOT_SUFFIXES = (".svg", ".html", ".png")
MATPLOTLIB_MISSING = "--plot {path} needs matplotlib: pip install 'simhash-filter[plot]' (or write .svg)"

EPILOG = """\
labels (JSON Lines, one pair per line; .gz accepted):
  {"url_a": "https://a.example/x", "url_b": "https://b.example/x", "duplicate": true}
  {"url_a": "https://a.example/x", "url_b": "https://a.example/y", "duplicate": false}

examples:
  simhash-filter calibrate labels.jsonl --pages pages.jsonl.gz
  simhash-filter calibrate labels.jsonl --pages crawl/ feed.jsonl --plot calibration.html
  simhash-filter calibrate labels.jsonl --pages 'crawl/*.warc.gz' -k 8 -t 0.8 --json > calibration.json

exit status: 0 success, 1 an input could not be read or no labelled pair could be used, 2 a usage error,
  malformed lines (labels or pages), a damaged WARC file, or --plot FILE.png without matplotlib"""


def add_calibrate_parser(sub: Any, threshold: argparse.ArgumentParser, model: argparse.ArgumentParser) -> None:
    """Add ``calibrate`` to the ``simhash-filter`` parser (``threshold``: -k and -t, ``model``: the model options)."""
    p = sub.add_parser(
        "calibrate",
        parents=[model, threshold],
        help="choose k and t on pairs of pages labelled by hand (precision, recall and F1 of every setting)",
        description=(
            "Fingerprint the pages of labelled pairs, score every k (0..16) and similarity threshold t against\n"
            "the labels, and recommend settings; -k and -t are the current settings, to compare with. A pair is\n"
            "judged alone: flagged when the index's tables can find it, its distance is at most k and its\n"
            "similarity at least t."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "labels",
        metavar="LABELS",
        help='JSON Lines of labelled pairs, optionally .gz (\'-\' for standard input): {"url_a", "url_b", '
        '"duplicate": true|false} per line',
    )
    p.add_argument(
        "--pages",
        nargs="+",
        required=True,
        metavar="PAGES",
        help="the pages: JSON Lines of objects with url and html (optionally .gz; e.g. a crawl feed written with "
        "-a store=html), or WARC (a .warc/.warc.gz file, a directory, a quoted glob); the first page of a URL wins",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="fingerprint in N processes (default: as dedup, by the inputs' size)",
    )
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw the results: FILE.svg (the charts), FILE.html (charts and tables in one page) or "
        "FILE.png (needs matplotlib)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the text")
    p.set_defaults(func=cmd_calibrate, parser=p)


def _plot_kind(args: argparse.Namespace) -> str | None:
    """The kind of ``--plot`` (``svg``, ``html``, ``png``), checked before any work."""
    if args.plot is None:
        return None
    suffix = os.path.splitext(args.plot)[1].lower()
    if suffix not in PLOT_SUFFIXES:
        raise UsageError(f"--plot {args.plot}: write a .svg, .html or .png file")
    return suffix[1:]


def cmd_calibrate(args: argparse.Namespace) -> int:
    config = filter_config(args)
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if "-" in args.pages:
        raise UsageError("--pages cannot be '-': only the labels can be read from standard input")
    plot = _plot_kind(args)
    if plot == "png" and importlib.util.find_spec("matplotlib") is None:
        warn(MATPLOTLIB_MISSING.format(path=args.plot))
        return EXIT_MALFORMED

    from simhash_filter.batch.dedup import WorkersFailed
    from simhash_filter.report.calibrate import PagesUnreadable, calibrate, read_labels

    try:
        labels = read_labels(sys.stdin.buffer if args.labels == "-" else args.labels)
    except (OSError, EOFError) as exc:
        warn(f"cannot read {args.labels}: {getattr(exc, 'strerror', None) or exc}")
        return EXIT_FAILED
    for n, why in labels.malformed_lines[:SHOWN]:
        warn(f"{args.labels}:{n}: malformed label: {why}")
    if labels.malformed > SHOWN:
        warn(f"{args.labels}: {labels.malformed - SHOWN} more malformed lines: counted, not shown")
    if not labels.pairs:
        warn(f"no usable labelled pairs in {args.labels}: {_label_counts(labels.as_dict())}")
        return EXIT_FAILED
    try:
        result = calibrate(labels, args.pages, config=config, workers=args.workers)
    except FileNotFoundError as exc:
        warn(f"cannot open {exc.filename or exc}: {exc.strerror or exc}")
        return EXIT_FAILED
    except PagesUnreadable as exc:
        warn(str(exc))
        return EXIT_FAILED
    except OSError as exc:
        warn(f"cannot read {exc.filename or 'the pages'}: {exc.strerror or exc}")
        return EXIT_FAILED
    except WorkersFailed as exc:
        warn(f"{exc}; try --workers 1")
        return EXIT_FAILED
    pages = result.pages
    for path, n, why in pages.malformed_lines[:SHOWN]:
        warn(f"{path}:{n}: malformed line: {why}")
    if pages.malformed > SHOWN:
        warn(f"{pages.malformed - SHOWN} more malformed page lines: counted, not shown")
    for damage in pages.warc.damaged[:SHOWN]:
        warn(str(damage))
    if not result.analysis.pairs:
        skipped = ", ".join(f"{why} {n}" for why, n in sorted(result.skipped.items()))
        warn(f"no usable labelled pairs: all {len(labels.pairs)} pairs skipped ({skipped})")
        return EXIT_FAILED
    if args.json:
        print(json.dumps(result.as_dict(), ensure_ascii=False))
    else:
        print("\n".join(report_lines(result)))
    if plot is not None:
        try:
            _write_plot(args.plot, plot, result)
        except OSError as exc:
            warn(f"cannot write {args.plot}: {exc.strerror or exc}")
            return EXIT_FAILED
    malformed = labels.malformed or pages.malformed or pages.warc.damaged
    return EXIT_MALFORMED if malformed else EXIT_OK


# --- text ----------------------------------------------------------------------------------------


def _score(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _interval(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f" (95 % CI {ci[0]:.3f}-{ci[1]:.3f})"


def _label_counts(d: dict[str, Any]) -> str:
    return (
        f"{d['lines']} lines: {d['pairs']} pairs ({d['duplicates']} duplicates, {d['distinct']} distinct); "
        f"{d['repeated']} repeated, {d['conflicting']} conflicting pairs (left out), {d['same_url']} a URL with "
        f"itself, {d['malformed']} malformed"
    )


def _summary(result: Calibration) -> list[str]:
    a, pages = result.analysis, result.pages
    found = f"pages: {pages.found} of the {pages.wanted} URLs found in {len(pages.inputs)} input(s)"
    if pages.lines:
        found += f" ({pages.lines} JSON lines, {pages.malformed} malformed)"
    if pages.warc.files:
        w = pages.warc
        found += f" ({w.pages} pages of {w.records} WARC records in {w.files} files, {len(w.damaged)} damaged)"
    found += f"; {pages.fingerprinted} fingerprinted"
    if pages.failed:
        found += f" ({by_reason(dict(pages.failed))} not)"
    used = f"pairs: {len(a.pairs)} used ({a.duplicates} duplicates, {a.distinct} distinct)"
    if result.skipped:
        used += f"; {sum(result.skipped.values())} skipped ({by_reason(dict(result.skipped))})"
    return [
        f"labels: {result.labels.source}: {_label_counts(result.labels.as_dict())}",
        found,
        used,
        f"settings now: k = {a.k}, t = {_t(a.t)} (tables {a.tables})",
    ]


def _t(t: float) -> str:
    from simhash_filter.report.calibrate import format_t

    return format_t(t)


Table = tuple[str, list[str], list[list[str]]]  # title, headers, rows


def tables(a: Analysis) -> list[Table]:
    """The tables of a calibration: against k, against t, by language, by host."""
    rec = a.recommended
    rows = []
    for k in a.ks:
        m = a.metrics(k, a.t)
        notes = []
        if k == a.k:
            notes.append("current")
        if a.best_f1 is not None and k == rec.k:
            notes.append("best F1" if rec.t == a.t else f"best F1 at t = {rec.t_text}")
        rows.append([str(k), *_prf(m), str(m.tp), str(m.fp), str(m.fn), str(m.tn), ", ".join(notes)])
    out: list[Table] = [
        (f"Against k, at t = {_t(a.t)}", ["k", "P", "R", "F1", "TP", "FP", "FN", "TN", ""], rows),
    ]
    ks = [a.k] if rec.k == a.k else [a.k, rec.k]
    headers = ["t"] + [f"{name} k={k}" for k in ks for name in ("P", "R", "F1")] + [""]
    rows = []
    for t in a.ts:
        notes = []
        if t == a.t:
            notes.append("current")
        if a.best_f1 is not None and t == rec.t:
            notes.append("best F1" if rec.k == a.k else f"best F1 at k = {rec.k}")
        if t == 0.0:
            notes.append("no verification")
        rows.append([_t(t), *(v for k in ks for v in _prf(a.metrics(k, t))), ", ".join(notes)])
    title = f"Against t, at k = {a.k}" + ("" if rec.k == a.k else f" (current) and k = {rec.k} (best F1)")
    out.append((title, headers, rows))
    setting = f"now k = {a.k}, t = {_t(a.t)}"
    if a.best_f1 is not None:
        setting += f"; best F1 k = {rec.k}, t = {rec.t_text}"
    out.append((f"By language of page a ({setting})", *_group_table("language", a.by_language)))
    other = " (the 20 with most pairs, then the rest)" if a.by_host and a.by_host[-1].name == "other" else ""
    out.append((f"By host of url_a{other} ({setting})", *_group_table("host", a.by_host)))
    return out


def _prf(m: Metrics) -> list[str]:
    return [_score(m.precision), _score(m.recall), _score(m.f1)]


def _group_table(name: str, groups: Sequence[Group]) -> tuple[list[str], list[list[str]]]:
    headers = [name, "pairs", "dup", "distinct", "P now", "R now", "F1 now", "P best", "R best", "F1 best"]
    rows = []
    for g in groups:
        best = ["", "", ""] if g.best is None else _prf(g.best)
        rows.append([g.name, str(g.pairs), str(g.duplicates), str(g.distinct), *_prf(g.current), *best])
    return headers, rows


def _text_table(title: str, headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    first_left = headers[0] not in ("k", "t")

    def line(cells: list[str]) -> str:
        parts = []
        for i, (cell, w) in enumerate(zip(cells, widths, strict=True)):
            left = (i == 0 and first_left) or (i == len(cells) - 1 and headers[-1] == "")
            parts.append(cell.ljust(w) if left else cell.rjust(w))
        return ("  " + "  ".join(parts)).rstrip()

    return [title, line(headers), *(line(r) for r in rows)]


def _choice_lines(heading: str, c: Choice | None, missing: str, same: Choice | None = None) -> list[str]:
    if c is None:
        return [f"  {heading}: {missing}"]
    if same is not None and (same.k, same.t) == (c.k, c.t):
        return [f"  {heading}: the same, k = {c.k}, t = {c.t_text}"]
    m = c.metrics
    scrapy = c.scrapy.replace("\n", " and ")
    return [
        f"  {heading}: k = {c.k}, t = {c.t_text}",
        f"    precision {_score(m.precision)}{_interval(m.precision_ci)}, recall {_score(m.recall)}"
        f"{_interval(m.recall_ci)}, F1 {_score(m.f1)}; TP {m.tp}, FP {m.fp}, FN {m.fn}, TN {m.tn}",
        f"    duplicates missed: {c.beyond_k} further than k, {c.no_table} within k but sharing no table, "
        f"{c.below_t} less similar than t",
        f"    Scrapy: {scrapy}; command line: {c.command_line}",
    ]


def recommendation_lines(a: Analysis) -> list[str]:
    from simhash_filter.report.calibrate import MIN_PRECISION

    return [
        "Recommendation",
        *_choice_lines("best F1", a.best_f1, "none (no labelled duplicate and no flag)"),
        *_choice_lines(
            f"highest recall at precision >= {MIN_PRECISION} (the point estimate; its interval is shown)",
            a.high_precision,
            f"no setting reaches precision {MIN_PRECISION}",
            a.best_f1,
        ),
        *_choice_lines("current", a.current, "", a.best_f1),
    ]


def report_lines(result: Calibration) -> list[str]:
    """The text report: counts, tables, recommendation, warnings and the note."""
    a = result.analysis
    out = _summary(result)
    for title, headers, rows in tables(a):
        out += ["", *_text_table(title, headers, rows)]
    out += ["", *recommendation_lines(a), ""]
    out += [f"warning: {w}" for w in a.warnings]
    out.append(f"note: {a.note}")
    return out


# --- plots ---------------------------------------------------------------------------------------


def _write_plot(path: str, kind: str, result: Calibration) -> None:
    from simhash_filter.report.calibrate import charts
    from simhash_filter.report.svg import stack

    if kind == "png":
        _png(path, result.analysis)
        return
    drawn = charts(result.analysis)
    if kind == "svg":
        text = stack(drawn, title="simhash-filter calibrate: precision, recall and F1 of k and t")
    else:
        text = _html(result, drawn)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


STYLE = """\
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, Arial, sans-serif; color: #222; margin: 0; }
main { max-width: 60rem; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
figure { margin: 1rem 0; } svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 0.9rem; }
th, td { padding: 0.15rem 0.6rem; text-align: right; border-bottom: 1px solid #e3e3e3; }
th:first-child, td:first-child { text-align: left; }
tr.current td { background: #f2f6fb; } pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; }
.warning { color: #9a3b00; } .note { color: #555; }
"""


def _html(result: Calibration, drawn: Sequence[str]) -> str:
    """A self-contained page: the counts, the recommendation, the charts and the tables (well-formed XML too)."""
    e = html.escape
    a = result.analysis
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/>',
        "<title>simhash-filter calibrate</title>",
        f"<style>\n{STYLE}</style></head>",
        "<body><main>",
        "<h1>Calibration of k and t on labelled pairs</h1>",
        "<ul>",
        *(f"<li>{e(line)}</li>" for line in _summary(result)),
        "</ul>",
        "<h2>Recommendation</h2>",
        f"<pre>{e(chr(10).join(recommendation_lines(a)[1:]))}</pre>",
        *(f'<p class="warning">warning: {e(w)}</p>' for w in a.warnings),
        f'<p class="note">{e(a.note)}</p>',
        "<h2>Charts</h2>",
        *(f"<figure>\n{svg}</figure>" for svg in drawn),
    ]
    for title, headers, rows in tables(a):
        parts.append(f"<h2>{e(title)}</h2>")
        parts.append("<table>")
        parts.append("<tr>" + "".join(f"<th>{e(h)}</th>" for h in headers) + "</tr>")
        for row in rows:
            current = ' class="current"' if "current" in row[-1] else ""
            parts.append(f"<tr{current}>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>")
        parts.append("</table>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _png(path: str, a: Analysis) -> None:
    """The charts with matplotlib (checked to be installed before any work)."""
    import math

    from matplotlib.figure import Figure

    def values(vs: Sequence[float | None]) -> list[float]:
        return [math.nan if v is None else v for v in vs]

    rec = a.recommended
    extra = {
        "k": [] if rec.t == a.t else [(f"F1 at t = {rec.t_text}", [a.metrics(k, rec.t).f1 for k in a.ks])],
        "t": [] if rec.k == a.k else [(f"F1 at k = {rec.k}", [a.metrics(rec.k, t).f1 for t in a.ts])],
    }
    fig = Figure(figsize=(8, 9), dpi=100, layout="constrained")
    by_k, by_t, hist = fig.subplots(3, 1)
    for ax, xs, cells, title, x_label, marker in (
        (by_k, a.ks, [a.metrics(k, a.t) for k in a.ks], f"against k (t = {_t(a.t)})", "k", rec.k),
        (by_t, a.ts, [a.metrics(a.k, t) for t in a.ts], f"against t (k = {a.k})", "t", rec.t),
    ):
        ax.plot(xs, values([m.precision for m in cells]), marker="o", markersize=3, label="precision")
        ax.plot(xs, values([m.recall for m in cells]), marker="o", markersize=3, label="recall")
        ax.plot(xs, values([m.f1 for m in cells]), marker="o", markersize=3, label="F1")
        for name, ys in extra[x_label]:
            ax.plot(xs, values(ys), marker="o", markersize=3, label=name)
        if a.best_f1 is not None:
            ax.axvline(marker, color="#555555", linestyle="--", linewidth=1,
                       label=f"best F1: k = {rec.k}, t = {rec.t_text}")  # fmt: skip
        ax.set_ylim(0, 1.02)
        ax.set_title(f"Precision, recall and F1 {title}")
        ax.set_xlabel(x_label)
        ax.legend(loc="lower right", fontsize="small")
    counts = a.distance_counts(True, top=17)
    colours = ["#e45756" if d <= rec.k else "#4c78a8" for d in range(len(counts))]
    hist.bar([str(d) for d in range(17)] + [">16"], counts, color=colours)
    hist.set_title(f"Labelled duplicates by Hamming distance (within k = {rec.k} highlighted)")
    hist.set_xlabel("Hamming distance")
    hist.set_ylabel("pairs")
    fig.savefig(path, format="png")
