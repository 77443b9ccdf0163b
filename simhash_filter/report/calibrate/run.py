"""A whole calibration run: the labels read, their pages fingerprinted, the pairs measured and analysed."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.report.calibrate.labels import Labels, read_labels
from simhash_filter.report.calibrate.pages import PageCounts, load_pages
from simhash_filter.report.calibrate.pairs import measure_pairs
from simhash_filter.report.calibrate.scores import Analysis, analyse

__all__ = ["Calibration", "calibrate"]


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
