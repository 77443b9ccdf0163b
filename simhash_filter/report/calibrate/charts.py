"""A calibration's analysis drawn as SVG charts (:mod:`simhash_filter.report.svg`)."""

from __future__ import annotations

from collections.abc import Sequence

from simhash_filter.report.calibrate.scores import Analysis, Metrics, format_t
from simhash_filter.report.svg import bar_chart, line_chart

__all__ = ["charts"]


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
