"""Calibration of k and the similarity threshold t on pairs of pages labelled by hand: which settings find the
near-duplicates of *your* pages, at what precision.

The input is two things:

- **labels**: JSON Lines (``.gz`` accepted), one object per line, ``{"url_a": str, "url_b": str, "duplicate":
  true|false}``.  A line that is not such an object is skipped and counted with its line number and reason; a
  blank line is ignored.  A pair is unordered: labelled twice with the same answer it counts once, with opposite
  answers it is *conflicting* and left out; a URL paired with itself is skipped.
- **pages**: JSON Lines of objects with ``url`` and ``html`` (what ``simhash-filter dedup`` reads, e.g. a crawl's
  feed written with ``-a store=html``), or WARC (a ``.warc``/``.warc.gz`` file, a directory, a glob), read by
  :mod:`simhash_filter.batch.warc`.  Only the pages whose URL is in a pair are fingerprinted; the first page of a URL
  wins.  A pair whose page is missing or cannot be fingerprinted is skipped and counted by reason.

Each pair gets its Hamming distance d, its sketch similarity s, and whether the index's tables can find it at all
(within distance 4 always; beyond, when the two agree on a table's leading bits).  For every k in 0..16 and t in
:func:`t_grid`, a pair is *flagged* when the tables find it, ``d <= k`` and ``s >= t`` (t = 0: no verification),
and the flags are scored against the labels: precision, recall, F1 and the counts, with Wilson 95 % intervals.

The recommendation: the setting with the best F1 (ties: the nearest to the current one, one step of k weighing as
much as one step of 0.05 of t, then the smaller k, then the larger t); the setting with the highest recall whose
precision (the point estimate) is at least 0.99; and the current setting, for comparison.  Then the same scores
by language of page a (its ``<html lang>``, else ``zh`` for mostly Chinese text, else ``und``) and by host of
``url_a`` (a pair across two hosts counts under url_a's host).

Everything here is computation: :func:`calibrate` returns a :class:`Calibration`, whose :meth:`~Calibration.as_dict`
is JSON-serialisable; :func:`charts` draws it as SVG.  No printing.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import IO, Any
from urllib.parse import urlsplit

import numpy as np

from simhash_filter.batch.dedup import Page, auto_workers, fingerprint_items, parse_line
from simhash_filter.batch.warc import WarcCounts, WarcReader, is_warc_input
from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.index.nearduplicate import Rule, spots_of, spots_verdict, verdict
from simhash_filter.index.tables import TableDesign
from simhash_filter.model.html import NotHtml, parse
from simhash_filter.model.sketch import similarity
from simhash_filter.report.source import open_lines
from simhash_filter.report.svg import bar_chart, line_chart

__all__ = [
    "K_VALUES",
    "MIN_PRECISION",
    "NOTE",
    "T_GRID",
    "Analysis",
    "Calibration",
    "Choice",
    "Group",
    "LabelledPair",
    "Labels",
    "Metrics",
    "PageCounts",
    "PageInfo",
    "PagesUnreadable",
    "PairResult",
    "analyse",
    "calibrate",
    "charts",
    "language",
    "load_pages",
    "measure_pairs",
    "read_labels",
    "t_grid",
    "wilson",
]

#: The k values swept (``FilterConfig.max_distance``'s range).
K_VALUES = tuple(range(17))
#: The thresholds swept: 0 (no verification), then 0.50 to 0.95 by 0.05; the current t is always added.
T_GRID = (0.0, *(round(0.5 + 0.05 * i, 2) for i in range(10)))
#: The high-precision recommendation: the best recall at a precision (point estimate) of at least this.
MIN_PRECISION = 0.99
#: Fewer labelled duplicates (or distinct pairs) than this: the numbers are rough, and the result says so.
FEW_PAIRS = 50
#: The hosts shown one by one in the breakdown (by number of pairs); the others are one row, "other".
TOP_HOSTS = 20
#: A page without ``<html lang>`` is Chinese ("zh") when CJK ideographs are at least this share of its letters.
CJK_SHARE = 0.2
#: Malformed lines kept as examples (with their line number and reason); all of them are counted.
MAX_EXAMPLES = 1000
#: The 97.5 % quantile of the standard normal distribution (a two-sided 95 % interval).
Z95 = 1.959963984540054
#: One step of t weighs as much as one step of k when choosing between settings of equal F1.
T_STEP = 0.05

NOTE = (
    "Calibration judges each labelled pair alone: a pair is flagged when the index's tables can find it, its "
    "distance is at most k and its similarity at least t. A crawl (or dedup) judges each page against all the "
    "pages before it, and a page is a near-duplicate of its most similar verified candidate, so its numbers can "
    "differ slightly: a page can be flagged through a third page, and which page of a group comes first depends "
    "on the order of the crawl."
)

MISSING_PAGE = "missing_page"


# --- labels --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelledPair:
    """Two pages and the answer: near-duplicates (``duplicate``) or distinct.  ``line``: where it was first read."""

    url_a: str
    url_b: str
    duplicate: bool
    line: int = 0


@dataclass
class Labels:
    """The labelled pairs read from a file, and what was left out (counted)."""

    source: str = ""
    #: Lines read (blank lines not counted).
    lines: int = 0
    #: The distinct pairs with one answer, in the order first read.
    pairs: list[LabelledPair] = field(default_factory=list)
    #: Lines that repeat a pair with the same answer (the pair counts once).
    repeated: int = 0
    #: Pairs labelled both ways (left out), and the lines that labelled them.
    conflicting: int = 0
    conflicting_lines: int = 0
    #: Lines that pair a URL with itself (left out).
    same_url: int = 0
    #: Lines that are not a label object; the first :data:`MAX_EXAMPLES` as ``(line number, reason)``.
    malformed: int = 0
    malformed_lines: list[tuple[int, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "lines": self.lines,
            "pairs": len(self.pairs),
            "duplicates": sum(p.duplicate for p in self.pairs),
            "distinct": sum(not p.duplicate for p in self.pairs),
            "repeated": self.repeated,
            "conflicting": self.conflicting,
            "conflicting_lines": self.conflicting_lines,
            "same_url": self.same_url,
            "malformed": self.malformed,
            "malformed_lines": [{"line": n, "reason": why} for n, why in self.malformed_lines],
        }


def _label(raw: bytes) -> tuple[tuple[str, str, bool] | None, str]:
    """``((url_a, url_b, duplicate), "")`` of a line, or ``(None, why it is malformed)``."""
    try:
        obj = json.loads(raw)
    except RecursionError:
        return None, "not JSON (nested too deeply)"
    except ValueError as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(obj, dict):
        return None, f"not a JSON object (got {type(obj).__name__})"
    for key in ("url_a", "url_b"):
        if key not in obj:
            return None, f'missing "{key}"'
        if not isinstance(obj[key], str):
            return None, f'"{key}" is not a string (got {type(obj[key]).__name__})'
        if not obj[key].strip():
            return None, f'"{key}" is empty'
    if "duplicate" not in obj:
        return None, 'missing "duplicate"'
    if not isinstance(obj["duplicate"], bool):
        return None, f'"duplicate" is not true or false (got {json.dumps(obj["duplicate"])[:40]})'
    return (obj["url_a"], obj["url_b"], obj["duplicate"]), ""


def read_labels(source: str | os.PathLike[str] | IO[bytes]) -> Labels:
    """The labelled pairs of a JSON Lines file (``.gz``: compressed) or of an open binary stream.  Raises
    ``OSError`` (and ``EOFError`` for a ``.gz`` cut short) when it cannot be read."""
    with ExitStack() as stack:
        if hasattr(source, "read"):
            stream: Iterable[bytes] = source  # type: ignore[assignment]
            name = str(getattr(source, "name", "<stream>"))
        else:
            name = os.fspath(source)  # type: ignore[arg-type]
            stream = stack.enter_context(open_lines(name))
        return _read_labels(stream, name)


def _read_labels(stream: Iterable[bytes], name: str) -> Labels:
    labels = Labels(source=name)
    first: dict[tuple[str, str], LabelledPair] = {}
    answers: dict[tuple[str, str], set[bool]] = {}
    lines: Counter[tuple[str, str]] = Counter()
    for n, raw in enumerate(stream, 1):
        if not raw.strip():
            continue
        labels.lines += 1
        parsed, why = _label(raw)
        if parsed is None:
            labels.malformed += 1
            if len(labels.malformed_lines) < MAX_EXAMPLES:
                labels.malformed_lines.append((n, why))
            continue
        a, b, duplicate = parsed
        if a == b:
            labels.same_url += 1
            continue
        key = (a, b) if a < b else (b, a)
        lines[key] += 1
        answers.setdefault(key, set()).add(duplicate)
        first.setdefault(key, LabelledPair(a, b, duplicate, n))
    for key, pair in first.items():
        if len(answers[key]) > 1:
            labels.conflicting += 1
            labels.conflicting_lines += lines[key]
        else:
            labels.pairs.append(pair)
            labels.repeated += lines[key] - 1
    return labels


# --- pages ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PageInfo:
    """A page of a pair: its fingerprint and sketch, or the status that says why it has none; its language."""

    fingerprint: int | None
    sketch: bytes | None
    status: str | None = None
    lang: str = "und"


@dataclass
class PageCounts:
    """What reading the pages met."""

    inputs: list[str] = field(default_factory=list)
    #: URLs named by the pairs, found in the inputs, fingerprinted; the others by status.
    wanted: int = 0
    found: int = 0
    fingerprinted: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    #: JSON lines read, and those that are not a page (the first :data:`MAX_EXAMPLES` as (input, line, reason)).
    lines: int = 0
    malformed: int = 0
    malformed_lines: list[tuple[str, int, str]] = field(default_factory=list)
    #: What the WARC inputs held (pages, records skipped by reason, damaged places).
    warc: WarcCounts = field(default_factory=WarcCounts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "inputs": list(self.inputs),
            "wanted": self.wanted,
            "found": self.found,
            "fingerprinted": self.fingerprinted,
            "not_fingerprinted": dict(sorted(self.failed.items())),
            "json_lines": self.lines,
            "malformed": self.malformed,
            "malformed_lines": [{"input": i, "line": n, "reason": why} for i, n, why in self.malformed_lines],
            "warc": {
                "files": self.warc.files,
                "records": self.warc.records,
                "pages": self.warc.pages,
                "skipped": dict(sorted(self.warc.skipped.items())),
                "damaged": [str(d) for d in self.warc.damaged],
            },
        }


class PagesUnreadable(Exception):
    """A pages input failed while it was read (a ``.gz`` cut short, a read error): ``path`` names it, the error
    is the ``__cause__``."""

    def __init__(self, path: str, error: BaseException) -> None:
        super().__init__(f"{path}: read error: {error}")
        self.path = path


_LETTER = re.compile(r"[^\W\d_]")
_CJK = re.compile("[\u3400-\u9fff\uf900-\ufaff]")
_LANG = re.compile(r"[A-Za-z]{2,8}")


def language(html: bytes | str, encoding: str | None = None, max_bytes: int = DEFAULTS.fingerprint.max_bytes) -> str:
    """A page's language: the primary subtag of its ``<html lang>``, lower-cased (``zh-CN``: ``zh``); without one,
    ``zh`` when CJK ideographs are at least :data:`CJK_SHARE` of the letters of its visible text, else ``und``."""
    try:
        root = parse(html, encoding, max_bytes).root
    except NotHtml:
        return "und"
    if root is None:
        return "und"
    primary = re.split(r"[-_]", (root.get("lang") or "").strip(), maxsplit=1)[0]
    if _LANG.fullmatch(primary):
        return primary.lower()
    text = " ".join(root.itertext())
    letters = len(_LETTER.findall(text))
    return "zh" if letters and len(_CJK.findall(text)) >= CJK_SHARE * letters else "und"


def _input_size(path: str) -> int:
    """About how many bytes of pages a JSON Lines input holds (a ``.gz`` file counts five times its size)."""
    size = os.stat(path).st_size
    return size * 5 if path.endswith(".gz") else size


def _json_pages(path: str, counts: PageCounts) -> Iterator[Page]:
    with open_lines(path) as stream:
        for n, line in enumerate(stream, 1):
            if not line.strip():
                continue
            counts.lines += 1
            url, html, why = parse_line(line)
            if url is None or html is None:
                counts.malformed += 1
                if len(counts.malformed_lines) < MAX_EXAMPLES:
                    counts.malformed_lines.append((path, n, why or "malformed"))
                continue
            yield Page(url, html)


def load_pages(
    inputs: Sequence[str],
    urls: Iterable[str],
    *,
    config: FilterConfig = DEFAULTS,
    workers: int | None = 1,
    lang_urls: Iterable[str] | None = None,
) -> tuple[dict[str, PageInfo], PageCounts]:
    """Fingerprint the pages of ``inputs`` whose URL is in ``urls`` (the first page of each URL), in ``workers``
    processes (None: as ``dedup`` chooses by the inputs' size), and tell the language of those in ``lang_urls``
    (default: all).  Every input is checked first: one that does not exist raises :class:`FileNotFoundError`
    before any work; a read error part way raises :class:`PagesUnreadable`."""
    wanted = set(urls)
    langs_wanted = wanted if lang_urls is None else set(lang_urls) & wanted
    counts = PageCounts(inputs=list(inputs), wanted=len(wanted))
    max_bytes = config.fingerprint.max_bytes + 1  # the work cap, and a byte to know a page was cut
    sources: list[tuple[str, Iterable[Page]]] = []
    size = 0
    for path in inputs:
        if is_warc_input(path):
            reader = WarcReader(path, max_bytes=max_bytes, counts=counts.warc)
            size += reader.size + reader.compressed * 4
            sources.append((path, reader))
        else:
            size += _input_size(path)
            sources.append((path, _json_pages(path, counts)))
    langs: dict[str, str] = {}

    def items() -> Iterator[Page]:
        seen: set[str] = set()
        for path, source in sources:
            pages = iter(source)
            while True:
                try:
                    page = next(pages, None)
                except (OSError, EOFError) as exc:
                    raise PagesUnreadable(path, exc) from exc
                if page is None:
                    break
                if page.url in wanted and page.url not in seen:
                    seen.add(page.url)
                    if page.url in langs_wanted:
                        langs[page.url] = language(page.html, page.encoding, max_bytes)
                    yield page

    if workers is None:
        workers = auto_workers(size)
    infos: dict[str, PageInfo] = {}
    for url, value, status, _reason, sketch in fingerprint_items(items(), config=config.fingerprint, workers=workers):
        if url is None:  # pragma: no cover - every item is a Page with a URL
            continue
        counts.found += 1
        if value is None or status is not None:
            counts.failed[str(status)] += 1
            infos[url] = PageInfo(None, None, str(status), langs.get(url, "und"))
        else:
            counts.fingerprinted += 1
            infos[url] = PageInfo(value, sketch, None, langs.get(url, "und"))
    return infos, counts


# --- pairs ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PairResult:
    """A labelled pair, measured: Hamming distance, sketch similarity, whether the index's tables can find it (within
    distance 4, or sharing a table's leading bits), the language of page a and the host of url_a."""

    url_a: str
    url_b: str
    duplicate: bool
    distance: int
    similarity: float
    found: bool
    lang: str = "und"
    host: str = ""
    #: The two pages' spot similarity (model v6's prose verifier; -1: not both article-like).
    spots: float = -1.0

    def flagged(self, k: int, t: float) -> bool:
        """Whether the filter at (k, t) calls the two pages near-duplicates (judging this pair alone): the word
        sketches verify, or (model v6) the spots of two article-like pages do."""
        rule = Rule(k, t)
        return bool(verdict(self.distance, self.found, self.similarity, rule)) or bool(
            spots_verdict(self.distance, self.found, self.spots, rule)
        )


def host_of(url: str) -> str:
    """The host of a URL, lower-case (``-`` when it has none)."""
    try:
        return (urlsplit(url).hostname or "-").lower()
    except ValueError:
        return "-"


def measure_pairs(
    pairs: Iterable[LabelledPair], pages: dict[str, PageInfo], *, config: FilterConfig = DEFAULTS
) -> tuple[list[PairResult], Counter[str]]:
    """Each pair whose two pages have fingerprints, measured; the others counted by reason (``missing_page``, or
    ``page_`` and the status of a page that could not be fingerprinted, page a's first)."""
    design = TableDesign.parse(config.tables)
    out: list[PairResult] = []
    skipped: Counter[str] = Counter()
    for pair in pairs:
        a, b = pages.get(pair.url_a), pages.get(pair.url_b)
        why = next((_unusable(info) for info in (a, b) if _unusable(info)), None)
        if why is not None:
            skipped[why] += 1
            continue
        assert a is not None and b is not None and a.fingerprint is not None and b.fingerprint is not None
        assert a.sketch is not None and b.sketch is not None
        d = (a.fingerprint ^ b.fingerprint).bit_count()
        found = d <= design.k or design.agree_on_a_lead(a.fingerprint, b.fingerprint)
        words = config.fingerprint.word_sketch_bytes  # the word sketch, then (model v6) the prose part
        s = similarity(a.sketch[:words], b.sketch[:words])
        spots = spots_of(a.sketch, b.sketch, words)
        out.append(PairResult(pair.url_a, pair.url_b, pair.duplicate, d, s, found, a.lang, host_of(pair.url_a), spots))
    return out, skipped


def _unusable(info: PageInfo | None) -> str | None:
    if info is None:
        return MISSING_PAGE
    if info.fingerprint is None or info.sketch is None:
        return f"page_{info.status}"
    return None


# --- scores --------------------------------------------------------------------------------------


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (95 % by default); None when ``n`` is 0."""
    if n <= 0:
        return None
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    lo = 0.0 if successes <= 0 else max(0.0, centre - half)
    hi = 1.0 if successes >= n else min(1.0, centre + half)
    return lo, hi


@dataclass(frozen=True, slots=True)
class Metrics:
    """The flags of one setting scored against the labels."""

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float | None:
        """Share of the flagged pairs that are labelled duplicates; None when nothing is flagged."""
        flagged = self.tp + self.fp
        return self.tp / flagged if flagged else None

    @property
    def recall(self) -> float | None:
        """Share of the labelled duplicates that are flagged; None without labelled duplicates."""
        positives = self.tp + self.fn
        return self.tp / positives if positives else None

    @property
    def f1(self) -> float | None:
        """``2 TP / (2 TP + FP + FN)``: 0 when duplicates exist and none is flagged; None with neither."""
        denominator = 2 * self.tp + self.fp + self.fn
        return 2 * self.tp / denominator if denominator else None

    @property
    def precision_ci(self) -> tuple[float, float] | None:
        return wilson(self.tp, self.tp + self.fp)

    @property
    def recall_ci(self) -> tuple[float, float] | None:
        return wilson(self.tp, self.tp + self.fn)

    def as_dict(self) -> dict[str, Any]:
        p_ci, r_ci = self.precision_ci, self.recall_ci
        return {
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "precision_ci": None if p_ci is None else list(p_ci),
            "recall_ci": None if r_ci is None else list(r_ci),
        }


def t_grid(current: float) -> list[float]:
    """The thresholds swept: :data:`T_GRID` and the current one, in order."""
    return sorted({*T_GRID, float(current)})


@dataclass(frozen=True, slots=True)
class Choice:
    """A setting, how it scores, and why its labelled duplicates are missed: further than k (``beyond_k``), within
    k but sharing no table (``no_table``), found but less similar than t (``below_t``)."""

    k: int
    t: float
    metrics: Metrics
    beyond_k: int = 0
    no_table: int = 0
    below_t: int = 0

    @property
    def t_text(self) -> str:
        return format_t(self.t)

    @property
    def scrapy(self) -> str:
        """The Scrapy settings of this choice."""
        return f"SIMHASH_MAX_DISTANCE = {self.k}\nSIMHASH_MIN_SIMILARITY = {self.t_text}"

    @property
    def command_line(self) -> str:
        """The command-line options of this choice."""
        return f"-k {self.k} -t {self.t_text}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "t": self.t,
            **self.metrics.as_dict(),
            "missed": {"beyond_k": self.beyond_k, "no_table": self.no_table, "below_t": self.below_t},
            "scrapy": {"SIMHASH_MAX_DISTANCE": self.k, "SIMHASH_MIN_SIMILARITY": self.t},
            "command_line": self.command_line,
        }


def format_t(t: float) -> str:
    """A threshold as written in settings and tables: two decimals (``0.70``), more when it has them."""
    two = f"{t:.2f}"
    return two if float(two) == t else f"{t:g}"


@dataclass(frozen=True, slots=True)
class Group:
    """The scores of the pairs of one language or host, at the current and at the recommended (best F1) setting."""

    name: str
    pairs: int
    duplicates: int
    distinct: int
    current: Metrics
    best: Metrics | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pairs": self.pairs,
            "duplicates": self.duplicates,
            "distinct": self.distinct,
            "current": self.current.as_dict(),
            "best_f1": None if self.best is None else self.best.as_dict(),
        }


@dataclass
class Analysis:
    """The sweep over (k, t) of measured pairs, the recommendation and the breakdowns."""

    k: int
    t: float
    tables: str
    pairs: list[PairResult]
    ks: list[int]
    ts: list[float]
    #: Metrics of every (k, t) of the grid.
    cells: dict[tuple[int, float], Metrics]
    #: The best F1 (None without any duplicate or flag); the best recall at precision >= MIN_PRECISION (None when
    #: no setting reaches it); the current setting.
    best_f1: Choice | None
    high_precision: Choice | None
    current: Choice
    by_language: list[Group]
    by_host: list[Group]
    warnings: list[str]
    note: str = NOTE

    @property
    def duplicates(self) -> int:
        return sum(p.duplicate for p in self.pairs)

    @property
    def distinct(self) -> int:
        return len(self.pairs) - self.duplicates

    @property
    def recommended(self) -> Choice:
        """The best-F1 setting, or the current one when there is none."""
        return self.best_f1 or self.current

    def metrics(self, k: int, t: float) -> Metrics:
        return self.cells[(k, t)]

    def distance_counts(self, duplicate: bool, top: int = 64) -> list[int]:
        """How many labelled duplicates (or distinct pairs) lie at each distance 0..top."""
        counts = [0] * (top + 1)
        for p in self.pairs:
            if p.duplicate is duplicate:
                counts[min(p.distance, top)] += 1
        return counts

    def as_dict(self) -> dict[str, Any]:
        return {
            "settings": {"k": self.k, "t": self.t, "tables": self.tables},
            "pairs": {"used": len(self.pairs), "duplicates": self.duplicates, "distinct": self.distinct},
            "grid": {"k": list(self.ks), "t": list(self.ts)},
            "sweep": [{"k": k, "t": t, **m.as_dict()} for (k, t), m in self.cells.items()],
            "recommendation": {
                "best_f1": None if self.best_f1 is None else self.best_f1.as_dict(),
                "high_precision": None if self.high_precision is None else self.high_precision.as_dict(),
                "high_precision_rule": f"the highest recall at precision >= {MIN_PRECISION} (point estimate)",
                "current": self.current.as_dict(),
            },
            "by_language": [g.as_dict() for g in self.by_language],
            "by_host": [g.as_dict() for g in self.by_host],
            "distances": {
                "duplicates": self.distance_counts(True),
                "distinct": self.distance_counts(False),
            },
            "warnings": list(self.warnings),
            "note": self.note,
        }


class _Arrays:
    """The pairs as arrays, to score many settings quickly."""

    def __init__(self, pairs: Sequence[PairResult]) -> None:
        self.d = np.fromiter((p.distance for p in pairs), dtype=np.int64, count=len(pairs))
        self.s = np.fromiter((p.similarity for p in pairs), dtype=np.float64, count=len(pairs))
        self.found = np.fromiter((p.found for p in pairs), dtype=bool, count=len(pairs))
        self.y = np.fromiter((p.duplicate for p in pairs), dtype=bool, count=len(pairs))
        self.spots = np.fromiter((p.spots for p in pairs), dtype=np.float64, count=len(pairs))

    def flags(self, k: int, t: float) -> np.ndarray:
        """What the filter at (k, t) flags: the rule, pair by pair."""
        rule = Rule(k, t)
        return verdict(self.d, self.found, self.s, rule) | spots_verdict(self.d, self.found, self.spots, rule)

    def metrics(self, flags: np.ndarray, mask: np.ndarray | None = None) -> Metrics:
        y = self.y
        if mask is not None:
            flags, y = flags[mask], y[mask]
        tp = int(np.count_nonzero(flags & y))
        fp = int(np.count_nonzero(flags)) - tp
        positives = int(np.count_nonzero(y))
        return Metrics(tp, fp, positives - tp, len(y) - positives - fp)

    def choice(self, k: int, t: float, metrics: Metrics) -> Choice:
        missed = self.y & ~self.flags(k, t)
        beyond = missed & (self.d > k)
        no_table = missed & (self.d <= k) & ~self.found
        below = missed & (self.d <= k) & self.found
        return Choice(k, t, metrics, int(np.count_nonzero(beyond)), int(np.count_nonzero(no_table)),
                      int(np.count_nonzero(below)))  # fmt: skip


def _steps(k: int, t: float, k0: int, t0: float) -> float:
    """How far a setting is from the current one: steps of k plus steps of 0.05 of t."""
    return round(abs(k - k0) + abs(t - t0) / T_STEP, 9)


def analyse(pairs: Sequence[PairResult], *, config: FilterConfig = DEFAULTS) -> Analysis:
    """Score every (k, t) of the grid on measured pairs, recommend settings, and break the scores down by language and
    host.  ``config``: the current settings (its k and t are compared, and its t is in the grid)."""
    k0, t0 = config.max_distance, float(config.min_similarity)
    arrays = _Arrays(pairs)
    ks, ts = list(K_VALUES), t_grid(t0)
    cells = {(k, t): arrays.metrics(arrays.flags(k, t)) for k in ks for t in ts}

    scored = [(m.f1, k, t) for (k, t), m in cells.items() if m.f1 is not None]
    best_f1 = None
    if scored:
        _, k, t = min(scored, key=lambda c: (-c[0], _steps(c[1], c[2], k0, t0), c[1], -c[2]))
        best_f1 = arrays.choice(k, t, cells[(k, t)])
    precise = [
        (m.recall, m.precision, k, t)
        for (k, t), m in cells.items()
        if m.precision is not None and m.recall is not None and m.precision >= MIN_PRECISION
    ]
    high_precision = None
    if precise:
        _, _, k, t = min(precise, key=lambda c: (-c[0], -c[1], _steps(c[2], c[3], k0, t0), c[2], -c[3]))
        high_precision = arrays.choice(k, t, cells[(k, t)])
    current = arrays.choice(k0, t0, cells[(k0, t0)])
    recommended = best_f1 or current

    def groups(names: Sequence[str], top: int | None) -> list[Group]:
        counted = Counter(names)
        order = sorted(counted, key=lambda name: (-counted[name], name))
        shown = order if top is None or len(order) <= top else order[:top]
        rest = set(order) - set(shown)
        labels = np.array([name if name not in rest else "\0other" for name in names], dtype=object)
        now, best = arrays.flags(k0, t0), arrays.flags(recommended.k, recommended.t)
        out = []
        for name in [*shown, *(["\0other"] if rest else [])]:
            mask = labels == name
            dup = int(np.count_nonzero(arrays.y[mask]))
            n = int(np.count_nonzero(mask))
            out.append(Group(name.replace("\0", ""), n, dup, n - dup, arrays.metrics(now, mask),
                             arrays.metrics(best, mask) if best_f1 is not None else None))  # fmt: skip
        return out

    warnings = []
    positives = int(np.count_nonzero(arrays.y))
    negatives = len(pairs) - positives
    if positives == 0:
        warnings.append("no labelled duplicates: recall and F1 cannot be measured")
    elif positives < FEW_PAIRS:
        warnings.append(f"only {positives} labelled duplicate pairs: the numbers are rough (aim for {FEW_PAIRS}+)")
    if negatives == 0:
        warnings.append("no labelled distinct pairs: false positives cannot be measured, precision is 1 by default")
    elif negatives < FEW_PAIRS:
        warnings.append(f"only {negatives} labelled distinct pairs: the numbers are rough (aim for {FEW_PAIRS}+)")
    return Analysis(
        k=k0,
        t=t0,
        tables=config.tables,
        pairs=list(pairs),
        ks=ks,
        ts=ts,
        cells=cells,
        best_f1=best_f1,
        high_precision=high_precision,
        current=current,
        by_language=groups([p.lang for p in pairs], None),
        by_host=groups([p.host for p in pairs], TOP_HOSTS),
        warnings=warnings,
    )


# --- the whole run -------------------------------------------------------------------------------


@dataclass
class Calibration:
    """A calibration run: the labels read, the pages read, the pairs left out for their pages, and the analysis."""

    labels: Labels
    pages: PageCounts
    skipped: Counter[str]
    analysis: Analysis

    def as_dict(self) -> dict[str, Any]:
        out = self.analysis.as_dict()
        out["labels"] = self.labels.as_dict()
        out["pages"] = self.pages.as_dict()
        out["pairs"]["skipped"] = dict(sorted(self.skipped.items()))
        return out


def calibrate(
    labels: str | os.PathLike[str] | IO[bytes] | Labels,
    pages: Sequence[str],
    *,
    config: FilterConfig = DEFAULTS,
    workers: int | None = 1,
) -> Calibration:
    """Read the labelled pairs (a file, a binary stream, or :class:`Labels` already read), fingerprint their pages
    from ``pages`` (JSON Lines or WARC inputs) with ``config``'s model in ``workers`` processes, measure the pairs
    and analyse them at ``config``'s k and t.  Raises ``OSError``/``EOFError`` when the labels cannot be read,
    ``FileNotFoundError`` for a pages input that does not exist, :class:`PagesUnreadable` when one fails part way,
    and :class:`~simhash_filter.batch.dedup.WorkersFailed` as ``dedup`` does."""
    read = labels if isinstance(labels, Labels) else read_labels(labels)
    urls = {u for p in read.pairs for u in (p.url_a, p.url_b)}
    infos, counts = load_pages(pages, urls, config=config, workers=workers, lang_urls={p.url_a for p in read.pairs})
    measured, skipped = measure_pairs(read.pairs, infos, config=config)
    return Calibration(read, counts, skipped, analyse(measured, config=config))


# --- charts --------------------------------------------------------------------------------------


def charts(analysis: Analysis) -> list[str]:
    """The analysis as SVG charts: precision, recall and F1 against k (at the current t), with a marker at the
    recommended k; the same against t (at the current k); the labelled duplicates by distance, those within the
    recommended k highlighted."""
    a, rec = analysis, analysis.recommended
    rec_text = f"best F1: k = {rec.k}, t = {rec.t_text}" if a.best_f1 is not None else ""

    def series(cells: Sequence[Metrics], extra: dict[str, list[float | None]]) -> dict[str, list[float | None]]:
        return {
            "precision": [m.precision for m in cells],
            "recall": [m.recall for m in cells],
            "F1": [m.f1 for m in cells],
            **extra,
        }

    extra_k = {} if rec.t == a.t else {f"F1 at t = {rec.t_text}": [a.metrics(k, rec.t).f1 for k in a.ks]}
    by_k = line_chart(
        a.ks,
        series([a.metrics(k, a.t) for k in a.ks], extra_k),
        title=f"Precision, recall and F1 against k (t = {format_t(a.t)})",
        x_label="k (Hamming distance)",
        y_label="score",
        marker=rec.k if a.best_f1 is not None else None,
        marker_label=rec_text,
    )
    extra_t = {} if rec.k == a.k else {f"F1 at k = {rec.k}": [a.metrics(rec.k, t).f1 for t in a.ts]}
    by_t = line_chart(
        a.ts,
        series([a.metrics(a.k, t) for t in a.ts], extra_t),
        title=f"Precision, recall and F1 against t (k = {a.k})",
        x_label="t (minimum similarity; 0: no verification)",
        y_label="score",
        marker=rec.t if a.best_f1 is not None else None,
        marker_label=rec_text,
    )
    top = 16
    counts = a.distance_counts(True, top=top + 1)
    labels = [str(d) for d in range(top + 1)] + [f">{top}"]
    histogram = bar_chart(
        labels,
        counts,
        title=f"Labelled duplicates by Hamming distance (within k = {rec.k} highlighted)",
        x_label="Hamming distance of the two fingerprints",
        y_label="pairs",
        highlight=range(rec.k + 1),
    )
    return [by_k, by_t, histogram]
