"""URL rules learned from near-duplicates (``simhash_filter.crawl.urlrules``): which rewrites explain a pair, when a
rule becomes active and when it is withdrawn, mirrors, and the evidence shared through counters."""

from __future__ import annotations

import random

import pytest

from simhash_filter.crawl.urlrules import RuleBook, explain, is_active, parse_url, precision_bound

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


def _variant_pairs(book: RuleBook, pages: range, param: str = "sid", host: str = "a.test") -> list:
    """Each page of *pages* fetched, then a URL of it with ``param`` set, found its near-duplicate: one positive
    pair each.  The verdicts whose state changed."""
    changes = []
    for i in pages:
        book.observe(f"http://{host}/p{i}", near(i), None)
        changes += book.observe(f"http://{host}/p{i}?{param}={i}", near(i) ^ 1, f"http://{host}/p{i}")
    return changes


def _distinct_pairs(book: RuleBook, pages: range, param: str = "sid", host: str = "a.test") -> list:
    """Each page of *pages* fetched, then a URL of it with ``param`` set that shows another page: one negative
    pair each."""
    changes = []
    for i in pages:
        book.observe(f"http://{host}/p{i}", near(i), None)
        changes += book.observe(f"http://{host}/p{i}?{param}=x", near(i) ^ FAR, None)
    return changes


def test_a_rule_acts_once_its_precision_bound_is_reached_and_rewrites_urls():
    """Pairs that differ by a session id and show the same page make the rule active once the lower bound of its
    precision reaches min_precision (11 pairs without a negative for 0.8): not on the first five.  URLs of that
    host then lose the parameter, other hosts' keep it."""
    book = RuleBook(min_examples=5, min_precision=0.8)
    assert _variant_pairs(book, range(10)) == []
    assert [(v.rule, v.positives) for v in book.verdicts()] == [("param:sid", 10)]
    changes = _variant_pairs(book, range(10, 11))
    assert [(v.host, v.rule, v.active, v.positives) for v in changes] == [("a.test", "param:sid", True, 11)]
    assert book.canonical(parse_url("http://a.test/q?sid=9&id=3")).text() == "http://a.test/q?id=3"
    assert book.canonical(parse_url("http://b.test/q?sid=9")).text() == "http://b.test/q?sid=9"
    assert book.rewrites(parse_url("http://a.test/q?sid=9")) == ["param:sid"]


@pytest.mark.parametrize(("positives", "negatives", "active"), [
    (0, 0, False), (5, 0, False), (10, 0, False), (11, 0, True), (200, 0, True),  # one-sided: enough pairs?
    (11, 1, False), (18, 1, False), (19, 1, True), (25, 2, False), (26, 2, True),  # rare negatives: filter noise
    (40, 10, False), (63, 56, False), (3, 70, False), (1000, 100, True), (1000, 300, False),  # parts that matter
])  # fmt: skip
def test_the_verdict_needs_evidence_both_ways(positives: int, negatives: int, active: bool):
    """The verdict of the counts alone (``is_active``, min_precision 0.8): one-sided evidence acts only with enough
    pairs to have met a negative; a rule whose pairs disagree more than rarely never acts, however many
    positives."""
    assert is_active(positives, negatives, 5, 0.8) is active
    assert precision_bound(positives, negatives) <= (positives / (positives + negatives) if positives else 0.0)


def test_min_examples_is_a_floor_beside_the_bound():
    """A loose bound does not make two examples enough: min_examples still applies."""
    assert not is_active(2, 0, 5, 0.3) and is_active(5, 0, 5, 0.3)


def test_one_sided_evidence_never_makes_a_rule_active_however_it_arrives():
    """Ten positive pairs and no chance yet of a negative: inactive in every order; the same pairs with twelve
    negatives: inactive too, whether the negatives came first or last."""
    for seed in range(5):
        book = RuleBook(min_precision=0.8)
        pages = list(range(10))
        random.Random(seed).shuffle(pages)
        for i in pages:
            _variant_pairs(book, range(i, i + 1))
        assert not book.rules("a.test")
    first, last = RuleBook(min_precision=0.8), RuleBook(min_precision=0.8)
    _distinct_pairs(first, range(100, 112))
    _variant_pairs(first, range(20))
    _variant_pairs(last, range(20))
    _distinct_pairs(last, range(100, 112))
    assert first.counts() == last.counts() and not first.rules("a.test") and not last.rules("a.test")


def test_negatives_withdraw_an_active_rule_and_the_same_counts_give_the_same_verdict():
    """``page=1`` shows the listing itself on eleven lists, then ``page=2`` another page on ten: the rule acts,
    is withdrawn by the negatives, and stays withdrawn however many positives follow (twenty more: the bound
    of 31 for and 10 against is below 0.8)."""
    book = RuleBook(min_precision=0.8)
    _variant_pairs(book, range(11), "page")
    assert "param:page" in book.rules("a.test")
    changes = _distinct_pairs(book, range(11, 21), "page")
    assert [(v.rule, v.active) for v in changes] == [("param:page", False)]
    _variant_pairs(book, range(21, 41), "page")
    assert "param:page" not in book.rules("a.test")
    assert [(v.positives, v.negatives) for v in book.verdicts()] == [(31, 10)]


def test_each_pair_of_stored_pages_counts_once():
    """Twenty session-id variants of one article are one positive pair, not twenty: the counts measure pages that
    agree, not the URLs a crawl happened to fetch."""
    book = RuleBook()
    book.observe("http://a.test/p", A, None)
    for i in range(20):
        book.observe(f"http://a.test/p?sid={i}", A ^ 1, "http://a.test/p")
    assert [(v.rule, v.positives, v.negatives) for v in book.verdicts()] == [("param:sid", 1, 0)]


def test_two_urls_that_one_rule_rewrites_alike_are_a_pair_of_that_rule():
    """``/a?id=3`` and ``/a?id=4`` are both ``/a`` without ``id``: two pages the filter keeps there are a negative
    of ``param:id`` (no page at ``/a`` is needed), and one with a session id counts once its rule is active."""
    book = RuleBook(min_precision=0.8)
    book.observe("http://a.test/a?id=3", near(3), None)
    book.observe("http://a.test/a?id=4", near(4), None)
    assert [(v.rule, v.positives, v.negatives) for v in book.verdicts()] == [("param:id", 0, 1)]
    _variant_pairs(book, range(11))  # param:sid is active
    book.observe("http://a.test/a?id=5&sid=9", near(5), None)
    assert [(v.rule, v.negatives) for v in book.verdicts() if v.rule == "param:id"] == [("param:id", 2)]


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


def test_mirror_hosts_are_learned_from_pairs_at_the_same_paths_and_withdrawn_by_distinct_pages():
    """Pages of b.test that duplicate a.test's at the same paths make the pair mirrors (eleven: the bound at 0.8);
    pages of b.test that are other pages than a.test's at their paths withdraw the verdict."""
    book = RuleBook(min_precision=0.8)
    for i in range(11):
        book.observe(f"http://a.test/n/{i}", near(i), None)
        book.observe(f"http://b.test/n/{i}", near(i) ^ 2, f"http://a.test/n/{i}")
    assert book.mirrors("b.test") == {"a.test"} and book.mirrors("a.test") == {"b.test"}
    changes = []
    for i in range(50, 52):
        book.observe(f"http://a.test/about{i}", near(i), None)
        changes += book.observe(f"http://b.test/about{i}", near(i) ^ FAR, None)
    assert [(v.kind, v.active) for v in changes] == [("mirror", False)]
    assert book.mirrors("b.test") == frozenset()


def test_confirmed_mirrors_pool_the_counts_of_their_rules():
    """b.test mirrors a.test: a rule of b.test with three examples of its own acts on a.test's eleven, and so does
    a rule only a.test has evidence for (a mirror serves the same pages, so the same parts of its URLs do not
    matter); when the mirror is withdrawn, b.test's rules rest on its own evidence again."""
    book = RuleBook(min_precision=0.8)
    _variant_pairs(book, range(11), "ref")
    _variant_pairs(book, range(20, 23), "ref", host="b.test")
    assert book.rules("a.test") == {"param:ref"} and not book.rules("b.test")
    changes = []
    for i in range(30, 41):
        book.observe(f"http://a.test/n/{i}", near(i), None)
        changes += book.observe(f"http://b.test/n/{i}", near(i) ^ 2, f"http://a.test/n/{i}")
    learned = [(v.kind, v.host, v.rule) for v in changes]
    assert learned == [("mirror", "a.test", "b.test"), ("rule", "b.test", "param:ref")]
    assert book.rules("b.test") == {"param:ref"}
    assert [(v.host, v.positives) for v in book.verdicts() if v.rule == "param:ref"] == [("a.test", 14), ("b.test", 14)]
    for i in range(50, 60):
        book.observe(f"http://a.test/about{i}", near(i), None)
        book.observe(f"http://b.test/about{i}", near(i) ^ FAR, None)
    assert book.mirrors("b.test") == frozenset() and not book.rules("b.test") and book.rules("a.test") == {"param:ref"}


def test_validation_fetches_count_for_or_against_the_rule_that_made_the_rewrite():
    """A page fetched although a rule would have left it: the same page as its target is an example, another
    page withdraws the rule; against a rewrite of two rules it says nothing of either (the single-rule pairs
    tell which was wrong)."""
    book = RuleBook(min_examples=1, min_precision=0.5)
    _variant_pairs(book, range(3))
    assert "param:sid" in book.rules("a.test")
    book.observe("http://a.test/q", near(30), None)
    both = ["param:sid", "param:v"]
    assert book.validated("http://a.test/q?sid=7&v=2", FAR, None, "http://a.test/q", both, None) == []
    assert "param:sid" in book.rules("a.test")
    changes = book.validated("http://a.test/q?sid=7", FAR, None, "http://a.test/q", ["param:sid"], None)
    assert [(v.rule, v.active) for v in changes] == [("param:sid", False)]


def test_counters_merge_what_other_processes_learned():
    """Two books sharing counters (through a store's totals) reach the same rules; counts not handed over yet
    stay pending."""
    store: dict[str, int] = {}

    def flush(book: RuleBook) -> None:
        for key, n in book.take_pending().items():
            store[key] = store.get(key, 0) + n
        book.merge(store)

    one, two = RuleBook(min_precision=0.8), RuleBook(min_precision=0.8)
    for i in range(12):
        _variant_pairs(one if i % 2 else two, range(i, i + 1), "utm_source")
    assert not one.rules("a.test") and not two.rules("a.test")
    flush(one)
    flush(two)
    flush(one)
    assert one.rules("a.test") == two.rules("a.test") == {"param:utm_source"}
    assert one.counts() == two.counts() == store


def test_the_order_of_merges_does_not_change_the_verdicts():
    """The evidence of four processes (rules supported, refuted, one-sided, mirrors) handed to the store in any
    order and any grouping: every book ends with the same counts, verdicts and rules."""
    books = [RuleBook(min_precision=0.8) for _ in range(4)]
    for n, book in enumerate(books):
        _variant_pairs(book, range(10 * n, 10 * n + 10), "sid")  # 40 positives: active
        _variant_pairs(book, range(10 * n, 10 * n + 6), "page")  # 24 positives ...
        _distinct_pairs(book, range(100 + 4 * n, 104 + 4 * n), "page")  # ... and 16 negatives: inactive
        _variant_pairs(book, range(10 * n, 10 * n + 2), "ref")  # 8 positives: too few
    pendings = [book.take_pending() for book in books]
    ends = []
    for seed in range(6):
        rng = random.Random(seed)
        order = [key for pending in pendings for key in pending.items()]
        rng.shuffle(order)
        store: dict[str, int] = {}
        reader = RuleBook(min_precision=0.8)
        step = rng.randint(1, 4)
        for start in range(0, len(order), step):  # merged after each batch of increments
            for key, n in order[start : start + step]:
                store[key] = store.get(key, 0) + n
            reader.merge(store)
        ends.append((reader.counts(), [(v.rule, v.positives, v.negatives, v.active) for v in reader.verdicts()]))
    assert all(end == ends[0] for end in ends)
    assert ends[0][1] == [("param:sid", 40, 0, True), ("param:page", 24, 16, False), ("param:ref", 8, 0, False)]


def test_precision_bound_is_wilsons():
    """The lower one-sided 95 % Wilson bound: n positives and no negative give n / (n + z²); half and half is far
    below one half for a few pairs and near it for many."""
    assert precision_bound(0, 0) == 0.0
    assert precision_bound(11, 0) == pytest.approx(11 / (11 + 1.645**2))
    assert precision_bound(5, 5) == pytest.approx(0.2693, abs=1e-3)
    assert 0.49 < precision_bound(10_000, 10_000) < 0.5
