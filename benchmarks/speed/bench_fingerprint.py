"""Fingerprinting speed, side by side in one run, English and Chinese apart.

Methods, each timed over the same pages (input as ``str``, as ``dedup`` reads it from JSON Lines):

- ``simhash-filter``: ``Fingerprinter().fingerprint(html)`` (decode, parse, extract, features, vote);
- ``lxml-text``: the ceiling, ``lxml.html.document_fromstring`` + drop script/style + ``" ".join(itertext())``;
- ``simhash-pypi``: PyPI ``simhash`` 2.1.2, ``Simhash(visible text)`` (the same text extraction as lxml-text);
- ``minhash``: datasketch ``MinHash(num_perm=128)`` of word 5-shingles of the visible text (a CJK
  character counts as a word).

Two page sets: the pages as they are, and "100 KB pages" (each page enlarged to about 100 KB by adding
the bodies of the following pages of the same language inside its ``<body>``: real, varied text, never
one string repeated).  Runs are interleaved: every repeat times every method on every set, in a rotated
order; reported figures are medians over ``--repeat`` runs.  Memos of simhash-filter (segmentation,
class/id words, per-word IDF and n-gram counts, feature bit counts: every ``_*_CACHE`` dict of
``features`` and a fresh ``Fingerprinter``) are emptied before each timed pass, so every pass starts
cold as a new process would; its word tables (jieba dictionary, IDF tables, loaded on first use) are
loaded once, before timing.  One process, one core (nothing here starts threads).

    python -m benchmarks.speed.bench_fingerprint --repeat 5 [--pages 300] [--big-pages 30] [--json out/bench.json]

Targets (on 100 KB pages): English at least 0.7x the speed of lxml-text; Chinese at least 80 pages/s.
"""

from __future__ import annotations

import gc
import logging
import os
import platform
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import lxml.html
import numpy as np
from lxml import etree

from benchmarks.benchlib.data import PUBLIC_PAGES, enlarge, pages_by_language, spread_sample
from benchmarks.benchlib.report import make_parser, write_json
from simhash_filter.model import extract as extract_mod
from simhash_filter.model import features as features_mod
from simhash_filter.model import segment as segment_mod
from simhash_filter.model.extract import extract
from simhash_filter.model.features import page_features
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model.html import NotHtml, parse

SHINGLE_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
METHODS = ("simhash-filter", "lxml-text", "simhash-pypi", "minhash")
STAGES = ("parse", "extract", "features", "hash+vote")

logging.getLogger("simhash").setLevel(logging.ERROR)


# ---------------------------------------------------------------- pages


EN_WORDS = """river valley farm water tank storm roof garden cottage museum keeper island harbour boat
ferry bridge market bakery library school teacher student village council winter summer spring autumn
season weather rain snow wind light lamp stone wall timber kitchen window door street road station train
engine server backup archive snapshot disk network script timer folder permission password restore
measure build repair clean carry open close count keep send write read check plan visit walk""".split()
ZH_WORDS = """社区 图书馆 居民 阅读 开放 时间 服务器 数据 备份 快照 硬盘 加密 上传 恢复 茶园 茶农 采摘 春茶
工序 合作社 机器 山坡 雾气 清晨 冬天 夏天 秋天 城市 街道 仓库 书架 主题 儿童 老人 沙发 问卷 调查
座位 活动 志愿者 故事 读书会 书法 手机 预约 图书 资金 单位 装修 花园 户外 文件 照片 视频 目录""".split()


def generated_pages(n: int, seed: int = 11) -> dict[str, list[str]]:
    """Pages made of random sentences over small vocabularies (used when the public set is absent)."""
    rnd = random.Random(seed)

    def para(words: list[str], sep: str, end: str) -> str:
        return "".join(sep.join(rnd.choice(words) for _ in range(rnd.randint(8, 16))) + end for _ in range(5))

    def page(i: int, words: list[str], sep: str, end: str) -> str:
        nav = "".join(f'<li><a href="/s{j}">{rnd.choice(words)}</a></li>' for j in range(8))
        paras = "".join(f"<p>{para(words, sep, end)}</p>" for _ in range(rnd.randint(4, 12)))
        return (
            f"<!DOCTYPE html><html><head><title>Page {i}</title><script>var a = {i};</script></head><body>"
            f"<header><nav><ul>{nav}</ul></nav></header><main><article><h1>Page {i}</h1>{paras}</article>"
            f"</main><footer><p>Footer {i}</p></footer></body></html>"
        )

    return {
        "en": [page(i, EN_WORDS, " ", ". ") for i in range(n)],
        "zh": [page(i, ZH_WORDS, "", "。") for i in range(n)],
    }


# ---------------------------------------------------------------- methods


def visible_text(html: str) -> str:
    """The ceiling's text: lxml parse, drop script and style, join all text nodes."""
    root = lxml.html.document_fromstring(html)
    etree.strip_elements(root, "script", "style", with_tail=False)
    return " ".join(root.itertext())


def _patch_simhash() -> None:
    """simhash 2.1.2 overflows uint8 under numpy 2; cast the bit array to int64 first."""
    import simhash

    simhash.Simhash._bitarray_from_bytes = staticmethod(
        lambda b: np.unpackbits(np.frombuffer(b, dtype=">B")).astype(np.int64)
    )


def reset_caches() -> None:
    """Empty simhash-filter's memo caches (not its word tables), so each pass starts cold."""
    for obj in (getattr(segment_mod, "segment_run", None), getattr(extract_mod, "_boilerplate_words", None)):
        if hasattr(obj, "cache_clear"):
            obj.cache_clear()
    for name in dir(features_mod):
        value = getattr(features_mod, name)
        if name.startswith("_") and name.endswith("_CACHE") and isinstance(value, dict):
            value.clear()


def make_methods() -> dict[str, Callable[[], Callable[[str], object]]]:
    """Factories: each timed pass gets a fresh callable (a fresh Fingerprinter, so no warm caches)."""

    def ours() -> Callable[[str], object]:
        reset_caches()
        return Fingerprinter().fingerprint

    def simhash_pypi() -> Callable[[str], object]:  # the peers are imported only when asked for (the bench extra)
        _patch_simhash()
        from simhash import Simhash

        return lambda html: Simhash(visible_text(html)).value

    def minhash(html: str) -> object:
        from datasketch import MinHash

        toks = SHINGLE_TOKEN.findall(visible_text(html).lower())
        shingles = {" ".join(toks[k : k + 5]) for k in range(max(1, len(toks) - 4))}
        m = MinHash(num_perm=128)
        m.update_batch([s.encode("utf-8") for s in shingles])
        return m

    return {
        "simhash-filter": ours,
        "lxml-text": lambda: visible_text,
        "simhash-pypi": simhash_pypi,
        "minhash": lambda: minhash,
    }


def _version(package: str) -> str | None:
    """The installed version of ``package``, None when it is not installed (the peers: the bench extra)."""
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def time_pass(fn: Callable[[str], object], pages: Iterable[str]) -> float:
    gc.collect()
    start = time.perf_counter()
    for html in pages:
        fn(html)
    return time.perf_counter() - start


def time_stages(pages: list[str]) -> dict[str, float]:
    """Seconds spent in each stage of simhash-filter over the pages, through the modules' functions."""
    reset_caches()
    fp = Fingerprinter()
    cfg = fp.config
    spent = dict.fromkeys(STAGES, 0.0)
    clock = time.perf_counter
    gc.collect()
    for html in pages:
        t0 = clock()
        try:
            parsed = parse(html, None, cfg.max_bytes)
        except NotHtml:
            spent["parse"] += clock() - t0
            continue
        t1 = clock()
        spent["parse"] += t1 - t0
        if parsed.root is None:
            continue
        page = extract(
            parsed.root,
            dom_decay=cfg.dom_decay,
            boilerplate_weight=cfg.boilerplate_weight,
            max_elements=cfg.max_elements,
        )
        t2 = clock()
        spent["extract"] += t2 - t1
        feats = page_features(page, cfg)
        t3 = clock()
        spent["features"] += t3 - t2
        if len(feats.text) >= cfg.min_features:
            fp.fingerprint_features(feats)
            spent["hash+vote"] += clock() - t3
    return spent


# ---------------------------------------------------------------- run and report


def run(sets: dict[str, list[str]], methods: list[str], repeat: int) -> tuple[dict, dict]:
    factories = make_methods()
    # Warm-up (not timed): load jieba's dictionary, the IDF tables, lxml and datasketch.
    for pages in sets.values():
        for name in methods:
            fn = factories[name]()
            for html in pages[:3]:
                fn(html)
    times: dict[str, dict[str, list[float]]] = {s: {m: [] for m in methods} for s in sets}
    stages: dict[str, dict[str, list[float]]] = {s: {k: [] for k in STAGES} for s in sets}
    for r in range(repeat):
        order = methods[r % len(methods) :] + methods[: r % len(methods)]
        for set_name, pages in sets.items():
            for name in order:
                times[set_name][name].append(time_pass(factories[name](), pages))
            for stage, seconds in time_stages(pages).items():
                stages[set_name][stage].append(seconds)
        print(f"  repeat {r + 1}/{repeat} done", file=sys.stderr, flush=True)
    return times, stages


def summarize(sets: dict[str, list[str]], times: dict, stages: dict) -> dict:
    results: dict = {}
    for set_name, pages in sets.items():
        mb = sum(len(p.encode("utf-8")) for p in pages) / 1e6
        row = {}
        for name, runs in times[set_name].items():
            med = statistics.median(runs)
            row[name] = {"median_s": med, "runs_s": runs, "pages_per_s": len(pages) / med, "mb_per_s": mb / med}
        ceiling = row.get("lxml-text")
        ours = row.get("simhash-filter")
        for r in row.values():
            r["speed_vs_lxml_text"] = r["pages_per_s"] / ceiling["pages_per_s"] if ceiling else None
            r["ours_speedup"] = ours["pages_per_s"] / r["pages_per_s"] if ours else None
        stage_med = {k: statistics.median(v) for k, v in stages[set_name].items()}
        results[set_name] = {
            "pages": len(pages),
            "mb": mb,
            "avg_kb": 1000 * mb / max(1, len(pages)),
            "methods": row,
            "stages_s": stage_med,
        }
    return results


def targets(results: dict) -> list[dict]:
    out = []
    big_en, big_zh = results.get("en-100KB"), results.get("zh-100KB")
    if big_en and "simhash-filter" in big_en["methods"] and "lxml-text" in big_en["methods"]:
        ratio = big_en["methods"]["simhash-filter"]["speed_vs_lxml_text"]
        out.append({"target": "English 100 KB: >= 0.7x lxml-text", "value": round(ratio, 3), "met": ratio >= 0.7})
    if big_zh and "simhash-filter" in big_zh["methods"]:
        pps = big_zh["methods"]["simhash-filter"]["pages_per_s"]
        out.append({"target": "Chinese 100 KB: >= 80 pages/s per core", "value": round(pps, 1), "met": pps >= 80})
    return out


def print_report(results: dict, goals: list[dict], repeat: int) -> None:
    for set_name, res in results.items():
        print(
            f"\n### {set_name}: {res['pages']} pages, {res['mb']:.2f} MB (avg {res['avg_kb']:.1f} KB), "
            f"median of {repeat}"
        )
        print("| method | pages/s | MB/s | x lxml-text | simhash-filter is Nx faster |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, r in res["methods"].items():
            vs = f"{r['speed_vs_lxml_text']:.2f}" if r["speed_vs_lxml_text"] is not None else "-"
            sp = f"{r['ours_speedup']:.2f}" if r["ours_speedup"] is not None else "-"
            print(f"| {name} | {r['pages_per_s']:.1f} | {r['mb_per_s']:.2f} | {vs} | {sp} |")
        total = sum(res["stages_s"].values())
        if total > 0:
            parts = ", ".join(
                f"{k} {1000 * v / res['pages']:.2f} ms/page ({100 * v / total:.0f}%)"
                for k, v in res["stages_s"].items()
            )
            print(f"simhash-filter stages: {parts}")
    if goals:
        print("\n### Targets")
        for g in goals:
            print(f"- {g['target']}: {g['value']} -> {'met' if g['met'] else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    ap = make_parser(__doc__, full=True)
    ap.add_argument("--input", type=Path, default=PUBLIC_PAGES, help="JSON Lines (.gz) with url and html")
    ap.add_argument("--pages", type=int, default=300, help="pages per language, as they are (default: 300)")
    ap.add_argument("--big-pages", type=int, default=30, help="100 KB pages per language (default: 30)")
    ap.add_argument("--big-size", type=int, default=100_000, help="bytes of an enlarged page (default: 100000)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {','.join(METHODS)}")
    ap.add_argument("--json", type=Path, help="also write the results as JSON")
    args = ap.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        ap.error(f"unknown methods: {', '.join(sorted(unknown))}")

    if args.input.exists():
        by_lang, source = pages_by_language(args.input), str(args.input)
    else:
        by_lang, source = generated_pages(max(args.pages, args.big_pages * 20)), "generated"
    sets: dict[str, list[str]] = {}
    for lang in ("en", "zh"):
        if args.pages > 0:
            sets[lang] = spread_sample(by_lang[lang], args.pages)
    for lang in ("en", "zh"):
        if args.big_pages > 0:
            sets[f"{lang}-100KB"] = enlarge(
                spread_sample(by_lang[lang], max(args.big_pages * 20, 200)), args.big_pages, args.big_size
            )
    print(f"pages from {source}: " + ", ".join(f"{k} {len(v)}" for k, v in sets.items()), file=sys.stderr)

    times, stages = run(sets, methods, args.repeat)
    results = summarize(sets, times, stages)
    goals = targets(results)
    print(f"# Fingerprinting speed (one process; input {source})")
    print_report(results, goals, args.repeat)
    if args.json:
        env = {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            **{p: _version(p) for p in ("lxml", "numpy", "simhash", "datasketch", "jieba", "rjieba")},
        }
        blob = {
            "command": " ".join(sys.argv),
            "input": source,
            "repeat": args.repeat,
            "environment": env,
            "results": results,
            "targets": goals,
        }
        write_json(args.json, blob, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
