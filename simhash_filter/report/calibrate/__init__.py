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
is JSON-serialisable; :func:`charts` draws it as SVG.  No printing.  One module per job: the labels
(:mod:`.labels`), the pages (:mod:`.pages`), the pairs measured (:mod:`.pairs`), the scores and recommendation
(:mod:`.scores`), the charts (:mod:`.charts`) and the whole run (:mod:`.run`); this package exports what the
``calibrate`` command and its tests use.
"""

from __future__ import annotations

from simhash_filter.report.calibrate.charts import charts
from simhash_filter.report.calibrate.labels import read_labels
from simhash_filter.report.calibrate.pages import PagesUnreadable, language
from simhash_filter.report.calibrate.pairs import PairResult
from simhash_filter.report.calibrate.run import Calibration, calibrate
from simhash_filter.report.calibrate.scores import (
    MIN_PRECISION,
    Analysis,
    Choice,
    Group,
    Metrics,
    analyse,
    format_t,
    wilson,
)

__all__ = [
    "MIN_PRECISION",
    "Analysis",
    "Calibration",
    "Choice",
    "Group",
    "Metrics",
    "PagesUnreadable",
    "PairResult",
    "analyse",
    "calibrate",
    "charts",
    "format_t",
    "language",
    "read_labels",
    "wilson",
]
