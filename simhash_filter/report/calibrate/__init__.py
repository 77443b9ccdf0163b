"""Calibration of k and the similarity threshold t on pairs of pages labelled by hand (docs/calibrate.md): every
(k, t) scored against the labels, each pair judged alone, and the settings recommended.  Computation only:
:func:`calibrate` returns a :class:`Calibration` (:meth:`~Calibration.as_dict` is JSON-serialisable); :func:`charts`
draws it as SVG.
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
