"""Build a real-web near-duplicate development set (the format of ``/work/shared/eval/score.py``'s sets).

Originals are real pages already on disk (never copied into the repository): Mozilla Readability's test pages, the
Article Body Extraction benchmark (AEB), GNE's Chinese news portal pages and trafilatura's test cache.  Every variant
is made by this script and labelled with the page it was made from:

- ``syndication``: the article's main content (Readability's ``expected.html``; AEB's ``articleBody`` in ``<p>``;
  for GNE and trafilatura pages the block that matches trafilatura's extraction) inside another site's page: that
  host's main block (located by its known main text, else by where its paragraph prose is; never in a comment area,
  a sidebar or a hidden element) emptied and filled with the article, its headline the article's title, its header,
  navigation, sidebars, footer and comments kept.  Every such page (and every thin sibling) is checked after it is
  built: the inserted text at least 90 % present in the visible text (the labels' function, and what a browser
  shows), the host's own main text under 10 %; a page that fails is dropped and another host tried (counts in the
  README);
- ``proxy``: a web-archive, search-cache or translation-proxy snapshot (a toolbar on top, links rewritten);
- ``ads``, ``counter`` (visit counters, timestamps, generation times, session ids), ``edit`` (word or
  character edits, 1-10 % of the tokens, or one sentence removed).

Hard negatives come with them: several articles syndicated into one host's chrome (``template`` = the host's),
real pages of one site (GNE's portals, nytimes-1..5, wikipedia*, ...), and *thin siblings*: groups of short pages
in one host chrome whose own text is a title and one sentence beside a long note shared by the whole group.

A page's ``lang`` is that of its main text (known or extracted) where that is long enough, else of all its visible
text; a CJK character counts about as a Latin word. Labels follow the public set's rules (its README): visible text
by lxml without script/style/noscript/template/iframe/head, NFKC, lower-case; word 3-shingles, or character 4-grams
without whitespace and punctuation for Chinese and Japanese pages; a variant and its original are true; any pair
with Jaccard >= 0.9 is true; pairs in one cluster that are not true, and pairs with 0.5 <= J < 0.9, are ambiguous;
the rest is true distinct.
Pairs with J >= 0.5 are found with datasketch's MinHashLSH, then measured exactly.
The pages are read and their main block located by :mod:`benchlib.webpages`, the variants made by
:mod:`benchlib.webvariants`, the text rules are :mod:`benchlib.text`'s; this script builds, labels and reports.

    python -m benchmarks.accuracy.realweb [--out out/realweb] [--seed 20250612]
    NEARDUP_PUBLIC=out/realweb python /work/shared/eval/score.py --set public \\
        --system "simhash-filter dedup {input} --output {output}" --keep out/realweb-runs
    python -m benchmarks.accuracy.realweb --report out/realweb-runs/system.out.jsonl   # by cause x language, misses
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import sys
import unicodedata
from collections import Counter, defaultdict
from itertools import combinations
from urllib.parse import urlsplit

import xxhash

from benchmarks.benchlib.text import (
    LANGS,
    hash_jaccard,
    is_cjk,
    label_text,
    language_by_stopwords,
    parse_page,
    shingle_hashes,
)
from benchmarks.benchlib.webpages import (
    ARTICLE_PRESENT,
    HOST_PRESENT,
    Source,
    check_insert,
    norm_text,
    read_aeb,
    read_file,
    read_gne,
    read_readability,
    read_trafilatura,
    title_key,
    title_of,
)
from benchmarks.benchlib.webvariants import (
    PROXY_STYLES,
    SENTENCE_END,
    edited_url,
    empty_main,
    host_main,
    make_ads,
    make_counter,
    make_edit,
    make_proxy,
    make_syndication,
    make_thin,
    parse_fragment,
    serialize,
)

FORMAT = 1
DEFAULTS = {
    "readability": "/work/sources/readability/test/test-pages",
    "aeb": "/work/sources/aeb",
    "gne": "/work/sources/gne/tests",
    "trafilatura": "/work/sources/trafilatura/tests/cache",
}
CAUSES = ("original", "syndication", "proxy", "ads", "counter", "edit")
MIN_WORDS, MIN_CJK = 80, 200  # an original needs this much visible text
MIN_ARTICLE_CHARS = 400  # main content of an article that can be syndicated
TRUE_J, DISTINCT_J = 0.9, 0.5


# ------------------------------------------------------------------ the build
class Page(dict):
    pass


def slugify(s: str, rng) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:40] or "story"
    return f"{s}-{rng.randint(100, 99999)}"


def sentences_of(text: str, cjk: bool) -> list[str]:
    out = [s.strip() for s in SENTENCE_END.split(re.sub(r"\s+", " ", text)) if s.strip()]
    return [s for s in out if (20 <= len(s) <= 200 if cjk else 60 <= len(s) <= 300)]


PROBE_TITLE = "A probe headline for the host check"
PROBE = ("The probe paragraph stands where the host's own article was, and the check reads the page again to see "
         "that this text is shown and that the host's own main text is gone from it. " * 2).strip()


def page_lang(text: str, main_text: str | None) -> tuple[str, bool]:
    """The language of a page: of its main text where that is long enough (chrome in another language, a Chinese
    article in an English menu), else of all its visible text."""
    if main_text:
        t = norm_text(main_text)
        lang, cjk = language_by_stopwords(t)
        if sum(map(is_cjk, t)) >= MIN_CJK or len(re.findall(r"\w+", t)) >= MIN_WORDS:
            return lang, cjk
    return language_by_stopwords(text)


def load_sources(args) -> list[Source]:
    readers = {"readability": read_readability, "aeb": read_aeb, "gne": read_gne, "trafilatura": read_trafilatura}
    out = []
    for name, reader in readers.items():
        d = getattr(args, name)
        probe = os.path.join(d, "ground-truth.json") if name == "aeb" else d
        if not os.path.exists(probe):
            raise SystemExit(f"realweb: {name} source missing: {probe} (pass --{name} DIR)")
        out += reader(d)
    if args.sites_of > 1:  # a seeded part of the sites: a held-out set shares no site (template) with a tuned one
        out = [s for s in out if xxhash.xxh64_intdigest(split_key(s).encode(), args.split_seed) % args.sites_of ==
               args.sites_from]  # fmt: skip
    return out


def split_key(src: Source) -> str:
    """The site a source page belongs to, for a split by site: the family of a Readability test page, the host
    name of an AEB page, the portal of a GNE page, the first two labels of a trafilatura cache file's name."""
    if src.collection == "aeb":
        return "aeb:" + urlsplit(src.url).netloc
    if src.collection == "trafilatura":
        return "traf:" + ".".join(src.key.split("/", 1)[1].split(".")[:2])
    return src.site


def build(args) -> dict:
    try:
        from datasketch import MinHash, MinHashLSH
    except ImportError:
        raise SystemExit("realweb: needs datasketch (pip install datasketch)") from None
    rng = random.Random(args.seed)
    sources = load_sources(args)
    seen_urls: set[str] = set()
    originals: list[dict] = []
    skipped = Counter()
    for src in sources:
        text = label_text(src.html)
        lang, cjk = page_lang(text, src.main_text)
        n_words = len(re.findall(r"\w+", text)) if not cjk else sum(1 for ch in text if is_cjk(ch))
        if n_words < (MIN_CJK if cjk else MIN_WORDS):
            skipped[src.collection] += 1
            continue
        while src.url in seen_urls:
            src.url += ("&" if "?" in src.url else "?") + "dup=1"
        seen_urls.add(src.url)
        art_text = label_text(src.content) if src.content else ""
        originals.append(dict(src=src, lang=lang, cjk=cjk, article_ok=len(art_text.strip()) >= MIN_ARTICLE_CHARS
                              * (0.4 if cjk else 1), title=title_of(parse_page(src.html))))
    # hosts: pages whose main block holds a good share of the text and which have some chrome around it, and
    # where emptying that block takes the host's own main text away (a probe paragraph in its place)
    hosts = []
    rejects: Counter = Counter()
    for o in originals:
        root, mb, own = host_main(o["src"])
        if mb is None:
            rejects["host_no_main_block"] += 1
            continue
        whole = len(label_text(o["src"].html))
        inner = len(unicodedata.normalize("NFKC", " ".join(mb.itertext())))
        if not (whole and 0.25 <= inner / whole <= 0.9 and whole - inner >= 150):
            rejects["host_main_share"] += 1
            continue
        empty_main(root, mb, own, PROBE_TITLE)
        mb.append(parse_fragment(f"<p>{PROBE}</p>"))
        why = check_insert(serialize(root), PROBE, own)
        if why:
            rejects[f"host_probe_{why}"] += 1
            continue
        hosts.append(o)
    by_site = defaultdict(list)
    for h in hosts:
        by_site[h["src"].site].append(h)
    host_pool = [rng.choice(v) for _k, v in sorted(by_site.items())]
    rng.shuffle(host_pool)
    host_pool = host_pool[:args.hosts]

    pages: list[Page] = []

    def add(html, url, o, cause, info, template, title=None, topic=None, source=None, lang=None, cjk=None):
        while url in seen_urls:
            url += ("&" if "?" in url else "?") + f"v={rng.randint(2, 999)}"
        seen_urls.add(url)
        p = Page(url=url, html=html, cause=cause, orig=o, info=info, template=template,
                 title=title if title is not None else (o["title"] if o else ""),
                 topic=topic if topic is not None else (o["topic"] if o else None),
                 source=source or o["src"].collection, lang=lang or o["lang"],
                 cjk=o["cjk"] if cjk is None else cjk)
        pages.append(p)
        return p

    site_count = Counter(o["src"].site for o in originals)
    for o in originals:
        s = o["src"]
        o["topic"] = s.site if site_count[s.site] > 1 else f"{s.site}/{urlsplit(s.url).path.strip('/').split('/')[0]}"
        o["page"] = add(s.html, s.url, o, "original", {"collection": s.collection, "key": s.key}, s.site)
        o["page"]["orig"] = None
        o["page"]["self"] = o
    # syndication: each article into one host of another site, a third of them into a second one
    for o in originals:
        if not o["article_ok"]:
            continue
        copies = 1 + (rng.random() < args.second_host)
        used = set()
        for _ in range(copies):
            for _try in range(12):
                h = rng.choice(host_pool)
                if h["src"].site == o["src"].site or h["src"].site in used:
                    continue
                made = make_syndication(rng, o["src"], h["src"], credit=rng.random() < 0.4)
                if made is None:
                    continue
                html, title = made
                why = check_insert(html, label_text(o["src"].content), host_main(h["src"])[2])
                if why:
                    rejects[f"syndication_{why}"] += 1
                    continue
                used.add(h["src"].site)
                hurl = urlsplit(h["src"].url)
                url = f"{hurl.scheme or 'https'}://{hurl.netloc}/partner/{slugify(title, rng)}.html"
                add(html, url, o, "syndication", {"host": h["src"].key, "host_site": h["src"].site}, h["src"].site,
                    title=title)
                break
    for o in originals:
        s = o["src"]
        if rng.random() < args.proxy:
            style = rng.choice(PROXY_STYLES)
            html, url, info = make_proxy(rng, s, style)
            add(html, url, o, "proxy", info, s.site)
        if rng.random() < args.ads:
            html, info = make_ads(rng, s, o["cjk"])
            add(html, s.url + ("&" if "?" in s.url else "?") + f"ref=ad{rng.randint(1, 99)}", o, "ads", info, s.site)
        if rng.random() < args.counter:
            html, url, info = make_counter(rng, s, o["cjk"])
            add(html, url, o, "counter", info, s.site)
        if rng.random() < args.edit:
            made = make_edit(rng, s, o["cjk"])
            if made:
                add(made[0], edited_url(rng, s.url), o, "edit", made[1], s.site)
    # thin siblings: groups of short pages in one host chrome, a long note shared by the group
    sent_pool = defaultdict(list)
    for o in originals:
        if o["src"].content:
            sent_pool[o["lang"]] += [(o, x) for x in sentences_of(label_text(o["src"].content), o["cjk"])]
    thin_groups = 0
    for gi, h in enumerate(sorted(host_pool, key=lambda x: x["src"].key)[:args.thin_groups]):
        lang = h["lang"] if len(sent_pool[h["lang"]]) >= 60 else "en"
        pool = sent_pool[lang]
        cjk = lang == "zh" or (lang == "other" and h["cjk"])
        note_n = [3, 6, 10, 16][gi % 4]
        note = [x for _o, x in rng.sample(pool, note_n)]
        donors = rng.sample([o for o in originals if o["lang"] == lang], min(rng.randint(5, 9), sum(
            1 for o in originals if o["lang"] == lang)))
        shared_title = f"Notes and updates | {h['src'].site.split(':')[-1]}" if gi % 2 else None
        hurl = urlsplit(h["src"].url)
        for d in donors:
            sents = sentences_of(label_text(d["src"].content or d["src"].html), d["cjk"])
            if not sents:
                continue
            t = d["title"] or sents[0][:60]
            sent = rng.choice(sents)
            html = make_thin(rng, h["src"], t, sent, note, shared_title)
            if html is None:
                continue
            why = check_insert(html, " ".join([t, sent, *note]), host_main(h["src"])[2])
            if why:
                rejects[f"thin_{why}"] += 1
                continue
            add(html, f"{hurl.scheme or 'https'}://{hurl.netloc}/notes/{gi}/{slugify(t, rng)}", None, "original",
                {"thin_group": gi, "host": h["src"].key, "note_sentences": note_n}, h["src"].site,
                title=shared_title or t, topic=f"thin:{gi}", source="thin", lang=lang, cjk=cjk)
        thin_groups += 1
    return dict(pages=pages, originals=originals, skipped=skipped, hosts=host_pool, thin_groups=thin_groups,
                rejects=rejects,
                MinHash=MinHash, MinHashLSH=MinHashLSH, rng=rng)


def order_and_label(b: dict, args) -> dict:
    rng, pages = b["rng"], b["pages"]
    # crawl order: originals spread over the stream, a variant after its original (args.before: before it)
    for p in pages:
        if p["orig"] is None:
            p["key"] = rng.random()
    for p in pages:
        if p["orig"] is not None:
            ok = p["orig"]["page"]["key"]
            p["key"] = ok * rng.random() if rng.random() < args.before else ok + (1 - ok) * rng.random()
    pages.sort(key=lambda p: p["key"])
    for i, p in enumerate(pages):
        p["id"] = f"rw-{i:05d}"
    sh = []
    for p in pages:
        sh.append(shingle_hashes(label_text(p["html"]), p["cjk"]))
    n = len(pages)
    # candidates: MinHashLSH at 0.5 over the shingle hashes
    MinHash, MinHashLSH = b["MinHash"], b["MinHashLSH"]
    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    mhs = []
    for i, s in enumerate(sh):
        m = MinHash(num_perm=128, seed=1, hashfunc=lambda v: v)
        m.update_batch([int(v) & 0xFFFFFFFF for v in s] if len(s) else [0])
        mhs.append(m)
        lsh.insert(i, m)
    cand = set()
    for i, m in enumerate(mhs):
        for j in lsh.query(m):
            if j != i:
                cand.add((min(i, j), max(i, j)))
    jcache: dict[tuple[int, int], float] = {}

    def J(i, j):
        k = (min(i, j), max(i, j))
        if k not in jcache:
            jcache[k] = round(hash_jaccard(sh[k[0]], sh[k[1]]), 4)
        return jcache[k]

    idx_of = {id(p): i for i, p in enumerate(pages)}
    orig_idx = [idx_of[id(p["orig"]["page"])] if p["orig"] is not None else None for p in pages]
    true: dict[tuple[int, int], str] = {}
    for i, oi in enumerate(orig_idx):
        if oi is not None:
            true[(min(i, oi), max(i, oi))] = pages[i]["cause"]
    variants = defaultdict(list)
    for i, oi in enumerate(orig_idx):
        if oi is not None:
            variants[oi].append(i)
    sibling_pairs = set()
    for vs in variants.values():
        for a, c in combinations(sorted(vs), 2):
            sibling_pairs.add((a, c))
            if J(a, c) >= TRUE_J:
                true.setdefault((a, c), "sibling")
    ge05 = {k for k in cand if J(*k) >= DISTINCT_J}
    for k in ge05:
        if J(*k) >= TRUE_J:
            true.setdefault(k, "jaccard")
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, c in true:
        parent[find(a)] = find(c)
    members = defaultdict(list)
    for i in range(n):
        members[find(i)].append(i)
    amb: dict[tuple[int, int], str] = {}
    for ms in members.values():
        for a, c in combinations(sorted(ms), 2):
            if (a, c) not in true:
                amb[(a, c)] = "sibling" if (a, c) in sibling_pairs else "same_cluster"
    for k in sibling_pairs:
        if k not in true:
            amb.setdefault(k, "sibling")
    for k in ge05:
        if k not in true:
            amb.setdefault(k, "jaccard_0.5_0.9")
    cluster = [pages[min(members[find(i)])]["id"] for i in range(n)]
    recs = []
    for i, p in enumerate(pages):
        oi = orig_idx[i]
        recs.append(dict(
            id=p["id"], url=p["url"], lang=p["lang"], source=p["source"], cause=p["cause"],
            original=pages[oi]["id"] if oi is not None else None,
            jaccard_to_original=J(i, oi) if oi is not None else None, natural_identical=None,
            title=p["title"], title_key=title_key(p["title"]) or None, topic=p["topic"], xkey=None,
            template=p["template"], n_shingles=len(sh[i]), cluster=cluster[i],
            info=dict(p["info"])))
    ids = [p["id"] for p in pages]
    true_pairs = [[ids[a], ids[c], J(a, c), r] for (a, c), r in sorted(true.items())]
    amb_pairs = [[ids[a], ids[c], J(a, c), r] for (a, c), r in sorted(amb.items())]
    return dict(recs=recs, true_pairs=true_pairs, amb_pairs=amb_pairs, n_cand=len(cand), n_ge05=len(ge05))


def _bucket(j: float) -> str:
    return ">=0.9" if j >= 0.9 else "0.7-0.9" if j >= 0.7 else "0.5-0.7" if j >= 0.5 else "<0.5"


def write_set(b: dict, lab: dict, args) -> None:
    os.makedirs(args.out, exist_ok=True)
    pages, recs = b["pages"], lab["recs"]
    data = "".join(json.dumps({"url": p["url"], "html": p["html"]}, ensure_ascii=False) + "\n" for p in pages)
    with open(os.path.join(args.out, "pages.jsonl.gz"), "wb") as f:
        f.write(gzip.compress(data.encode("utf-8"), mtime=0))
    by_cl = Counter((r["cause"], r["lang"]) for r in recs)
    buckets = defaultdict(Counter)
    for r in recs:
        if r["cause"] != "original":
            buckets[r["cause"]][_bucket(r["jaccard_to_original"])] += 1
    stats = dict(
        n_pages=len(recs),
        by_cause_lang={f"{c}/{lg}": by_cl[(c, lg)] for c in CAUSES for lg in LANGS if by_cl[(c, lg)]},
        originals_by_collection=dict(Counter(r["source"] for r in recs if r["cause"] == "original")),
        skipped_too_little_text=dict(b["skipped"]), hosts=len(b["hosts"]), thin_groups=b["thin_groups"],
        insert_rejects=dict(sorted(b["rejects"].items())),
        thin_pages=sum(1 for r in recs if r["source"] == "thin"),
        true_pairs=len(lab["true_pairs"]), true_by_relation=dict(Counter(x[3] for x in lab["true_pairs"])),
        ambiguous_pairs=len(lab["amb_pairs"]), ambiguous_by_reason=dict(Counter(x[3] for x in lab["amb_pairs"])),
        jaccard_buckets={c: dict(v) for c, v in buckets.items()})
    truth = dict(set="realweb", version=FORMAT, seed=args.seed, pages=recs, true_pairs=lab["true_pairs"],
                 ambiguous_pairs=lab["amb_pairs"], stats=stats,
                 rules=dict(extractor="lxml body text minus script/style/noscript/template/head/iframe, NFKC, "
                                      "lower-case", en_shingle="word 3-shingles of the non-CJK text (every page)",
                            zh_shingle="character 4-grams of the CJK characters (every page; whitespace and "
                                       "punctuation removed)",
                            true_j=TRUE_J, distinct_j=DISTINCT_J),
                 lsh_audit=dict(lsh_candidates=lab["n_cand"], pairs_ge_0_5_found=lab["n_ge05"]),
                 sources={k: getattr(args, k) for k in DEFAULTS},
                 templates=sorted({r["template"] for r in recs}), mirror_sites=[])
    with open(os.path.join(args.out, "truth.json.gz"), "wb") as f:
        f.write(gzip.compress(json.dumps(truth, ensure_ascii=False, sort_keys=True).encode("utf-8"), mtime=0))
    langs = [lg for lg in LANGS if any(by_cl[(c, lg)] for c in CAUSES)]
    lines = ["# Near-duplicate web-page development set: realweb (built, not committed)", "",
             f"Built by `benchmarks/accuracy/realweb.py` (seed {args.seed}, format {FORMAT}) from real pages on disk: "
             + ", ".join(f"{k} `{getattr(args, k)}`" for k in DEFAULTS) + ". The page text is theirs; do not "
             "commit or redistribute this directory. Score: `NEARDUP_PUBLIC=<this dir> python "
             "/work/shared/eval/score.py --set public --system ...`. Labels: the public set's rules "
             "(`rules` in truth.json.gz).", "",
             f"## Size by cause and language ({len(recs)} pages)",
             "| cause | " + " | ".join(langs) + " |", "| --- |" + " --- |" * len(langs)]
    for c in CAUSES:
        lines.append(f"| {c} | " + " | ".join(str(by_cl[(c, lg)]) for lg in langs) + " |")
    lines += ["", f"Originals by collection: {stats['originals_by_collection']} (thin siblings: "
              f"{stats['thin_pages']} pages in {stats['thin_groups']} groups, cause `original`, source `thin`). "
              f"Skipped for too little visible text: {dict(b['skipped'])}. Host chromes: {len(b['hosts'])}.", "",
              "Every syndication page and thin sibling is checked after it is built: the inserted text at least "
              f"{ARTICLE_PRESENT:.0%} present in the page's visible text (the labels' function, and without what a "
              f"browser hides), the host's own main text under {HOST_PRESENT:.0%}; a page that fails is dropped and "
              "another host tried. Host pages are probed the same way first. Rejected: "
              + (", ".join(f"{k} {v}" for k, v in sorted(b["rejects"].items())) or "none") + ".", "",
              f"True pairs: {stats['true_pairs']} {stats['true_by_relation']}; ambiguous pairs: "
              f"{stats['ambiguous_pairs']} {stats['ambiguous_by_reason']}. LSH candidates {lab['n_cand']}, "
              f"pairs with J >= 0.5 among them {lab['n_ge05']}.", "",
              "Variants by exact Jaccard to their original:", "",
              "| cause | >=0.9 | 0.7-0.9 | 0.5-0.7 | <0.5 |", "| --- | --- | --- | --- | --- |"]
    for c in CAUSES[1:]:
        v = buckets[c]
        lines.append(f"| {c} | " + " | ".join(str(v[k]) for k in (">=0.9", "0.7-0.9", "0.5-0.7", "<0.5")) + " |")
    lines += ["", "score.py's own per-cause table knows only original/ads/counter/edit of these causes and en/zh of "
              "these languages: `python -m benchmarks.accuracy.realweb --report OUTPUT` gives every cause and "
              "language."]
    with open(os.path.join(args.out, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# ------------------------------------------------------------------ report of a system's output on the set
def report(args) -> None:
    with gzip.open(os.path.join(args.out, "truth.json.gz"), "rt", encoding="utf-8") as f:
        truth = json.load(f)
    pages = truth["pages"]
    rows = [json.loads(x) for x in read_file(args.report).decode("utf-8").splitlines() if x.strip()]
    if len(rows) != len(pages):
        raise SystemExit(f"realweb: {len(rows)} output lines, {len(pages)} pages")
    idx = {p["id"]: i for i, p in enumerate(pages)}
    pos = {p["url"]: i for i, p in enumerate(pages)}
    tr, am = defaultdict(set), defaultdict(set)
    for a, c, _j, _r in truth["true_pairs"]:
        tr[idx[a]].add(idx[c])
        tr[idx[c]].add(idx[a])
    for a, c, _j, _r in truth["ambiguous_pairs"]:
        am[idx[a]].add(idx[c])
        am[idx[c]].add(idx[a])
    n = len(pages)
    positive = [any(j < i for j in tr[i]) for i in range(n)]
    verdict = []
    for i, r in enumerate(rows):
        d = r.get("duplicate_of")
        j = pos.get(d) if d is not None else None
        verdict.append(None if d is None else "fp" if j is None or j >= i else "tp" if j in tr[i] else
                       "amb" if j in am[i] else "fp")

    def cat(p):
        return "thin" if p["source"] == "thin" else p["cause"]

    def agg(sel):
        tp = sum(verdict[i] == "tp" for i in sel)
        fp = sum(verdict[i] == "fp" for i in sel)
        ps = sum(positive[i] for i in sel)
        hit = sum(positive[i] and verdict[i] == "tp" for i in sel)
        pr = tp / (tp + fp) if tp + fp else None
        rc = hit / ps if ps else None
        f1 = 2 * pr * rc / (pr + rc) if pr and rc else None
        return len(sel), ps, tp, fp, pr, rc, f1

    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}"

    print("| group | pages | positives | tp | fp | precision | recall | F1 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    groups = [("all", list(range(n)))]
    groups += [(f"cause:{c}", [i for i in range(n) if cat(pages[i]) == c]) for c in (*CAUSES, "thin")]
    groups += [(f"lang:{lg}", [i for i in range(n) if pages[i]["lang"] == lg]) for lg in LANGS]
    for name, sel in groups:
        if sel:
            a = agg(sel)
            print(f"| {name} | {a[0]} | {a[1]} | {a[2]} | {a[3]} | {pct(a[4])} | {pct(a[5])} | {pct(a[6])} |")
    print("\nrecall by cause x language:")
    for c in CAUSES[1:]:
        cells = []
        for lg in LANGS:
            sel = [i for i in range(n) if pages[i]["cause"] == c and pages[i]["lang"] == lg]
            if sel:
                a = agg(sel)
                cells.append(f"{lg} {pct(a[5])} ({a[1]})")
        print(f"  {c}: " + ", ".join(cells))
    print("lenient recall by cause x language (a flag to the original or to an ambiguous partner counts):")
    for c in CAUSES[1:]:
        cells = []
        for lg in LANGS:
            sel = [i for i in range(n) if pages[i]["cause"] == c and pages[i]["lang"] == lg and positive[i]]
            if sel:
                cells.append(f"{lg} {pct(sum(verdict[i] in ('tp', 'amb') for i in sel) / len(sel))} ({len(sel)})")
        print(f"  {c}: " + ", ".join(cells))
    unfp = [i for i, r in enumerate(rows) if r.get("fingerprint") is None]
    print(f"\nunfingerprinted pages: {len(unfp)} "
          f"({Counter((cat(pages[i]), rows[i].get('status')) for i in unfp).most_common()})")
    misses = [i for i in range(n) if positive[i] and verdict[i] != "tp"]
    print(f"misses: {len(misses)} by cause {Counter(cat(pages[i]) for i in misses).most_common()}")
    print(f"  of them unfingerprinted themselves: {sum(rows[i].get('fingerprint') is None for i in misses)}; "
          f"flagged to an ambiguous partner: {sum(verdict[i] == 'amb' for i in misses)}")
    fps = [i for i in range(n) if verdict[i] == "fp"]
    kinds = Counter()
    for i in fps:
        j = pos.get(rows[i]["duplicate_of"])
        same = "same_template" if j is not None and pages[j]["template"] == pages[i]["template"] else "other_template"
        kinds[(cat(pages[i]), cat(pages[j]) if j is not None else "?", same)] += 1
    print(f"false positives: {len(fps)} (flagged page, named page, template): {kinds.most_common()}")
    if args.examples:
        for label, sel in (("miss", misses), ("fp", fps)):
            for i in sel[:args.examples]:
                p = pages[i]
                d = rows[i].get("duplicate_of")
                print(f"  {label} {p['id']} {cat(p)}/{p['lang']} J_orig={p['jaccard_to_original']} "
                      f"orig={p['original']} flagged={d} info={json.dumps(p['info'], ensure_ascii=False)[:160]} "
                      f"url={p['url'][:90]}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for k, v in DEFAULTS.items():
        ap.add_argument(f"--{k}", default=v, help=f"source directory (default {v})")
    ap.add_argument("--out", default="out/realweb", help="set directory to write (default out/realweb)")
    ap.add_argument("--seed", type=int, default=20250612)
    ap.add_argument("--hosts", type=int, default=45, help="host chromes for syndication (one per site at most)")
    ap.add_argument("--second-host", type=float, default=0.35, help="share of articles syndicated twice")
    ap.add_argument("--proxy", type=float, default=0.35)
    ap.add_argument("--ads", type=float, default=0.35)
    ap.add_argument("--counter", type=float, default=0.35)
    ap.add_argument("--edit", type=float, default=0.5)
    ap.add_argument("--thin-groups", type=int, default=8)
    ap.add_argument("--sites-of", type=int, default=1, help="split the source sites into this many seeded parts ...")
    ap.add_argument("--sites-from", type=int, default=0, help="... and build from this one (0-based)")
    ap.add_argument("--split-seed", type=int, default=37, help="seed of the split by site (default 37)")
    ap.add_argument("--before", type=float, default=0.06, help="share of variants placed before their original")
    ap.add_argument("--report", metavar="OUTPUT", help="instead of building: break a system's output on the set "
                                                       "(--out) down by cause and language; misses, false positives")
    ap.add_argument("--examples", type=int, default=0, help="with --report: print this many misses and FPs")
    args = ap.parse_args(argv)
    if args.report:
        report(args)
        return
    b = build(args)
    lab = order_and_label(b, args)
    write_set(b, lab, args)
    print(f"realweb: {len(lab['recs'])} pages, {len(lab['true_pairs'])} true pairs, {len(lab['amb_pairs'])} "
          f"ambiguous -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
