"""The fingerprint model: how a page becomes a 64-bit simhash and a sketch (its modules: docs/design.md).

Imports nothing of the index, the Scrapy integration or the command line.
"""
