"""The demo's report (``crawler/demo.py``): its counts agree with the crawl's summary, and say why they differ."""

from __future__ import annotations

from crawler.demo import Truth, report

URL = "http://127.0.0.1:8000"
TRUTH = {"127.0.0.1/a": Truth("g1", "original", "en"), "127.0.0.1/b": Truth("g1", "copy", "en")}


def _log(checked: int, size: int) -> str:
    return (
        f"simhash: dropped {URL}/b: near-duplicate of {URL}/a (distance 1, similarity 0.9)\n"
        f"simhash: {checked} pages checked: 1 kept, 1 near-duplicates (1 dropped, 0 flagged); 1 skipped (1 empty); "
        f"index size {size}; fingerprinting 0.30 ms/page in the reactor thread (0.00 s in all)\n"
    )


def test_the_pages_stored_are_those_kept_and_those_let_through_unchecked():
    """The feed holds the pages the filter kept and the pages it could not check (let through): the line that
    counts the stored pages says both, so that it agrees with the summary's 'kept'."""
    items = [{"url": f"{URL}/a", "fingerprint": "0123456789abcdef"}, {"url": f"{URL}/empty", "text": ""}]
    lines = report(items, _log(2, 2), TRUTH, "drop")
    stored = next(line for line in lines if line.startswith("Stored"))
    assert stored.startswith("Stored 2 pages: the 1 the filter kept and 1 it let through unchecked")
    assert "; dropped 1 near-duplicates." in stored


def test_an_index_smaller_than_the_pages_checked_is_explained():
    """The index holds fewer pages than were checked when a flood's copies were not stored: a line says why;
    when it holds them all, a line says that too."""
    items = [{"url": f"{URL}/a", "fingerprint": "0123456789abcdef"}]
    smaller = report(items, _log(2, 1), TRUTH, "drop")
    assert any("The index holds 1 of the 2 checked pages" in line and "4 near-duplicates" in line for line in smaller)
    full = report(items, _log(2, 2), TRUTH, "drop")
    assert any(line.startswith("(Index size 2: every checked page is stored") for line in full)
