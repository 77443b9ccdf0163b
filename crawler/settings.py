"""Settings of the crawler project (``scrapy crawl site``).

The near-duplicate filter is one add-on line; every ``SIMHASH_*`` setting has a default (see
the README and docs/settings.md) and can be given here or on the command line (``-s SIMHASH_ACTION=flag``).
"""

BOT_NAME = "simhash-crawler"

SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"

# The near-duplicate filter: downloader middleware, spider middleware and item pipeline.
ADDONS = {"simhash_filter.SimhashAddon": 0}

# Crawl responsibly: identify the crawler and obey robots.txt.
USER_AGENT = "simhash-crawler (a Scrapy crawler that skips near-duplicate pages)"
ROBOTSTXT_OBEY = True
# Against other people's sites add a delay: -s DOWNLOAD_DELAY=1 (or AUTOTHROTTLE_ENABLED=True).
CONCURRENT_REQUESTS_PER_DOMAIN = 8

# Breadth-first: pages linked from the start pages are fetched (and kept) before deeper copies.
DEPTH_PRIORITY = 1
SCHEDULER_DISK_QUEUE = "scrapy.squeues.PickleFifoDiskQueue"
SCHEDULER_MEMORY_QUEUE = "scrapy.squeues.FifoMemoryQueue"

# Huge pages: warn above 8 MiB, give up above 32 MiB (the fingerprint reads the first 4 MB anyway).
DOWNLOAD_WARNSIZE = 8 * 1024 * 1024
DOWNLOAD_MAXSIZE = 32 * 1024 * 1024

# Storage: the site spider writes a JSON Lines feed here (overwritten on each crawl) unless a feed is
# given with -o/-O or FEEDS; empty: no default feed.  (FEEDS itself would add to -o/-O, not give way.)
SITE_FEED = "out/pages.jsonl"
FEED_EXPORT_ENCODING = "utf-8"

TELNETCONSOLE_ENABLED = False
