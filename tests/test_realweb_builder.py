"""benchmarks/accuracy/realweb.py (with benchlib.webpages and benchlib.webvariants): a tiny set built from a few
synthetic pages (our own text) in the layout of each source collection, and the invariants of its labels."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from types import ModuleType

import pytest
from conftest import benchmark_module

from benchmarks.benchlib.text import hash_jaccard, label_text, parse_page, shingle_hashes
from benchmarks.benchlib.webpages import Source, check_insert, locate_main
from benchmarks.benchlib.webvariants import make_syndication

pytest.importorskip("datasketch")

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("river harbour lantern orchard meadow copper violet window garden pepper ladder silver marble canyon "
         "thunder pillow candle basket forest bridge mirror ticket rocket velvet saddle button island").split()


@pytest.fixture(scope="module")
def realweb() -> Iterator[ModuleType]:
    with benchmark_module("benchmarks.accuracy.realweb") as module:
        yield module


def _paras(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(25, 40))).capitalize() + ". The end of part "
            + str(k) + " is near." for k in range(n)]


def _page(site: str, title: str, paras: list[str]) -> str:
    body = "".join(f"<p>{p}</p>" for p in paras)
    nav = " ".join(f'<a href="/{w}">{w} section of {site}</a>' for w in WORDS[:8])
    return (f"<html><head><title>{title}</title><script>var x = 1;</script></head><body>"
            f'<header><nav>{nav}</nav></header><div class="main"><h1>{title}</h1>{body}</div>'
            f"<aside>Read more from the {site} newsroom about the weather and the harbour tonight.</aside>"
            f"<footer>Copyright {site}, all rights reserved, contact the editors of {site}.</footer></body></html>")


@pytest.fixture(scope="module")
def built(realweb: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    src = tmp_path_factory.mktemp("sources")
    rd = src / "readability" / "alpha-news-1"
    rd.mkdir(parents=True)
    paras = _paras(1, 6)
    (rd / "source.html").write_text(_page("alpha.example", "Alpha story", paras))
    (rd / "expected.html").write_text('<div id="readability-page-1">' + "".join(f"<p>{p}</p>" for p in paras)
                                      + "</div>")
    (src / "aeb" / "html").mkdir(parents=True)
    paras = _paras(2, 6)
    with gzip.open(src / "aeb" / "html" / "b0b0.html.gz", "wt") as f:
        f.write(_page("beta.example", "Beta story", paras))
    (src / "aeb" / "ground-truth.json").write_text(json.dumps(
        {"b0b0": {"articleBody": "\n\n".join(paras), "url": "https://beta.example/news/beta-story"}}))
    (src / "gne" / "gamma").mkdir(parents=True)
    for n in (1, 2):
        (src / "gne" / "gamma" / f"{n}.html").write_text(_page("gamma.example", f"Gamma story {n}", _paras(3 + n, 6)))
    (src / "trafilatura").mkdir()
    (src / "trafilatura" / "delta.example.story.html").write_text(_page("delta.example", "Delta", _paras(7, 6)))
    out = tmp_path_factory.mktemp("set") / "realweb"
    realweb.main(["--readability", str(src / "readability"), "--aeb", str(src / "aeb"), "--gne", str(src / "gne"),
                  "--trafilatura", str(src / "trafilatura"), "--out", str(out), "--seed", "3", "--proxy", "1",
                  "--ads", "1", "--counter", "1", "--edit", "1", "--thin-groups", "1"])
    with gzip.open(out / "truth.json.gz", "rt", encoding="utf-8") as f:
        return out, json.load(f)


def test_set_files_and_fields(built: tuple[Path, dict]) -> None:
    out, truth = built
    with gzip.open(out / "pages.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(x) for x in f]
    pages = truth["pages"]
    assert [r["url"] for r in rows] == [p["url"] for p in pages]
    assert len({p["url"] for p in pages}) == len(pages)
    fields = {"id", "url", "lang", "source", "cause", "original", "jaccard_to_original", "natural_identical", "title",
              "title_key", "topic", "xkey", "template", "n_shingles", "cluster", "info"}
    assert all(fields <= set(p) for p in pages)
    causes = {p["cause"] for p in pages}
    assert {"original", "syndication", "proxy", "ads", "counter", "edit"} <= causes
    assert {p["lang"] for p in pages} == {"en"}
    assert (out / "README.md").read_text().count("| syndication |") == 2


def test_labels(built: tuple[Path, dict]) -> None:
    out, truth = built
    pages = {p["id"]: p for p in truth["pages"]}
    true = {frozenset(x[:2]): x for x in truth["true_pairs"]}
    amb = {frozenset(x[:2]): x for x in truth["ambiguous_pairs"]}
    assert not set(true) & set(amb)  # one label per pair, whichever way round
    assert all(len(k) == 2 for k in (*true, *amb))
    for p in pages.values():
        if p["cause"] == "original":
            assert p["original"] is None
            continue
        o = pages[p["original"]]
        assert o["cause"] == "original"
        assert frozenset((p["id"], o["id"])) in true
        assert p["cluster"] == o["cluster"]
    for a, b, _j, _r in truth["true_pairs"]:
        assert pages[a]["cluster"] == pages[b]["cluster"]
    for a, b, j, reason in truth["ambiguous_pairs"]:
        assert j < 0.9
        if reason == "jaccard_0.5_0.9":
            assert j >= 0.5
        else:
            assert pages[a]["cluster"] == pages[b]["cluster"]
    # exact Jaccard on the visible text: every pair at 0.9 or more is true, 0.5..0.9 at least ambiguous
    with gzip.open(out / "pages.jsonl.gz", "rt", encoding="utf-8") as f:
        html = {p["id"]: json.loads(x)["html"] for p, x in zip(truth["pages"], f, strict=True)}
    sh = {i: shingle_hashes(label_text(h), False) for i, h in html.items()}
    for a, b in combinations(sorted(pages), 2):
        j = hash_jaccard(sh[a], sh[b])
        key = frozenset((a, b))
        if j >= 0.9:
            assert key in true
        elif j >= 0.5:
            assert key in true or key in amb
        if pages[a]["cluster"] == pages[b]["cluster"]:
            assert key in true or key in amb
        if key in true and key not in amb and j < 0.5:
            assert pages[a]["cluster"] == pages[b]["cluster"]


def test_deterministic(built: tuple[Path, dict], realweb: ModuleType, tmp_path: Path) -> None:
    out, _truth = built
    args = json.loads(gzip.decompress((out / "truth.json.gz").read_bytes()))["sources"]
    again = tmp_path / "again"
    realweb.main([x for k, v in args.items() for x in (f"--{k}", v)] + [
        "--out", str(again), "--seed", "3", "--proxy", "1", "--ads", "1", "--counter", "1", "--edit", "1",
        "--thin-groups", "1"])
    for name in ("pages.jsonl.gz", "truth.json.gz"):
        assert (again / name).read_bytes() == (out / name).read_bytes()


def test_missing_source(realweb: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="readability source missing"):
        realweb.main(["--readability", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])


def _prose(tag: str, n: int) -> list[str]:
    """n paragraphs of words of their own (``tag`` on every word): texts that share no shingle."""
    rng = random.Random(tag)
    return [" ".join(rng.choice(WORDS) + tag for _ in range(rng.randint(25, 40))).capitalize() + "."
            for _k in range(n)]


def _host(comments: int = 12) -> str:
    """A host page of our own: a headline and an article in a main column, a sidebar widget, and a comment area
    with more paragraph text than the article."""
    article = "".join(f"<p>{p}</p>" for p in _prose('own', 4))
    talk = "".join(f'<li class="comment"><p>{p}</p></li>' for p in _prose('talk', comments))
    side = "".join(f"<p>{p}</p>" for p in _prose('side', 2))
    return ("<html><head><title>Host headline | host.example</title></head><body><header><nav><a href='/'>Home"
            "</a></nav></header><h1>Host headline</h1><div class='wrap'><div class='col-main'><div class='body'>"
            f"{article}</div><section id='comments'><h3>17 Discussion to this post</h3><ol>{talk}</ol></section>"
            f"</div><aside class='sidebar'><div class='widget'>{side}</div></aside></div>"
            "<footer>Copyright host.example</footer></body></html>")


def test_locate_main_skips_comments_and_uses_known_text() -> None:
    root = parse_page(_host())
    el = locate_main(root)
    assert el is not None and el.get("class") == "body"
    known = " ".join(_prose('own', 4))
    el = locate_main(parse_page(_host()), known)
    assert el is not None and el.get("class") == "body"
    # a block a reader does not see is never the main block
    hidden = _host().replace("<div class='body'>", "<div class='body' style='display: none'>")
    el = locate_main(parse_page(hidden), known)
    assert el is None or "body" not in (el.get("class") or "")


def test_check_insert() -> None:
    own = " ".join(_prose('own', 4))
    art = "".join(f"<p>{p}</p>" for p in _prose('art', 4))
    art_text = " ".join(_prose('art', 4))
    page = _host()
    good = page.replace(page[page.index("<div class='body'>"):page.index("<section id='comments'>")],
                        f"<div class='body'>{art}</div>")
    assert check_insert(good, art_text, own) is None
    # the article where the truth's visible text does not see it, or where a browser does not show it
    for wrap, why in (("<noscript>{}</noscript>", "article_not_visible"),
                      ("<div hidden>{}</div>", "article_not_rendered"),
                      ("<svg><foreignObject>{}</foreignObject></svg>", "article_not_rendered")):
        bad = good.replace(f"<div class='body'>{art}</div>", "<div class='body'>" + wrap.format(art) + "</div>")
        assert check_insert(bad, art_text, own) == why
    # the article in the comment area, the host's own article still in its column
    kept = page.replace("<ol>", f"<ol>{art}")
    assert check_insert(kept, art_text, own) == "host_text_kept"


def test_syndication_replaces_the_main_article() -> None:
    host = Source("aeb", "aeb/host", "aeb:host.example", "https://host.example/a", _host(),
                          main_text=" ".join(_prose('own', 4)))
    art = Source("aeb", "aeb/art", "aeb:art.example", "https://art.example/b", _page("art", "Art", []),
                         content="<div>" + "".join(f"<p>{p}</p>" for p in _prose('art', 4)) + "</div>",
                         article_title="The syndicated headline")
    html, title = make_syndication(random.Random(1), art, host, credit=True)
    assert title == "The syndicated headline"
    assert check_insert(html, label_text(art.content), host.main_text) is None
    text = label_text(html)
    assert "17 discussion to this post" in text and "the syndicated headline" in text and "host headline" not in text


def test_build_checks_every_insert(built: tuple[Path, dict]) -> None:
    out, truth = built
    assert "insert_rejects" in truth["stats"]
    assert "Rejected:" in (out / "README.md").read_text()
