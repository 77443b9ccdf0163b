"""Golden fingerprints: prove that a change of the code leaves every fingerprint bit-identical.

``build OUT`` records, for thousands of pages under the default and six other configurations, each
page's fingerprint (value, status, feature count, truncation, encoding) and a digest of its exact
features and of ``extract_page``'s output; ``check OUT`` recomputes them with the current code and lists
what differs (exit status 1 if anything does).  A refactoring for speed must pass ``check``; a change
of the model fails it by design (then bump ``MODEL_VERSION`` and build anew).

Pages: the public set (when ``../shared`` is there), generated sample pages (``devsites/sample.py``), the
test fixtures (``devsites/pages.py``), ~100 KB pages built from the public set, and hostile or odd inputs
(deep nesting, entities, binary bytes, legacy encodings, huge text, random markup).

    python -m benchmarks.checks.golden build out/golden.json.gz
    python -m benchmarks.checks.golden check out/golden.json.gz      # after the change
    python -m benchmarks.checks.golden build out/g.json.gz --limit 200  # a quick run
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from benchmarks.benchlib.data import PUBLIC_PAGES, enlarge, open_file, pages_by_language, spread_sample
from benchmarks.benchlib.report import make_parser
from simhash_filter.config import FingerprintConfig
from simhash_filter.model.extract import extract_page
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model.html import NotHtml, page_bytes

CONFIGS = {
    "default": FingerprintConfig(),
    "ngrams12": FingerprintConfig(ngrams=(1, 2)),
    "whole-words": FingerprintConfig(char_ngram=0, cjk_char_ngram=0),
    "text-only": FingerprintConfig(structure_weight=0.0),
    "structure-only": FingerprintConfig(structure_weight=1.0),
    "caps": FingerprintConfig(max_elements=50, max_tokens=300, max_bytes=20_000),
    "misc": FingerprintConfig(dom_decay=1.0, boilerplate_weight=0.5, idf_power=1.0, char_ngram=3, cjk_char_ngram=1),
}
#: Other configurations than the default fingerprint every OTHER_STEP-th page; features and extract
#: output are recorded for every DETAIL_STEP-th page, and for every hostile or enlarged one.
OTHER_STEP, DETAIL_STEP = 7, 20


def hostile() -> Iterator[tuple[str, bytes | str]]:
    yield "deep-div", "<div>" * 100_000 + " ".join(f"alpha{i} beta gamma" for i in range(30)) + "</div>" * 100_000
    yield "deep-b", "<html><body>" + "<b>" * 50_000 + " ".join(f"deep{i} words in bold" for i in range(30))
    yield (
        "entities",
        "<p>" + " ".join(f"&amp; word{i} &lt;tag&gt; &nbsp; caf&eacute; &#x4e2d;&#25991;" for i in range(50)),
    )
    yield (
        "xml-entity",
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;&a; tide gauge</x>'
        + "".join(f"<p>reading{i} of the gauge</p>" for i in range(20)),
    )
    yield "comments", "".join(f"<p>Harbour{i} notes<!-- c -->more{i} text<?pi x?> and tail</p>" for i in range(40))
    yield "cdata", "".join(f"<svg><![CDATA[ hidden ]]></svg><p>visible{i} words appear here</p>" for i in range(30))
    yield (
        "script-tail",
        "".join(f"<p>alpha{i}<script>var x=1;</script>beta<style>p{{}}</style>delta eta</p>" for i in range(10)),
    )
    yield "empty", ""
    yield "spaces", "   \n\t "
    yield "binary", bytes(range(256)) * 10
    yield (
        "gbk",
        ("<p>" + "社区图书馆开放时间调整，居民阅读服务照常。渡轮售票处搬到码头旁边。" * 5 + "</p>").encode("gbk"),
    )
    yield "cp1252", ("<p>" + " ".join(f"café{i} naïve résumé façade" for i in range(40)) + "</p>").encode("cp1252")
    yield (
        "utf16",
        ("<html><body><p>" + " ".join(f"ferry{i} timetable notice" for i in range(40)) + "</p>").encode("utf-16"),
    )
    yield "mixed-zh-en", "<p>" + "渡轮时刻表 version 3.11 和 numpy库 2024年5月 的更新说明 " * 30 + "</p>"
    yield (
        "class-words",
        "".join(
            f'<div class="mainNav item-{i}" id="x_{i}" role="navigation"><a href="#">link {i}</a> text {i}</div>'
            f'<div class="contentBody"><p>article paragraph number {i} with several words inside</p></div>'
            for i in range(40)
        ),
    )
    yield (
        "link-table",
        "<table>"
        + "".join(f"<tr><td><a href='/{i}'>link text {i}</a></td><td>cell words {i} here</td></tr>" for i in range(60))
        + "</table>",
    )
    yield "huge-text", "<p>" + " ".join(f"w{i % 5000}x" for i in range(300_000)) + "</p>"
    yield "nfkc", "<p>" + " ".join(f"ＡＢＣ{i} ｆｕｌｌｗｉｄｔｈ ﬁne ligature Straße ǅ" for i in range(40)) + "</p>"
    yield "long-words", "<p>" + " ".join(("abcdefghij" * k)[: 40 * k] + f"z{k}" for k in range(1, 40)) + "</p>"
    yield "long-cjk", "<p>" + "码头渡轮售票处" * 400 + " alpha beta gamma delta</p>"
    rnd = random.Random(5)
    alphabet = "abcdefghij <>/=\"'&;#pdivspan中文字测试\n\t"
    for i in range(40):
        yield f"random-{i}", "".join(rnd.choice(alphabet) for _ in range(rnd.randint(100, 5000)))


def pages() -> Iterator[tuple[str, bytes | str]]:
    """(key, html) of every page, in a fixed order."""
    if PUBLIC_PAGES.exists():
        with open_file(PUBLIC_PAGES) as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    yield f"public:{n}", json.loads(line)["html"]
    from devsites import sample

    for seed in (7, 8):
        for n, row in enumerate(sample.sample(150, seed)):
            yield f"sample{seed}:{n}", row["html"]
    from devsites import pages as fixtures

    for i, page in enumerate(fixtures.determinism_pages()):
        yield f"fixture:{i}", page
    for name, (a, b) in {**fixtures.near_duplicate_pairs(), **fixtures.distinct_pairs()}.items():
        yield f"fixture-pair:{name}:a", a
        yield f"fixture-pair:{name}:b", b
    if PUBLIC_PAGES.exists():
        by_lang = pages_by_language(PUBLIC_PAGES)
        for lang in ("en", "zh"):
            big = enlarge(spread_sample(by_lang[lang], 600), 30, 100_000)
            for i, page in enumerate(big):
                yield f"big-{lang}:{i}", page
    for key, page in hostile():
        yield f"hostile:{key}", page


def _digest(value: Any) -> str:
    return hashlib.sha256(repr(value).encode("utf-8")).hexdigest()[:20]


def record(limit: int | None = None) -> dict[str, Any]:
    """Everything ``build`` stores, computed with the current code."""
    every = list(islice(pages(), limit))
    entries: dict[str, list[Any]] = {}
    for cname, config in CONFIGS.items():
        fingerprinter = Fingerprinter(config)
        subset = every if cname == "default" else every[::OTHER_STEP]
        for i, (key, html) in enumerate(subset):
            fp = fingerprinter.fingerprint(html)  # the one-pass path where the compiled core has it
            sketch = None if fp.sketch is None else fp.sketch.hex()
            entry: list[Any] = [fp.hex, str(fp.status), fp.features, fp.truncated, fp.encoding, sketch]
            if i % DETAIL_STEP == 0 or key.startswith(("big", "hostile", "fixture")):
                analyzed, feats = fingerprinter.analyze(html)  # the features' path gives the same fingerprint
                entry.append(analyzed == fp)
                entry.append(
                    None if feats is None else _digest((sorted(feats.text.items()), sorted(feats.structure.items())))
                )
                entry.append(_extract_digest(html, config))
            entries[f"{cname}|{key}"] = entry
    return {"model_id": CONFIGS["default"].model_id(), "entries": entries}


def _extract_digest(html: bytes | str, config: FingerprintConfig) -> str | None:
    try:
        data = page_bytes(html, None, config.max_bytes)[0]
    except NotHtml:
        return None
    if not data:
        return None
    text = extract_page(
        data, dom_decay=config.dom_decay, boilerplate_weight=config.boilerplate_weight, max_elements=config.max_elements
    )
    return _digest((text.texts, sorted(text.structure.items()), text.elements, text.truncated))


def compare(gold: dict[str, Any], now: dict[str, Any], show: int = 10) -> list[str]:
    """Lines describing what differs (none: identical)."""
    out = []
    if gold["model_id"] != now["model_id"]:
        out.append(f"model id: {gold['model_id']} -> {now['model_id']}")
    g, n = gold["entries"], now["entries"]
    if g.keys() != n.keys():
        out.append(f"pages: {len(g.keys() - n.keys())} recorded but not computed, {len(n.keys() - g.keys())} new")
    differ = [k for k in g if k in n and g[k] != n[k]]
    out += [f"differs: {k}: {g[k]} -> {n[k]}" for k in differ[:show]]
    if len(differ) > show:
        out.append(f"... and {len(differ) - show} more")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("mode", choices=("build", "check"))
    parser.add_argument("path", type=Path, help="the golden file (.json.gz)")
    parser.add_argument("--limit", type=int, help="only the first N pages (a quick run; build and check alike)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    now = record(args.limit)
    seconds = time.perf_counter() - start
    if args.mode == "build":
        args.path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(args.path, "wt", encoding="utf-8") as f:
            json.dump(now, f)
        print(f"{len(now['entries'])} fingerprints of model {now['model_id']} recorded in {seconds:.1f} s: {args.path}")
        return 0
    with gzip.open(args.path, "rt", encoding="utf-8") as f:
        gold = json.load(f)
    problems = compare(gold, now)
    for line in problems:
        print(line)
    print(
        f"{len(now['entries'])} fingerprints compared in {seconds:.1f} s: " + ("DIFFERENT" if problems else "identical")
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
