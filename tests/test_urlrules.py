"""URL rules learned from near-duplicates (``simhash_filter.index.urlrules``): which rewrites explain a pair, when a
rule becomes active and when it is withdrawn, mirrors, and the evidence shared through counters."""

from __future__ import annotations

import pytest

from simhash_filter.index.urlrules import RuleBook, error_bound, explain, parse_url

A, FAR = 0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210  # two fingerprints 64 - popcount apart: distinct pages


def near(i: int) -> int:
    """A fingerprint of page i (pages far apart from each other)."""
    return (A * (2 * i + 1)) % 2**64


@pytest.mark.parametrize(
    ("duplicate", "kept", "rules"),
    [
        ("http://a.test/x?sid=12&utm_source=m", "http://a.test/x", ["param:sid", "param:utm_source"]),
        ("http://a.test/x;jsessionid=AB12", "http://a.test/x", ["param:;jsessionid"]),
        ("http://a.test/news/index.html", "http://a.test/news/", ["index"]),
        ("http://a.test/news/", "http://a.test/news", ["slash"]),
        ("http://a.test/News/Item", "http://a.test/news/item", ["case"]),
        ("http://a.test/print/news/item", "http://a.test/news/item", ["prefix:print"]),
        ("http://a.test/x?sort=asc&b=1", "http://a.test/x?b=1&sort=desc", ["param:sort"]),
        ("http://a.test/a", "http://a.test/b", None),  # different paths: a copy, not a variant
        ("http://a.test/x", "http://a.test/x", None),  # nothing to rewrite
    ],
)
def test_explain_finds_the_fewest_rewrites(duplicate, kept, rules):
    """A pair of URLs of one host is explained by the fewest path rules plus the parameters that differ."""
    assert explain(parse_url(duplicate), parse_url(kept)) == rules


def test_parse_url_sorts_parameters_and_refuses_other_schemes():
    """Parameters are sorted (Scrapy's canonical order), path parameters taken out of the path."""
    url = parse_url("HTTP://A.Test:8080/p;sid=1?b=2&a=1#frag")
    assert url is not None and url.host == "a.test:8080" and url.path == "/p"
    assert url.params == ((";sid", "1"), ("a", "1"), ("b", "2"))
    assert parse_url("mailto:x@a.test") is None and parse_url("ftp://a.test/") is None


def test_a_rule_acts_after_min_examples_and_rewrites_urls():
    """Five near-duplicate pairs that differ by a session id make the rule active; URLs of that host lose the
    parameter, other hosts' keep it."""
    book = RuleBook(min_examples=5)
    changes = []
    for i in range(5):
        book.observe(f"http://a.test/p{i}", near(i), None)
        changes += book.observe(f"http://a.test/p{i}?sid={i}", near(i) ^ 1, f"http://a.test/p{i}")
    assert [(v.host, v.rule, v.active) for v in changes] == [("a.test", "param:sid", True)]
    assert book.canonical(parse_url("http://a.test/q?sid=9&id=3")).text() == "http://a.test/q?id=3"
    assert book.canonical(parse_url("http://b.test/q?sid=9")).text() == "http://b.test/q?sid=9"
    assert book.rewrites(parse_url("http://a.test/q?sid=9")) == ["param:sid"]


def test_one_counterexample_withdraws_a_rule_for_good():
    """``page=1`` shows the listing itself, ``page=2`` another page: the second is a counterexample, and the rule
    stays withdrawn however many examples follow."""
    book = RuleBook(min_examples=2)
    for i in range(3):
        book.observe(f"http://a.test/l{i}", near(i), None)
        book.observe(f"http://a.test/l{i}?page=1", near(i), f"http://a.test/l{i}")
    assert "param:page" in book.rules("a.test")
    changes = book.observe("http://a.test/l0?page=2", near(0) ^ FAR, None)
    assert [(v.rule, v.active, v.negatives) for v in changes] == [("param:page", False, 1)]
    for i in range(3, 10):
        book.observe(f"http://a.test/l{i}", near(i), None)
        book.observe(f"http://a.test/l{i}?page=1", near(i), f"http://a.test/l{i}")
    assert "param:page" not in book.rules("a.test")


def test_ambiguous_distances_are_no_evidence_and_a_url_counts_once():
    """A near-duplicate of another page, between same_distance and distinct_distance from its rewrite's page, says
    nothing of the rewrite; the same URL seen again adds nothing."""
    book = RuleBook(min_examples=1, same_distance=3, distinct_distance=10)
    book.observe("http://a.test/p", A, None)
    book.observe("http://a.test/o", FAR, None)
    book.observe("http://a.test/p?x=1", A ^ 0b11111, "http://a.test/o")  # 5 bits from /p
    assert book.verdicts() == []
    book.observe("http://a.test/p?y=1", A ^ 1, "http://a.test/o")
    book.observe("http://a.test/p?y=1", A ^ 1, "http://a.test/o")
    assert [(v.rule, v.positives) for v in book.verdicts()] == [("param:y", 1)]


def test_a_page_the_filter_keeps_is_a_counterexample_of_the_rewrites_to_pages_before_it():
    """A page kept by the filter (not a near-duplicate of anything) whose URL a rule rewrites to a page fetched
    before: the rule would lose a page the filter stores, whatever the two fingerprints' distance."""
    book = RuleBook(min_examples=1)
    book.observe("http://a.test/p", A, None)
    book.observe("http://a.test/p?lang=fr", A ^ 0b111, None)
    assert [(v.rule, v.positives, v.negatives) for v in book.verdicts()] == [("param:lang", 0, 1)]


def test_mirror_hosts_are_learned_from_pairs_at_the_same_paths_and_withdrawn_by_a_distinct_page():
    """Pages of b.test that duplicate a.test's at the same paths make the pair mirrors; a page of b.test that is
    another page than a.test's at its path withdraws the verdict."""
    book = RuleBook(min_examples=3)
    for i in range(3):
        book.observe(f"http://a.test/n/{i}", near(i), None)
        book.observe(f"http://b.test/n/{i}", near(i) ^ 2, f"http://a.test/n/{i}")
    assert book.mirrors("b.test") == {"a.test"} and book.mirrors("a.test") == {"b.test"}
    book.observe("http://a.test/about", near(50), None)
    changes = book.observe("http://b.test/about", near(50) ^ FAR, None)
    assert [(v.kind, v.active) for v in changes] == [("mirror", False)]
    assert book.mirrors("b.test") == frozenset()


def test_validation_fetches_count_for_or_against_the_rules_they_test():
    """A page fetched although a rule would have left it: the same page as its target is an example, another
    page withdraws the rule."""
    book = RuleBook(min_examples=1)
    book.observe("http://a.test/p", A, None)
    book.observe("http://a.test/p?sid=1", A, "http://a.test/p")
    assert "param:sid" in book.rules("a.test")
    book.observe("http://a.test/q", near(3), None)
    changes = book.validated("http://a.test/q?sid=7&v=2", FAR, None, "http://a.test/q", ["param:sid"], None)
    assert [(v.rule, v.active) for v in changes] == [("param:sid", False)]


def test_counters_merge_what_other_processes_learned():
    """Two books sharing counters (through a store's totals) reach the same rules; counts not handed over yet
    stay pending."""
    store: dict[str, int] = {}

    def flush(book: RuleBook) -> None:
        for key, n in book.take_pending().items():
            store[key] = store.get(key, 0) + n
        book.merge(store)

    one, two = RuleBook(min_examples=4), RuleBook(min_examples=4)
    for i in range(4):
        book = one if i % 2 else two
        book.observe(f"http://a.test/p{i}", near(i), None)
        book.observe(f"http://a.test/p{i}?utm_source=x", near(i), f"http://a.test/p{i}")
    assert not one.rules("a.test") and not two.rules("a.test")
    flush(one)
    flush(two)
    flush(one)
    assert one.rules("a.test") == two.rules("a.test") == {"param:utm_source"}
    assert one.counts() == two.counts() == store


def test_error_bound_is_the_rule_of_three():
    """With n examples and no counterexample the error rate is below about 3 / n at 95 %."""
    assert error_bound(0) == pytest.approx(0.95)
    assert error_bound(99) == pytest.approx(0.0295, abs=1e-3)
