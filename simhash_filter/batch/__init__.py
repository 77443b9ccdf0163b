"""Batch near-duplicate detection: ``dedup`` (one machine, in input order), ``warc`` (WARC files in and out of it)
and ``spark`` (the same decisions on Apache Spark).  Built on the model and the index; imports nothing of the
Scrapy integration or the command line."""
