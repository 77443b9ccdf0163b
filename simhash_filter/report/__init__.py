"""What the filter did and how to tune it: the self-contained HTML report of a crawl's feed or a ``dedup`` run
(:mod:`~simhash_filter.report.build`, :mod:`~simhash_filter.report.html`) and the calibration of k and the
similarity threshold on labelled pairs (:mod:`~simhash_filter.report.calibrate`); plots as SVG of our own
(:mod:`~simhash_filter.report.svg`)."""

#: ``report``: pairs shown with their texts and explanation (the rest are listed with their numbers only).
DEFAULT_MAX_PAIRS = 10_000
#: ``report``: a page's main text is cut at this many characters.
DEFAULT_TEXT_CAP = 10_000
