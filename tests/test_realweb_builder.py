"""benchmarks/realweb.py: a tiny set built from a few synthetic pages (our own text) in the layout of each source
collection, and the invariants of its labels."""

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

pytest.importorskip("datasketch")

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("river harbour lantern orchard meadow copper violet window garden pepper ladder silver marble canyon "
         "thunder pillow candle basket forest bridge mirror ticket rocket velvet saddle button island").split()


@pytest.fixture(scope="module")
def realweb() -> Iterator[ModuleType]:
    with benchmark_module(ROOT / "benchmarks" / "realweb.py") as module:
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


def test_labels(built: tuple[Path, dict], realweb: ModuleType) -> None:
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
    sh = {i: realweb.shingles(realweb.visible_text(h), False) for i, h in html.items()}
    for a, b in combinations(sorted(pages), 2):
        j = realweb.jaccard(sh[a], sh[b])
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
