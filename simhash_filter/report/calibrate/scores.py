"""The measured pairs scored: every (k, t) of the grid against the labels (precision, recall, F1 with Wilson
intervals), the recommended settings, and the breakdowns by language and host."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.index.nearduplicate import Rule, spots_verdict, verdict
from simhash_filter.report.calibrate.pairs import PairResult

__all__ = [
    "K_VALUES",
    "MIN_PRECISION",
    "NOTE",
    "T_GRID",
    "Analysis",
    "Choice",
    "Group",
    "Metrics",
    "analyse",
    "format_t",
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
        self.apart = np.fromiter((p.apart for p in pairs), dtype=bool, count=len(pairs))

    def flags(self, k: int, t: float) -> np.ndarray:
        """What the filter at (k, t) flags: the rule, pair by pair."""
        rule = Rule(k, t)
        near = verdict(self.d, self.found, self.s, rule) | spots_verdict(self.d, self.found, self.spots, rule)
        return near & ~self.apart

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
