"""What the benchmarks share, so that each ``benchmarks/bench_*.py`` is a short script on top of it.

- :mod:`benchlib.data`: the public near-duplicate set (``../shared/datasets/neardup-public``: its pages and
  labels), JSON Lines files (gzip or not), pages by language, random fingerprints and URL keys;
- :mod:`benchlib.text`: visible text, shingles and Jaccard (the public set's ground-truth rule);
- :mod:`benchlib.site`: pages to serve on loopback with ``crawler.localsite`` (padding, links, a sitemap);
- :mod:`benchlib.crawl`: ``scrapy crawl site`` in a subprocess, timed, with its stats and items
  (:mod:`benchlib.scrapy_stats` is the Scrapy extension it loads there);
- :mod:`benchlib.measure`: a command's elapsed and CPU time, resident memory, medians and percentiles;
- :mod:`benchlib.report`: the argument parser, percent formatting, JSON output;
- :mod:`benchlib.mirrors`: the mirror twins of ``bench_crawl.py``.

Importing the package puts the repository root first on ``sys.path``: a benchmark run as
``python benchmarks/bench_x.py`` (``benchmarks/`` is then first on the path) measures this checkout.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: The repository (``benchmarks/`` is in it).
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
