"""The labelled pairs measured: each pair's Hamming distance, sketch similarity (and, model v6, spot similarity;
model v7, whether the two pages are apart) and whether the index's tables can find it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.index.nearduplicate import apart, host_of, spots_of
from simhash_filter.index.tables import TableDesign
from simhash_filter.model.sketch import similarity
from simhash_filter.report.calibrate.labels import LabelledPair
from simhash_filter.report.calibrate.pages import PageInfo

__all__ = ["MISSING_PAGE", "PairResult", "measure_pairs"]

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
        host = host_of(pair.url_a) or "-"
        out.append(PairResult(pair.url_a, pair.url_b, pair.duplicate, d, s, found, a.lang, host, spots, distinct))
    return out, skipped


def _unusable(info: PageInfo | None) -> str | None:
    if info is None:
        return MISSING_PAGE
    if info.fingerprint is None or info.sketch is None:
        return f"page_{info.status}"
    return None
