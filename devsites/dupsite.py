"""Generated sites whose pages are reached under many URLs, with the ground truth of what each URL shows.

They are the test sites of "save downloads" (learning, from the near-duplicates the filter finds, which URL
rewrites do not change a page, and which host mirrors which): ``benchmarks/speed/bench_avoid.py`` crawls them and
``tests/test_dupsite.py`` checks them.

- :func:`dup_heavy_site`: a news site (articles in five English sections and a Chinese one, a fifth of them in
  Chinese) whose pages are linked under many URLs, the way real sites link them: a session id in the links of
  some pages (``;jsessionid=`` on the main host, ``?sid=`` on the mirror; one value per linking page, so many
  values per target), tracking parameters (``utm_source``, ``utm_medium``, ``ref``), a comment-order parameter
  that changes nothing (``sort``), print views (``/print/<path>``, bare chrome), ``index.html`` against ``/``,
  paths without their trailing slash, letter-case variants (the server ignores case), and paginated section
  listings (``?page=2`` is another page; ``?page=1`` is the listing itself).  Its mirror on 127.0.0.2 serves the
  same paths in other chrome (site name, navigation, footer, session parameter); the main host links to the
  mirror's copy of a third of the articles, and the mirror's pages link within the mirror.
- :func:`params_matter_site`: a catalogue where query parameters do change the page: ``/list?page=N``,
  ``/article?id=N``, ``&lang=zh`` (the Chinese version) against ``&lang=en`` (the English one, also the
  default), next to one parameter that does not matter (``sid``), and traps for a learner that
  over-generalises: ``/list?page=1`` is ``/list`` but ``?page=2`` is not; ``&lang=en`` is the page without
  ``lang`` but ``&lang=zh`` is not; an old id (``/article?id=1003``) shows article 3 but ids do matter.

Every page carries chrome (navigation, footer, inline scripts) and volatile bits (a reader counter and a
timestamp that depend on the URL), so that the URLs of one page serve near-duplicates, not exact copies.  The
articles are written by :mod:`devsites.sample` from its own vocabularies; the chrome's words are
written here.  A site is deterministic: the same arguments give the same bytes at every URL.  Links to the
other host carry the server's port, 8000 until :meth:`GeneratedSite.serve` binds one.  ``link_order`` shuffles the
links of the start page by a seed (the rest of the site as it is): the same site met by a crawl in another order,
for the tests that what a crawl learns does not depend on that order.

    site = dup_heavy_site(articles=150, seed=7)  # link_order=3: its start page's links in another order
    with site.serve() as server:            # crawl server.url("/"), allowing the hosts of site.hosts
        ...
    site.content_id("http://127.0.0.1:8000/News/2024-05/farming-0012/index.html;jsessionid=9AB3?utm_source=rss")
    # 'article:12': the distinct page a URL shows (None: a 404); site.distinct lists every distinct page
"""

from __future__ import annotations

from devsites.catalogue import ParamsMatterSite
from devsites.generated import MAIN, MIRROR, GeneratedSite, View, links_of
from devsites.newssite import DupHeavySite

__all__ = [
    "MAIN",
    "MIRROR",
    "SITES",
    "DupHeavySite",
    "GeneratedSite",
    "ParamsMatterSite",
    "View",
    "dup_heavy_site",
    "links_of",
    "params_matter_site",
]


def dup_heavy_site(
    articles: int = 150, seed: int = 7, per_page: int = 10, link_order: int | None = None
) -> DupHeavySite:
    """The duplicate-heavy news site and its mirror (see the module's docstring); ``link_order``: the start page's
    links shuffled by this seed (the same site met in another order)."""
    return DupHeavySite(articles, seed, per_page, link_order=link_order)


def params_matter_site(
    articles: int = 60, seed: int = 7, per_page: int = 10, aliases: int = 3, link_order: int | None = None
) -> ParamsMatterSite:
    """The catalogue where parameters matter (see the module's docstring); ``link_order`` as for
    :func:`dup_heavy_site`."""
    return ParamsMatterSite(articles, seed, per_page, aliases, link_order=link_order)


#: The sites by name: a factory of ``(articles, seed)``.
SITES = {"dup-heavy": dup_heavy_site, "params-matter": params_matter_site}
