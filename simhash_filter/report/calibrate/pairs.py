"""The labelled pairs measured: each pair's Hamming distance, sketch similarity (and, model v6, spot similarity;
model v7, whether the two pages are apart), whether the index's tables can find it, and whether the filter's rule
flags it at a given (k, t)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.index.nearduplicate import Rule, apart, spots_of, spots_verdict, verdict
from simhash_filter.index.tables import TableDesign
from simhash_filter.model.sketch import similarity
from simhash_filter.report.calibrate.labels import LabelledPair
from simhash_filter.report.calibrate.pages import PageInfo

__all__ = ["MISSING_PAGE", "PairResult", "host_of", "measure_pairs"]

MISSING_PAGE = "missing_page"


@dataclass(frozen=True, slots=True)
class PairResult:
    """A labelled pair, measured: Hamming distance, sketch similarity, whether the index's tables can find it (within
    distance 4, or sharing a table's leading bits), the language of page a and the host of url_a."""

    url_a: str
    url_b: str
    duplicate: bool
    distance: int
    similarity: float
    found: bool
    lang: str = "und"
    host: str = ""
    #: The two pages' spot similarity (model v6's prose verifier; -1: not both article-like).
    spots: float = -1.0
    #: Two pages of one host that are distinct whatever their sketches say (model v7's :func:`apart`).
    apart: bool = False

    def flagged(self, k: int, t: float) -> bool:
        """Whether the filter at (k, t) calls the two pages near-duplicates (judging this pair alone): the word
        sketches verify, or (model v6) the spots of two article-like pages do, and (model v7) they are not apart."""
        rule = Rule(k, t)
        return not self.apart and (
            bool(verdict(self.distance, self.found, self.similarity, rule))
            or bool(spots_verdict(self.distance, self.found, self.spots, rule))
        )


def host_of(url: str) -> str:
    """The host of a URL, lower-case (``-`` when it has none)."""
    try:
        return (urlsplit(url).hostname or "-").lower()
    except ValueError:
        return "-"


def measure_pairs(
    pairs: Iterable[LabelledPair], pages: dict[str, PageInfo], *, config: FilterConfig = DEFAULTS
) -> tuple[list[PairResult], Counter[str]]:
    """Each pair whose two pages have fingerprints, measured; the others counted by reason (``missing_page``, or
    ``page_`` and the status of a page that could not be fingerprinted, page a's first)."""
    design = TableDesign.parse(config.tables)
    out: list[PairResult] = []
    skipped: Counter[str] = Counter()
    for pair in pairs:
        a, b = pages.get(pair.url_a), pages.get(pair.url_b)
        why = next((_unusable(info) for info in (a, b) if _unusable(info)), None)
        if why is not None:
            skipped[why] += 1
            continue
        assert a is not None and b is not None and a.fingerprint is not None and b.fingerprint is not None
        assert a.sketch is not None and b.sketch is not None
        d = (a.fingerprint ^ b.fingerprint).bit_count()
        found = d <= design.k or design.agree_on_a_lead(a.fingerprint, b.fingerprint)
        words = config.fingerprint.word_sketch_bytes  # the word sketch, then (model v6) the prose part
        s = similarity(a.sketch[:words], b.sketch[:words])
        spots = spots_of(a.sketch, b.sketch, words)
        distinct = apart(pair.url_a, pair.url_b, a.sketch, b.sketch, words)
        out.append(PairResult(pair.url_a, pair.url_b, pair.duplicate, d, s, found, a.lang, host_of(pair.url_a), spots,
                              distinct))  # fmt: skip
    return out, skipped


def _unusable(info: PageInfo | None) -> str | None:
    if info is None:
        return MISSING_PAGE
    if info.fingerprint is None or info.sketch is None:
        return f"page_{info.status}"
    return None
