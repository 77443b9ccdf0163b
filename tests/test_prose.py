"""The prose verifier (model v6, ``simhash_filter.model.prose``): spot signatures of article-like pages, carried
after the word sketch, and the decision rule that consults them where the word sketch verifies no candidate."""

from __future__ import annotations

import random

import pytest

from simhash_filter.config import FilterConfig
from simhash_filter.index.backends.base import Candidate
from simhash_filter.index.nearduplicate import PROSE_SIMILARITY, NearDuplicateIndex
from simhash_filter.model.config import FingerprintConfig
from simhash_filter.model.core import compiled_sketch
from simhash_filter.model.extract import PageText
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model.prose import ARTICLE, PART_BYTES, PROSE_BINS, SPOT_SEED, prose_part, prose_similarity, spots
from simhash_filter.model.sketch import SITE_BYTES, similarity, sketch

NOUNS = tuple(
    "harbour council river engineer budget bridge ferry school market garden tunnel station library museum factory "
    "meadow village archive orchard clinic".split()
)
VERBS = ("opened", "closed", "rebuilt", "funded", "delayed", "measured", "painted", "moved", "named", "visited")
ADJECTIVES = ("old", "narrow", "quiet", "costly", "wooden", "northern", "busy", "small", "public", "second")


def prose(seed: int, sentences: int = 40) -> list[str]:
    """Paragraphs of made-up news prose (four sentences each), different for each seed."""
    rng = random.Random(seed)
    out = []
    for _ in range(sentences):
        n1, n2, n3 = rng.sample(NOUNS, 3)
        out.append(f"The {rng.choice(ADJECTIVES)} {n1} of the {n2} was {rng.choice(VERBS)} by the {n3} "
                   f"after a {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} in {rng.choice(NOUNS)} week "
                   f"{rng.randint(1, 52)}, said the {rng.choice(NOUNS)}.")  # fmt: skip
    return [" ".join(out[i : i + 4]) for i in range(0, len(out), 4)]


def chrome(seed: int, words: int) -> tuple[str, str]:
    """A host's template around its article: a menu of *words* made-up link words and a footer of more."""
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choices("bcdfghklmnprstvz", k=3)) + rng.choice(("ona", "ex", "ille", "ur"))

    links = "".join(f'<li><a href="/s/{i}">{word()} {word()}</a></li>' for i in range(words // 2))
    footer = " ".join(word() for _ in range(words // 2))
    return f"<nav><ul>{links}</ul></nav>", f"<footer><p>{footer}</p></footer>"


def page(article: list[str], host: int = 0, chrome_words: int = 0, title: str = "A story") -> str:
    head, foot = chrome(host, chrome_words) if chrome_words else ("", "")
    body = "".join(f"<p>{p}</p>" for p in article)
    return f"<html><body>{head}<article><h1>{title}</h1>{body}</article>{foot}</body></html>"


def menu_page(seed: int) -> str:
    rng = random.Random(seed)
    items = "".join(f"<li>{rng.choice(NOUNS)} {rng.choice(VERBS)}</li>" for _ in range(60))
    return f"<html><body><h1>Options</h1><ul>{items}</ul><p>The options of the tool are listed here.</p></body></html>"


def test_a_spot_is_a_function_word_and_the_next_three_other_words_within_a_block() -> None:
    """Each antecedent starts a chain of the next three words that are not antecedents; a chain that would cross
    a block (a line) is not made."""
    assert spots(["The harbour of the old river was rebuilt"], 100) == {
        "the:harbour:old:river": 1.0,
        "of:old:river:rebuilt": 1.0,
        "the:old:river:rebuilt": 1.0,
    }
    assert spots(["the harbour", "old river rebuilt"], 100) == {}
    assert spots(["The harbour of the old river was rebuilt"], 3) == {}  # the word budget


def test_an_article_is_article_like_and_a_menu_is_not() -> None:
    """A page of running prose gets the ARTICLE flag and a MinHash of its spots; a menu (short lines, few function
    words) gets all zero bytes and never verifies by its spots."""
    fp = Fingerprinter()
    article = fp.fingerprint(page(prose(1)))
    menu = fp.fingerprint(menu_page(2))
    assert article.prose_bytes == menu.prose_bytes == SITE_BYTES + PART_BYTES  # the site part, then the prose part
    assert article.sketch is not None and menu.sketch is not None
    assert article.sketch[-PART_BYTES] == ARTICLE
    assert menu.sketch[-PART_BYTES:] == bytes(PART_BYTES)
    assert prose_similarity(menu.sketch[-PART_BYTES:], menu.sketch[-PART_BYTES:]) is None
    assert prose_similarity(article.sketch[-PART_BYTES:], article.sketch[-PART_BYTES:]) == 1.0
    assert article.word_sketch == article.sketch[: -SITE_BYTES - PART_BYTES]


def test_the_part_is_the_same_compiled_or_not() -> None:
    """The spots' MinHash of the compiled sketch equals the reference's (numpy), so a page's part is the same in
    every build."""
    found = spots(prose(3), 10_000)
    assert len(found) > 100
    if compiled_sketch is None:
        pytest.skip("no compiled core")
    assert compiled_sketch(found, PROSE_BINS, 1.0, SPOT_SEED) == sketch(found, PROSE_BINS, 1.0, SPOT_SEED)


def test_an_article_in_another_sites_chrome_is_found_by_its_spots() -> None:
    """A short article republished inside a long page template: its word sketch is under the threshold (the
    template's words count too) but its spots agree, and the index names the original; another article in the
    same template has other spots and is not joined to the first one's original."""
    fp = Fingerprinter()
    config = FilterConfig()
    original = fp.fingerprint(page(prose(10, 24)))
    copy = fp.fingerprint(page(prose(10, 24), host=7, chrome_words=600))
    other = fp.fingerprint(page(prose(11, 24), host=7, chrome_words=600))
    assert original.value is not None and copy.value is not None and other.value is not None
    words = similarity(original.word_sketch, copy.word_sketch)  # type: ignore[arg-type]
    assert words < config.min_similarity
    assert prose_similarity(original.sketch[-PART_BYTES:], copy.sketch[-PART_BYTES:]) >= PROSE_SIMILARITY  # type: ignore[index,operator]
    index = NearDuplicateIndex(16, design="4x16/k3", metadata=config.index_metadata(),
                               min_similarity=config.min_similarity)  # fmt: skip
    best = index.best([Candidate("original", 3, original.value, original.sketch)], copy.sketch)  # type: ignore[arg-type]
    assert best is not None and best.key == "original" and best.similarity == pytest.approx(words)
    assert prose_similarity(copy.sketch[-PART_BYTES:], other.sketch[-PART_BYTES:]) < PROSE_SIMILARITY  # type: ignore[index,operator]
    assert index.best([Candidate("original", 3, original.value, original.sketch)], other.sketch) is None  # type: ignore[arg-type]


def test_the_word_sketch_decides_first_and_chooses_among_the_spots() -> None:
    """A candidate the word sketch verifies wins over any the spots verify; among those only the spots verify,
    the one with the most similar word sketch wins (an article's other copies share its spots as much as the
    original does, not its words)."""
    config = FilterConfig()
    index = NearDuplicateIndex(16, design="4x16/k3", metadata=config.index_metadata(), min_similarity=0.75)
    words = config.fingerprint.word_sketch_bytes
    spots_part = bytes([ARTICLE]) + random.Random(1).randbytes(PART_BYTES - 1)
    page_words = random.Random(2).randbytes(words)

    def flipped(bits: int) -> bytes:  # the page's word sketch with *bits* bits flipped
        return (int.from_bytes(page_words, "little") ^ ((1 << bits) - 1)).to_bytes(words, "little")

    query = page_words + spots_part
    far = Candidate("far", 1, 0, flipped(200) + spots_part)  # words 0.22, spots 1.0
    nearer = Candidate("nearer", 2, 0, flipped(150) + spots_part)  # words 0.41, spots 1.0
    verified = Candidate("verified", 3, 0, flipped(40) + bytes(PART_BYTES))  # words 0.84, not article-like
    assert index.best([far, nearer], query).key == "nearer"  # type: ignore[union-attr]
    assert index.best([far, nearer, verified], query).key == "verified"  # type: ignore[union-attr]
    assert index.best([Candidate("x", 1, 0, flipped(200) + bytes(PART_BYTES))], query) is None


def test_the_index_is_tagged_with_the_verified_part() -> None:
    """The index metadata says how many leading bytes of a stored sketch are the word sketch; a model without
    the prose verifier stores the word sketch alone, and its model id differs."""
    on, off = FilterConfig(), FilterConfig(fingerprint=FingerprintConfig(prose=False))
    assert on.index_metadata()["sketch_bytes"] == 64 + SITE_BYTES + PART_BYTES
    assert on.index_metadata()["verify_bytes"] == 64
    assert "verify_bytes" not in off.index_metadata() and off.index_metadata()["sketch_bytes"] == 64
    assert on.fingerprint.model_id() != off.fingerprint.model_id()
    assert Fingerprinter(off.fingerprint).fingerprint(page(prose(1))).prose_bytes == 0


def test_an_empty_page_text_has_an_all_zero_part() -> None:
    """No text at all: not article-like."""
    assert prose_part(PageText(), 1000) == bytes(PART_BYTES)
