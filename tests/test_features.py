"""Weighted page features: normalisation, Chinese words, TF-IDF and digit weights, work caps."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import jieba
import numpy as np
import pytest

from simhash_filter.config import FingerprintConfig
from simhash_filter.model import features as features_mod
from simhash_filter.model import weights
from simhash_filter.model.extract import PageText
from simhash_filter.model.features import WORD, gram_count, page_features, text_features, tokenize

jieba.setLogLevel(logging.WARNING)

WORDS = FingerprintConfig(ngrams=(1,))


def features(text: str, config: FingerprintConfig = WORDS, weight: float = 1.0) -> dict[str, float]:
    return text_features(PageText(texts=((weight, text),)), config)


def test_nfkc_and_casefold() -> None:
    """Full-width letters and digits, ligatures and case all normalise (ＡＢＣ → abc, ß → ss)."""
    assert tokenize("ＡＢＣ Ｄｅｆ Straße ﬁne １２３ ÉCOLE", 100) == ["abc", "def", "strasse", "fine", "123", "école"]


def test_punctuation_and_underscores_split_words() -> None:
    """Words are runs of letters and digits; punctuation, underscores and full-width commas split them."""
    assert tokenize("snake_case, dash-word；“quoted”！end", 100) == ["snake", "case", "dash", "word", "quoted", "end"]


def test_chinese_runs_are_segmented_like_jieba() -> None:
    """A CJK run between Latin words and digits becomes jieba's words; the rest stays as it is."""
    text = "我们在北京大学学习Python编程，版本3.11的新功能很多。"
    expected: list[str] = []
    for w in WORD.findall(text.casefold()):
        expected.extend(jieba.lcut(w, HMM=True) if "\u4e00" <= w[0] <= "\u9fff" else [w])
    got = tokenize(text, 100)
    assert got == expected
    assert "北京大学" in got
    assert "python" in got


def test_words_with_digits_weigh_less() -> None:
    """A word with digits (counter, date, session id) weighs less than a word without."""
    f = features("qqzxv qqzx7 release release2024 build b4ac9f 阅读 阅读3")
    assert f["qqzx7"] < f["qqzxv"]
    assert f["release2024"] < f["release"]
    assert f["b4ac9f"] < f["build"]


@pytest.mark.parametrize(
    ("common", "rare"),
    [("the", "photosynthesis"), ("and", "estuary"), ("我们", "光合作用"), ("的", "杀青")],
)
def test_rare_words_weigh_more(common: str, rare: str) -> None:
    """Inverse document frequency: with equal counts, a rare word outweighs a common one."""
    f = features(f"{common} {rare} {common} {rare}")
    assert f[rare] > f[common] > 0


def test_term_frequency_is_sublinear() -> None:
    """A repeated word weighs more than once-seen, but far less than proportionally."""
    once, many = features("estuary harbour"), features("estuary " * 100 + "harbour")
    assert once["estuary"] < many["estuary"] < 10 * once["estuary"]


def test_role_weight_scales_text() -> None:
    """Text with a lower role weight (boilerplate) gives lower feature weights."""
    assert features("estuary harbour", weight=0.05)["estuary"] < features("estuary harbour")["estuary"]


def test_max_tokens_caps_tokenize() -> None:
    """tokenize returns at most max_tokens words, English or Chinese."""
    en = " ".join(f"word{i}" for i in range(1000))
    zh = "社区图书馆延长开放时间居民非常高兴" * 100
    assert tokenize(en, 7) == [f"word{i}" for i in range(7)]
    assert len(tokenize(zh, 7)) == 7
    assert tokenize(zh, 7) == tokenize(zh, 1000)[:7]


def test_max_tokens_caps_features_across_texts() -> None:
    """The token budget is shared by all text groups: later groups get what is left."""
    cfg = FingerprintConfig(ngrams=(1,), max_tokens=10)
    page = PageText(
        texts=((1.0, " ".join(f"alpha{i}" for i in range(8))), (0.5, " ".join(f"beta{i}" for i in range(8))))
    )
    f = text_features(page, cfg)
    assert len(f) == 10
    assert {k for k in f if k.startswith("alpha")} == {f"alpha{i}" for i in range(8)}
    assert {k for k in f if k.startswith("beta")} == {"beta0", "beta1"}


def test_word_ngrams_take_the_mean_idf() -> None:
    """A word bigram weighs the mean IDF of its words (tf 1, plain IDF)."""
    cfg = FingerprintConfig(ngrams=(1, 2), idf_power=1.0)
    f = text_features(PageText(texts=((1.0, "estuary the"),)), cfg)
    assert f["estuary the"] == pytest.approx((f["estuary"] + f["the"]) / 2)


def test_structure_gets_its_share_of_the_vote() -> None:
    """page_features scales structure to structure_weight of the vote (root of summed squared weights)."""
    cfg = FingerprintConfig(ngrams=(1,), structure_weight=0.2)
    page = PageText(
        texts=((1.0, "marsh harriers return to the estuary reed beds"),),
        structure={"o|>html|0": 1.0, "o|html>body|1": 0.45},
    )
    feats = page_features(page, cfg)
    s = math.sqrt(sum(v * v for v in feats.structure.values()))
    t = math.sqrt(sum(w * w / gram_count(g, cfg.char_ngram) for g, w in feats.text.items()))
    assert s / (s + t) == pytest.approx(0.2)
    assert len(feats) == len(feats.structure) + len(feats.text)
    only_structure = page_features(PageText(structure={"o|>html|0": 1.0}), cfg)
    assert only_structure.text == {}
    assert math.sqrt(sum(v * v for v in only_structure.structure.values())) == pytest.approx(1.0)


# ---------------------------------------------------------------- IDF tables


def test_idf_tables_match_their_sources() -> None:
    """The cached tables give exactly the source's value for every word, and the defaults for others."""
    en = weights.english_idf_dict()
    table = weights.english_table()
    words = list(en)
    assert len(table) == len(en)
    assert table.lookup(words, -1.0) == [en[w] for w in words]
    zh, median = weights.chinese_idf_dict()
    table, table_median = weights.chinese_table()
    assert table_median == median
    assert table.lookup(list(zh), -1.0) == list(zh.values())
    unknown = ["qqzxv", "estuaryy", "", "\ud800", "社区图书馆延长开放时间"]
    assert weights.english_table().lookup(unknown, 12.0) == [en.get(w, 12.0) for w in unknown]
    assert table.lookup(unknown, median) == [zh.get(w, median) for w in unknown]


def test_idf_table_lookup_is_exact_when_hashes_collide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Words whose hashes collide (forced here) are told apart by their bytes."""
    monkeypatch.setattr(weights, "_hashes", lambda encoded: np.array([len(b) % 3 for b in encoded], dtype=np.uint64))
    source = {f"w{i}": float(i) for i in range(50)} | {"é": 0.5, "中文": 0.25}
    table = weights.IdfTable.from_dict(source)
    queries = [*source, "w50", "x1", "", "中", "w7"]
    assert table.lookup(queries, -1.0) == [source.get(q, -1.0) for q in queries]


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


SMALL = {"estuary": 9.5, "the": 1.0, "阅读": 7.25}


def test_idf_cache_is_written_once_and_reused(cache_home: Path) -> None:
    """The first use builds the table and writes it under $XDG_CACHE_HOME; later uses only read it."""
    built = []
    table = weights.cached_table("test", lambda: built.append(1) or SMALL)
    path = weights.cache_path("test")
    assert path.parent == cache_home / "simhash-filter" and path.exists()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind
    again = weights.cached_table("test", lambda: pytest.fail("the cached table was rebuilt"))
    assert built == [1]
    assert again.lookup(list(SMALL), 0.0) == table.lookup(list(SMALL), 0.0) == list(SMALL.values())


def test_idf_cache_file_is_named_by_the_sources(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Other IDF source versions use another file; a file holding another table is rebuilt."""
    path = weights.cache_path("test")
    monkeypatch.setattr(weights, "IDF_SOURCE_ID", weights.IDF_SOURCE_ID + "-next")
    assert weights.cache_path("test") != path
    weights.IdfTable.from_dict({"stale": 1.0}).save(weights.cache_path("test"), "another key")
    table = weights.cached_table("test", lambda: SMALL)
    assert table.lookup(["stale", "estuary"], 0.0) == [0.0, 9.5]
    assert weights.IdfTable.load(weights.cache_path("test"), weights._cache_key("test")).get("the", 0.0) == 1.0


@pytest.mark.parametrize("garbage", [b"", b"not a zip file", b"PK\x03\x04 truncated", "npy"])
def test_idf_cache_unreadable_file_is_rebuilt(cache_home: Path, garbage: bytes | str) -> None:
    """A damaged cache file is ignored and replaced."""
    path = weights.cache_path("test")
    path.parent.mkdir(parents=True)
    if garbage == "npy":  # a plain array, not the table's archive
        with open(path, "wb") as f:
            np.save(f, np.arange(3))
    else:
        assert isinstance(garbage, bytes)
        path.write_bytes(garbage)
    assert weights.cached_table("test", lambda: SMALL).get("estuary", 0.0) == 9.5
    assert weights.IdfTable.load(path, weights._cache_key("test")).get("estuary", 0.0) == 9.5


def test_idf_cache_not_writable_falls_back_to_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the cache directory cannot be created, the table is built in memory and works the same."""
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert weights.cached_table("test", lambda: SMALL).lookup(list(SMALL), 0.0) == list(SMALL.values())


def test_relative_xdg_cache_home_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """XDG base directories must be absolute: a relative value falls back to ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert weights.cache_dir() == Path.home() / ".cache" / "simhash-filter"


def test_features_are_the_same_cold_and_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-word memos change nothing: the same page gives the same features with them empty, full or tiny."""
    page = PageText(texts=((1.0, "Estuary reed beds 2024 社区图书馆 estuary harriers"), (0.01, "menu home about")))
    cfg = FingerprintConfig(ngrams=(1, 2))
    features_mod._WORD_CACHE.clear()
    cold = text_features(page, cfg)
    assert text_features(page, cfg) == cold
    monkeypatch.setattr(features_mod, "MAX_CACHED_WORDS", 3)
    features_mod._WORD_CACHE.clear()
    assert text_features(PageText(texts=((1.0, "estuary harriers menu"),)), cfg)
    assert text_features(page, cfg) == cold
    assert text_features(page, cfg) == cold
