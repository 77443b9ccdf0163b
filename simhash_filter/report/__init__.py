"""What the filter did and how to tune it: the self-contained HTML report of a crawl's feed or a ``dedup`` run
(:mod:`~simhash_filter.report.build`, :mod:`~simhash_filter.report.html`) and the calibration of k and the
similarity threshold on labelled pairs (:mod:`~simhash_filter.report.calibrate`); plots as SVG of our own
(:mod:`~simhash_filter.report.svg`)."""

from __future__ import annotations

import os
import re

#: ``report``: pairs shown with their texts and explanation (the rest are listed with their numbers only).
DEFAULT_MAX_PAIRS = 10_000
#: ``report``: a page's main text is cut at this many characters.
DEFAULT_TEXT_CAP = 10_000

_FEED_SUFFIX = re.compile(r"(\.(jsonl|jl|jsonlines|json))?(\.gz)?$")


def report_path(feed: str) -> str:
    """Where the report of a feed goes by default: ``out/pages.jsonl`` -> ``out/pages.report.html``."""
    head, name = os.path.split(feed)
    return os.path.join(head, _FEED_SUFFIX.sub("", name, count=1) + ".report.html")
