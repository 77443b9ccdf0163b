"""The Scrapy integration: the add-on, the downloader and spider middlewares, the item pipeline, the
``SIMHASH_*`` settings with their defaults, and the crawl filter that they share (which responses are
checked, where pages are fingerprinted, the index calls, the stats).

The only part of the package that imports Scrapy.
"""
