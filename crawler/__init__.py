"""The Scrapy project of this repository: a generic site crawler (``scrapy crawl site``) that keeps
near-duplicate pages out of storage with the :mod:`simhash_filter` add-on, and its demo."""
