"""64-bit simhash fingerprints: format, statuses, the bit vote, determinism and near-duplicate distances."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pages import (
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

from simhash_filter.fingerprint import Fingerprint, Fingerprinter, Status, fingerprint, simhash
from simhash_filter.index import hamming

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


@pytest.mark.parametrize("html", ["", b"", "  \n\t ", "<!-- only a comment -->"])
def test_empty_page(html: bytes | str) -> None:
    """A page with nothing in it gets status empty and no value."""
    fp = FP.fingerprint(html)
    assert fp.status is Status.EMPTY
    assert fp.value is None
    assert not fp.ok


TINY = {
    "image-only": '<html><body><img src="/a.jpg" alt=""><img src="/b.png"><img src="/c.gif"></body></html>',
    "two-words": "<html><body><p>Hello there</p></body></html>",
    "empty-body": "<html><head><title>Nothing</title></head><body></body></html>",
    "script-only": "<html><body><script>document.write('generated text that is never seen')</script></body></html>",
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


# ---------------------------------------------------------------- determinism

SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pages import determinism_pages
from simhash_filter.fingerprint import Fingerprinter
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
                [sys.executable, "-c", SCRIPT, str(ROOT / "tests")],
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
