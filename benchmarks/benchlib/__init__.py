"""What the benchmarks share, so that each benchmark script is a short script on top of it.

- :mod:`benchlib.data`: the public near-duplicate set (``../shared/datasets/neardup-public``: its pages and
  labels), JSON Lines files (gzip or not), pages by language, random fingerprints and URL keys;
- :mod:`benchlib.text`: visible text, shingles and Jaccard (the public set's ground-truth rule), its language, and
  the named variants other benchmarks measure with (the real-web labels', extraction's, the fixture pages');
- :mod:`benchlib.webpages`: real pages of public collections read from disk, their main block located;
- :mod:`benchlib.webvariants`: near-duplicate variants of a real page (the real-web and documentation sets);
- :mod:`benchlib.site`: pages to serve on loopback with ``devsites.localsite`` (padding, links, a sitemap);
- :mod:`benchlib.crawl`: ``scrapy crawl site`` in a subprocess, timed, with its stats and items
  (:mod:`benchlib.scrapy_stats` is the Scrapy extension it loads there);
- :mod:`benchlib.measure`: a command's elapsed and CPU time, resident memory, medians and percentiles;
- :mod:`benchlib.report`: the argument parser, percent formatting, JSON output;
- :mod:`benchlib.mirrors`: the mirror twins of ``bench_crawl.py``.

The benchmarks run as modules from the repository root (``python -m benchmarks.speed.bench_crawl``), so that they
import this checkout's ``simhash_filter``, ``crawler`` and ``devsites`` without editing ``sys.path``.
"""

from __future__ import annotations

from pathlib import Path

#: The repository (``benchmarks/`` is in it).
ROOT = Path(__file__).resolve().parents[2]
