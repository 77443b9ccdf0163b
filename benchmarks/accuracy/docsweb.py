"""Build a documentation development set (the format of ``/work/shared/eval/score.py``'s sets) from real
documentation sites installed on this machine: the pages are read from disk at build time, never committed.

Sites (``--site NAME=DIR``, repeatable; by default the ones below that exist): npm's command and guide pages, Node's
API reference, the Rust toolchain's books (the book, Cargo, rustc, the edition guide, the embedded book, the
reference, the Rustonomicon, Clippy), its error-code index and its unstable-features book (hundreds of one-heading
pages of one template), Valgrind's manual.  Up to ``--per-site`` pages of each, seeded.

Variants of each real page, as ``benchmarks/realweb.py`` makes them (its functions): ``proxy`` (an archive,
search-cache or translation-proxy snapshot: the mirror of the crawl), ``ads``, ``counter``, ``edit``.  Hard
negatives: every page of a site beside the others of the site (one template; the unstable-features and error-code
pages are thin by nature), and **thin siblings built from real documentation**: in a page of the site (its main
block emptied), the heading of another real page of the site with its first sentence and first option list (up to
12 items), or with that list as a menu of links, or alone, beside a long note shared by the group (the first 3-16
sentences of a third page).  Labels follow the
public set's rules (realweb's ``order_and_label``).

    python -m benchmarks.accuracy.docsweb --out out/docsweb [--sites-from 0 --sites-of 2]   # a seeded half of the sites
    NEARDUP_PUBLIC=out/docsweb python /work/shared/eval/score.py --set public \\
        --system "simhash-filter dedup {input} --output {output}" --keep out/docsweb-runs
    python -m benchmarks.accuracy.realweb --out out/docsweb --report out/docsweb-runs/system.out.jsonl
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import re
from collections import Counter, defaultdict

import xxhash

from benchmarks.accuracy import realweb as rw
from benchmarks.benchlib.text import label_text, parse_page
from benchmarks.benchlib.webpages import Source, check_insert, decode_html, esc, read_file, title_of
from benchmarks.benchlib.webvariants import (
    PROXY_STYLES,
    edited_url,
    empty_main,
    host_main,
    make_ads,
    make_counter,
    make_edit,
    make_proxy,
    parse_fragment,
    serialize,
)

_RUST = os.path.expanduser("~/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html")
SITES = {
    "npm": "/usr/lib/node_modules/npm/docs/output",
    "node": "/usr/share/doc/nodejs/api",
    "valgrind": "/usr/share/doc/valgrind/html",
    **{
        f"rust-{b}": f"{_RUST}/{b}"
        for b in (
            "book",
            "cargo",
            "rustc",
            "edition-guide",
            "embedded-book",
            "reference",
            "nomicon",
            "clippy",
            "error_codes",
            "unstable-book",
        )
    },
}
SKIP = re.compile(r"(^|/)(print|index|toc|404|searchindex|all|search|SUMMARY)\.html$")
LIST_ITEMS = 12


def read_site(name: str, d: str, rng: random.Random, limit: int) -> list[Source]:
    paths = sorted(p for p in glob.glob(os.path.join(d, "**", "*.html"), recursive=True) if not SKIP.search(p))
    rng.shuffle(paths)
    out = []
    for path in paths:
        if len(out) >= limit:
            break
        html = decode_html(read_file(path))
        root = parse_page(html)
        if root is None:
            continue
        rel = os.path.relpath(path, d)
        url = f"https://docs.{name}.example/{rel}"
        src = Source("docs", f"docs/{name}/{rel}", f"docs:{name}", url, html)
        src.main_text = None
        out.append(src)
    return out


def _parts(src: Source):
    """(heading, first sentence, option list items) of a real page, from its main block."""
    root, main, _text = host_main(src)
    scope = main if main is not None else root
    if scope is None:
        return None
    heading = next(
        (" ".join(h.text_content().split()) for h in scope.iter("h1", "h2") if h.text_content().strip()), None
    )
    paras = [" ".join(p.text_content().split()) for p in scope.iter("p")]
    sentences = [s for p in paras for s in rw.sentences_of(p, False)]
    items = []
    for lst in scope.iter("ul", "ol", "dl"):
        items = [" ".join(li.text_content().split()) for li in lst if li.tag in ("li", "dt", "dd")]
        items = [x for x in items if x][:LIST_ITEMS]
        if len(items) >= 3:
            break
    if not heading or not sentences:
        return None
    return heading, sentences[0], items if len(items) >= 3 else []


def make_doc_thin(
    host: Source, heading: str, sentence: str | None, items: list[str], note: list[str], links: bool
) -> str | None:
    """A thin sibling in *host*'s chrome: the heading, the sentence (if any), the items (as a menu of links when
    *links*), then the shared note."""
    root, main, host_text = host_main(host)
    if main is None:
        return None
    empty_main(root, main, host_text, heading)
    main.append(parse_fragment(f"<h1>{esc(heading)}</h1>"))
    if sentence:
        main.append(parse_fragment(f"<p>{esc(sentence)}</p>"))
    if items:
        li = (
            f'<li><a href="#{i}">{esc(x[:60])}</a></li>' if links else f"<li>{esc(x)}</li>"
            for i, x in enumerate(items)
        )
        main.append(parse_fragment("<ul>" + "".join(li) + "</ul>"))
    main.append(parse_fragment('<div class="note">' + "".join(f"<p>{esc(s)}</p>" for s in note) + "</div>"))
    t = root.find(".//title")
    if t is not None:
        for c in list(t):
            t.remove(c)
        t.text = heading
    return serialize(root)


def build(args) -> dict:
    from datasketch import MinHash, MinHashLSH

    rng = random.Random(args.seed)
    sites = (
        dict(s.split("=", 1) for s in args.site) if args.site else {k: v for k, v in SITES.items() if os.path.isdir(v)}
    )
    chosen = {
        k: v
        for k, v in sorted(sites.items())
        if xxhash.xxh64_intdigest(k.encode(), args.seed) % args.sites_of == args.sites_from
    }
    pages: list[rw.Page] = []
    seen: set[str] = set()
    originals, skipped, rejects = [], Counter(), Counter()

    def add(html, url, o, cause, info, template, title, topic, source, lang="en"):
        while url in seen:
            url += ("&" if "?" in url else "?") + f"v={rng.randint(2, 999)}"
        seen.add(url)
        p = rw.Page(
            url=url,
            html=html,
            cause=cause,
            orig=o,
            info=info,
            template=template,
            title=title,
            topic=topic,
            source=source,
            lang=lang,
            cjk=False,
        )
        pages.append(p)
        return p

    by_site = defaultdict(list)
    for name, d in chosen.items():
        for src in read_site(name, d, rng, args.per_site):
            text = label_text(src.html)
            if len(re.findall(r"\w+", text)) < rw.MIN_WORDS:
                skipped[name] += 1
                continue
            o = dict(src=src, lang="en", cjk=False, title=title_of(parse_page(src.html)), topic=src.site)
            o["page"] = add(
                src.html,
                src.url,
                o,
                "original",
                {"collection": "docs", "key": src.key},
                src.site,
                o["title"],
                src.site,
                "docs",
            )
            o["page"]["orig"] = None
            originals.append(o)
            by_site[name].append(o)
    for o in originals:
        s = o["src"]
        if rng.random() < args.proxy:
            html, url, info = make_proxy(rng, s, rng.choice(PROXY_STYLES))
            add(html, url, o, "proxy", info, s.site, o["title"], o["topic"], "docs")
        if rng.random() < args.ads:
            html, info = make_ads(rng, s, False)
            add(html, s.url + f"?ref=ad{rng.randint(1, 99)}", o, "ads", info, s.site, o["title"], o["topic"], "docs")
        if rng.random() < args.counter:
            html, url, info = make_counter(rng, s, False)
            add(html, url, o, "counter", info, s.site, o["title"], o["topic"], "docs")
        if rng.random() < args.edit:
            made = make_edit(rng, s, False)
            if made:
                add(made[0], edited_url(rng, s.url), o, "edit", made[1], s.site, o["title"], o["topic"], "docs")
    groups = 0
    for name, os_ in sorted(by_site.items()):
        parts = [(o, p) for o in os_ if (p := _parts(o["src"]))]
        for g in range(args.thin_groups):
            if len(parts) < 8:
                break
            host = rng.choice(os_)["src"]
            note_src = rng.choice(parts)
            note_root = parse_page(note_src[0]["src"].html)
            note_sents = [
                s for p in note_root.iter("p") for s in rw.sentences_of(" ".join(p.text_content().split()), False)
            ]
            note = note_sents[: [3, 6, 10, 16][g % 4]]
            if len(note) < 3:
                continue
            donors = rng.sample([x for x in parts if x is not note_src], min(rng.randint(5, 9), len(parts) - 1))
            style = g % 3  # 0: heading, sentence, options; 1: heading and a menu of links; 2: heading alone
            for _o, (heading, sentence, items) in donors:
                html = make_doc_thin(
                    host, heading, sentence if style == 0 else None, items if style < 2 else [], note, links=style == 1
                )
                if html is None:
                    continue
                shown = [heading, sentence if style == 0 else "", *(items if style == 0 else []), *note]
                why = check_insert(html, " ".join(shown), host_main(host)[2])
                if why:
                    rejects[f"thin_{why}"] += 1
                    continue
                add(
                    html,
                    f"https://docs.{name}.example/notes/{g}/{rw.slugify(heading, rng)}",
                    None,
                    "original",
                    {
                        "thin_group": f"{name}/{g}",
                        "host": host.key,
                        "note_sentences": len(note),
                        "style": style,
                        "items": len(items),
                    },
                    host.site,
                    heading,
                    f"thin:{name}/{g}",
                    "thin",
                )
            groups += 1
    return dict(
        pages=pages,
        originals=originals,
        skipped=skipped,
        hosts=list(chosen),
        thin_groups=groups,
        rejects=rejects,
        rng=rng,
        MinHash=MinHash,
        MinHashLSH=MinHashLSH,
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="out/docsweb")
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument(
        "--site",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="a site (default: the known ones installed here)",
    )
    ap.add_argument("--sites-of", type=int, default=1, help="split the sites into this many seeded parts ...")
    ap.add_argument("--sites-from", type=int, default=0, help="... and keep this one (0-based)")
    ap.add_argument("--per-site", type=int, default=40)
    ap.add_argument("--proxy", type=float, default=0.35)
    ap.add_argument("--ads", type=float, default=0.2)
    ap.add_argument("--counter", type=float, default=0.3)
    ap.add_argument("--edit", type=float, default=0.4)
    ap.add_argument("--thin-groups", type=int, default=3, help="thin-sibling groups per site")
    ap.add_argument("--before", type=float, default=0.06)
    args = ap.parse_args(argv)
    for k in rw.DEFAULTS:  # write_set records realweb's sources; here they are the sites
        setattr(args, k, "")
    b = build(args)
    lab = rw.order_and_label(b, args)
    rw.write_set(b, lab, args)
    thin = sum(1 for p in b["pages"] if p["source"] == "thin")
    print(
        f"docsweb: {len(b['pages'])} pages ({len(b['originals'])} real, {thin} "
        f"thin siblings in {b['thin_groups']} groups) from {b['hosts']}, {len(lab['true_pairs'])} true pairs, "
        f"{len(lab['amb_pairs'])} ambiguous -> {args.out}"
    )


if __name__ == "__main__":
    main()
