"""64-bit simhash fingerprints: format, statuses, the bit vote, determinism and near-duplicate distances."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devsites.pages import (
    BACKUPS,
    LIBRARY,
    RAINWATER,
    TEA_GARDEN,
    determinism_pages,
    distinct_pairs,
    forum,
    gazette,
    ledger,
    near_duplicate_pairs,
    portal,
)
from simhash_filter.config import FingerprintConfig
from simhash_filter.index.tables import hamming
from simhash_filter.model.features import Features, char_grams, gram_size
from simhash_filter.model.fingerprint import Fingerprint, Fingerprinter, Status, feature_hashes, fingerprint, simhash

fingerprint_module = importlib.import_module("simhash_filter.model.fingerprint")  # the package's name is a function
features_module = importlib.import_module("simhash_filter.model.features")

ROOT = Path(__file__).resolve().parent.parent
FP = Fingerprinter()


def value(html: bytes | str) -> int:
    fp = FP.fingerprint(html)
    assert fp.ok, fp
    assert fp.value is not None
    return fp.value


def test_hex_is_16_lowercase_digits() -> None:
    """Fingerprint.hex is 16 lowercase hex digits, zero-padded; None without a value."""
    assert Fingerprint(5, Status.OK).hex == "0000000000000005"
    assert Fingerprint(0xABCDEF0123456789, Status.OK).hex == "abcdef0123456789"
    assert Fingerprint(None, Status.EMPTY).hex is None
    for html in (gazette(RAINWATER), portal(LIBRARY)):
        hex_ = FP.fingerprint(html).hex
        assert hex_ is not None
        assert re.fullmatch(r"[0-9a-f]{16}", hex_)


@pytest.mark.parametrize(
    "html",
    [
        "",
        b"",
        "  \n\t ",
        "<!-- only a comment -->",
        "<html><head><title>Nothing</title></head><body></body></html>",
        "<html><body><script>document.write('generated text that is never seen')</script></body></html>",
    ],
)
def test_empty_page(html: bytes | str) -> None:
    """A page with nothing in it (no visible text, no element but the html and body every page has) gets status
    empty and no value."""
    fp = FP.fingerprint(html)
    assert fp.status is Status.EMPTY
    assert fp.value is None
    assert not fp.ok


TINY = {
    "image-only": '<html><body><img src="/a.jpg" alt=""><img src="/b.png"><img src="/c.gif"></body></html>',
    "two-words": "<html><body><p>Hello there</p></body></html>",
    "empty-paragraph": "<html><body><p></p><p>  </p></body></html>",
    "nav-only": '<html><body><nav><a href="/">Home</a></nav></body></html>',
}


@pytest.mark.parametrize("name", sorted(TINY))
def test_too_few_features_gives_no_value(name: str) -> None:
    """Image-only and nearly empty pages get too_few_features and no value (never a shared 0 or ~0)."""
    fp = FP.fingerprint(TINY[name])
    assert fp.status is Status.TOO_FEW_FEATURES
    assert fp.value is None
    assert fp.hex is None


def test_enough_text_gives_a_value() -> None:
    """A short paragraph with enough distinct words is fingerprinted."""
    fp = FP.fingerprint("<p>Marsh harriers returned to the estuary reed beds after eleven years away.</p>")
    assert fp.ok
    assert fp.value not in (None, 0, 2**64 - 1)


def test_module_function_uses_default_settings() -> None:
    """fingerprint() gives the same value as a default Fingerprinter."""
    html = gazette(BACKUPS)
    assert fingerprint(html) == FP.fingerprint(html)


def test_hamming_counts_differing_bits() -> None:
    """hamming is the number of bits in which two 64-bit values differ."""
    assert hamming(0, 0) == 0
    assert hamming(0, 2**64 - 1) == 64
    assert hamming(0b1011, 0b0110) == 3


# ---------------------------------------------------------------- the bit vote

H1, H2, H3 = 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x3333333333333333


def vote(hashes: list[int], weights: list[float]) -> int:
    return simhash(np.array(hashes, dtype=np.uint64), np.array(weights, dtype=np.float64))


def test_simhash_of_one_feature_is_its_hash() -> None:
    """One feature votes every bit: the fingerprint is its hash, bit for bit."""
    assert vote([0x0123456789ABCDEF], [1.0]) == 0x0123456789ABCDEF
    assert vote([0x8000000000000001], [0.3]) == 0x8000000000000001


def test_simhash_equal_weights_is_bitwise_majority() -> None:
    """Three equal weights: each bit is the majority of the three hashes (worked out by hand below)."""
    # Per byte: where H2 is 00 the majority of 0F, 00, 33 is 0F & 33 = 03; where H2 is FF it is 0F | 33 = 3F.
    assert vote([H1, H2, H3], [1.0, 1.0, 1.0]) == 0x033F033F033F033F


def test_simhash_heavy_feature_wins_every_bit() -> None:
    """A feature heavier than all others together decides every bit."""
    assert vote([H1, H2, H3], [1.0, 1.0, 3.0]) == H3
    assert vote([H1, H2, H3], [1.0, 2.5, 1.0]) == H2


def test_simhash_weighted_vote_by_hand() -> None:
    """Weights 2, 3, 4: a bit is set when the weights voting 1 exceed half of 9."""
    # Sets of hashes with the bit set and their weight: {H1}=2, {H2}=3, {H3}=4 lose; any two win (5, 6, 7).
    # So the result is the majority again: 0x033F033F033F033F.  With 2, 3, 6, H3 alone (6 > 5) wins.
    assert vote([H1, H2, H3], [2.0, 3.0, 4.0]) == 0x033F033F033F033F
    assert vote([H1, H2, H3], [2.0, 3.0, 6.0]) == H3


def test_simhash_ties_are_zero_and_a_small_feature_breaks_them() -> None:
    """A tied column gives 0; a feature of small weight decides every tied column."""
    h = 0xFFFF0000FFFF0000
    assert vote([h, h ^ (2**64 - 1)], [1.0, 1.0]) == 0
    assert vote([h, h ^ (2**64 - 1), 0x0123456789ABCDEF], [1.0, 1.0, 0.01]) == 0x0123456789ABCDEF


def test_simhash_of_nothing_is_an_error() -> None:
    """No features, no fingerprint: simhash refuses instead of returning 0."""
    with pytest.raises(ValueError):
        vote([], [])


# ---------------------------------------------------------------- the vote from memoised word counts


def reference_vote(fp: Fingerprinter, feats: Features) -> int:
    """simhash() over every character n-gram of every word (weight shared) and every structure feature."""
    names: list[str] = []
    weights: list[float] = []
    for word, w in feats.text.items():
        grams = char_grams(word, gram_size(word, fp.config))
        names += grams
        weights += [w / len(grams)] * len(grams)
    names += list(feats.structure)
    weights += list(feats.structure.values())
    return simhash(feature_hashes(names, fp.config.seed), np.array(weights))


_words = st.one_of(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzé0123456789", min_size=1, max_size=12),
    st.text(alphabet="社区图书馆延长开放时间居民", min_size=1, max_size=4),
    st.builds(lambda c, n: c * n, st.sampled_from("aqz"), st.integers(250, 900)),  # > 255 n-grams in a column
    st.builds(lambda k: ("abcdefghijklmnopqrstuvwxyz" * 40)[:k], st.integers(100, 1000)),
)
_weights = st.one_of(st.floats(1e-6, 50.0), st.floats(1e9, 1e13))  # the second: beyond exact float sums
FEATURES = st.builds(
    Features,
    text=st.dictionaries(_words, _weights, max_size=40),
    structure=st.dictionaries(st.text(alphabet="cot|>divpa0123", min_size=1, max_size=10), _weights, max_size=8),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pages=st.lists(FEATURES, min_size=1, max_size=4),
    config=st.sampled_from(
        [
            FingerprintConfig(),
            FingerprintConfig(char_ngram=0, cjk_char_ngram=1),
            FingerprintConfig(char_ngram=3, seed=7),
        ]
    ),
)
def test_vote_from_word_counts_is_the_vote_over_every_ngram(pages: list[Features], config: FingerprintConfig) -> None:
    """fingerprint_features() sums memoised per-word bit counts: exactly simhash() over every n-gram, for
    long words (counts above 255), huge weights (integer arithmetic) and memos filled by earlier pages."""
    fp = Fingerprinter(config)
    for feats in pages:
        if not feats.text and not feats.structure:
            with pytest.raises(ValueError):
                fp.fingerprint_features(feats)
            continue
        expected = reference_vote(fp, feats)
        assert fp.fingerprint_features(feats) == expected
        assert fp.fingerprint_features(feats) == expected  # now from the memo


def test_feature_memo_limit_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A memo emptied every few words gives the same fingerprints."""
    pages = determinism_pages()
    expected = [FP.fingerprint(p).hex for p in pages]
    monkeypatch.setattr(fingerprint_module, "MAX_CACHED_FEATURES", 5)
    fp = Fingerprinter()
    assert [fp.fingerprint(p).hex for p in pages] == expected


def test_one_fingerprinter_shared_by_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads sharing one Fingerprinter (and the per-word memos, emptied often here) get the right values."""
    pages = determinism_pages()
    expected = [FP.fingerprint(p).hex for p in pages]
    monkeypatch.setattr(fingerprint_module, "MAX_CACHED_FEATURES", 50)
    monkeypatch.setattr(features_module, "MAX_CACHED_WORDS", 50)
    shared = Fingerprinter()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: [shared.fingerprint(p).hex for p in pages[i:] + pages[:i]], range(8)))
    for i, got in enumerate(results):
        assert got == expected[i:] + expected[:i]


#: Fingerprints of determinism_pages() under the default model, recorded when the model was made (any
#: change of the code that moves one of them changes the model: bump MODEL_VERSION and record anew).
PINNED_MODEL = "v7-8eeb8243fd58"
PINNED = [
    "d07c1ed2c0305677",
    "d3be7ede1410f21d",
    "c1da6fff80787acd",
    "d07c0ed2d0305677",
    "d3be7ede1410f21d",
    "c2b9c72910ce5bcc",
    "2128dda3a8429950",
    "c5fc4f251419d9cd",
    "c5fc4f241419d9cd",
    "c2b9c72910ce5bcc",
    "2128dda3a8429950",
    "c5fc4f241419d9cd",
]


def test_fingerprints_are_pinned() -> None:
    """The model's fingerprints never move: the same pages give the recorded values."""
    assert FingerprintConfig().model_id() == PINNED_MODEL
    assert [Fingerprinter().fingerprint(p).hex for p in determinism_pages()] == PINNED


# ---------------------------------------------------------------- determinism

SCRIPT = """
import json
from devsites.pages import determinism_pages
from simhash_filter.model.fingerprint import Fingerprinter
fp = Fingerprinter()
print(json.dumps([fp.fingerprint(p).hex for p in determinism_pages()]))
"""


def test_same_fingerprints_under_any_hash_seed() -> None:
    """Subprocesses with different PYTHONHASHSEED values give the same fingerprints as this process."""
    pages = determinism_pages()
    assert len(pages) >= 10
    assert any(isinstance(p, bytes) for p in pages)
    expected = [FP.fingerprint(p).hex for p in pages]
    assert all(expected)
    seeds = ("0", "1", "12345", "random")
    procs = []
    for seed in seeds:
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", SCRIPT],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for seed, proc in zip(seeds, procs, strict=True):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert json.loads(out) == expected, f"PYTHONHASHSEED={seed}"


def test_text_bytes_and_gbk_give_the_same_fingerprint() -> None:
    """The same page as str, UTF-8 bytes and (declared or undeclared) GBK bytes has one fingerprint."""
    zh = portal(LIBRARY)
    assert value(zh) == value(zh.encode("utf-8"))
    assert value(zh) == value(zh.replace('charset="utf-8"', 'charset="gbk"').encode("gbk"))
    undeclared = forum(TEA_GARDEN).replace('<meta charset="utf-8">', "")
    assert FP.fingerprint(undeclared.encode("gbk")).encoding == "gb18030"
    assert value(undeclared.encode("gbk")) == value(forum(TEA_GARDEN))


# ---------------------------------------------------------------- invariants

PROPERTY_PAGES = {
    "en-gazette": gazette(RAINWATER, ads=True),
    "en-ledger": ledger(BACKUPS),
    "zh-portal": portal(LIBRARY),
    "zh-forum": forum(TEA_GARDEN),
}
PROPERTY_VALUES = {name: value(html) for name, html in PROPERTY_PAGES.items()}
BETWEEN_TAGS = re.compile(r">(\s*)<")
START_TAG = re.compile(r"<([a-zA-Z][\w-]*)((?:\s+[\w:-]+(?:=\"[^\"]*\")?){2,})\s*>")
ATTRIBUTE = re.compile(r"[\w:-]+(?:=\"[^\"]*\")?")
WHITESPACE = st.lists(st.sampled_from(["", " ", "\n", "\n    ", "\t", "\r\n", "  \n\n  "]), min_size=1, max_size=40)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(PROPERTY_PAGES)), spaces=WHITESPACE)
def test_whitespace_between_tags_changes_nothing(name: str, spaces: list[str]) -> None:
    """Adding whitespace between tags leaves the fingerprint unchanged."""
    counter = iter(range(10**6))

    def add(m: re.Match[str]) -> str:
        return ">" + m.group(1) + spaces[next(counter) % len(spaces)] + "<"

    html = BETWEEN_TAGS.sub(add, PROPERTY_PAGES[name])
    assert value(html) == PROPERTY_VALUES[name]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(PROPERTY_PAGES)), rnd=st.randoms(use_true_random=False))
def test_attribute_order_changes_nothing(name: str, rnd) -> None:
    """Reordering the attributes of every tag leaves the fingerprint unchanged."""
    shuffled = 0

    def shuffle(m: re.Match[str]) -> str:
        nonlocal shuffled
        attrs = ATTRIBUTE.findall(m.group(2))
        rnd.shuffle(attrs)
        shuffled += 1
        return f"<{m.group(1)} {' '.join(attrs)}>"

    html = START_TAG.sub(shuffle, PROPERTY_PAGES[name])
    assert shuffled >= 3
    assert value(html) == PROPERTY_VALUES[name]


# ---------------------------------------------------------------- near-duplicates and distinct pages

NEAR = near_duplicate_pairs()
DISTINCT = distinct_pairs()
NEAR_CASES = sorted(NEAR)


@pytest.mark.parametrize("case", NEAR_CASES)
def test_near_duplicates_are_within_k(case: str) -> None:
    """The same article in another template, with ads, counters or one edited word is within 3 bits."""
    a, b = NEAR[case]
    assert hamming(value(a), value(b)) <= 3


@pytest.mark.parametrize("case", sorted(DISTINCT))
def test_different_articles_in_one_template_are_far_apart(case: str) -> None:
    """Different articles in the same site template are more than 10 bits apart."""
    a, b = DISTINCT[case]
    assert hamming(value(a), value(b)) > 10
