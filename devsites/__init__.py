"""Generated websites, page streams and local servers for the demo, the tests and the benchmarks.

Every word of a page is written or generated here (the crowd reads one page of the public set at run time as its
template); nothing is fetched from the network.  A development package: it stays in
the repository (like ``crawler/``, ``tests/`` and ``benchmarks/``) and is not part of the wheel.

- :mod:`devsites.localsite`: a local web server of fixed (or resolved) pages on 127.0.0.1 and 127.0.0.2.
- :mod:`devsites.sample`: a JSON Lines sample of generated article pages with known near-duplicates.
- :mod:`devsites.demosite`: the demo's website (the sample as a site with its mirror) and the truth about it.
- :mod:`devsites.dupsite`: sites whose pages are reached under many URLs (the tests of saving downloads).
  Their parts: :mod:`devsites.generated` (the base class), :mod:`devsites.newssite`, :mod:`devsites.catalogue`.
- :mod:`devsites.floods`: duplicate-flood page streams and an infinite calendar (a crawler trap).
- :mod:`devsites.crowd`: a crowd of look-alike pages of one real template.
- :mod:`devsites.pages`: the tests' fixture articles in four site templates.
- :mod:`devsites.site_server`: the crawl tests' website, built from those fixtures (a subprocess).
- :mod:`devsites.hostile`: a site of hostile pages (a gzip bomb, deep nesting, ...) for the fault-injection tests.
- :mod:`devsites.redis_server`: real ``redis-server`` processes and a 3-node Redis Cluster.
"""
