"""The near-duplicate index: which stored fingerprints are within Hamming distance k of a page's.

``tables`` is the bottom layer (value types, permuted-table designs, bit helpers; it imports no store),
``backends`` keeps the tables by URI scheme (``memory://``, ``file://``, ``redis://``), and
``nearduplicate`` is the facade, :class:`~simhash_filter.index.nearduplicate.NearDuplicateIndex`, which
verifies the candidates by their sketches.

Imports nothing of the Scrapy integration or the command line, and of the model only its sketches.
"""
