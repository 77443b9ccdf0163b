"""Build the same-site development set (issue #45): every page of real documentation sites beside its siblings, in
the format of ``/work/shared/eval/score.py``'s sets, and the sites as static directories with mirrors for
``/work/shared/eval/site_flags.py``.  The pages are read from Debian's documentation packages at build time, never
committed; without them the build says so and exits 0.

    mkdir -p /work/data/samesite/debs && cd /work/data/samesite/debs && \\
      apt-get download gimp-help-en postgresql-doc-15 python3.11-doc git-doc debian-reference-en && \\
      for f in *.deb; do dpkg -x "$f" /work/data/samesite/root; done
    python -m benchmarks.accuracy.samesite --half 0 --out out/samesite-tune     # the tuning half of every source
    python -m benchmarks.accuracy.samesite --half 1 --out out/samesite-held --mirrors out/samesite-sites
    NEARDUP_PUBLIC=out/samesite-held python /work/shared/eval/score.py --set public \\
        --system ".venv/bin/simhash-filter dedup {input} --output {output}" --keep out/samesite-held-runs
    python /work/shared/eval/site_flags.py out/samesite-sites/gimp-1 out/samesite-sites/gimp-1-m1 \\
        out/samesite-sites/gimp-1-m2 --system ".venv/bin/simhash-filter dedup {input} --output {output}"

Sources (``--root``, default ``$SAMESITE_ROOT`` or ``/work/data/samesite/root``): GIMP's user manual (menu pages, one
page per command and dialog), PostgreSQL 15's manual (an SQL reference of one template, chapter index pages), the
Python 3.11 documentation (library and C API reference), git's HTML manual pages and guides, the Debian Reference.
Each source is split into two halves by a seeded hash of the page's path (``--half``): tune on one, score the other.

Every page of a half is an original (pages of one site with different titles or names are different documents; the
site is each page's ``template`` and ``topic``, so a flag between two of them counts as a hard-negative false
positive).  True near-duplicates of a page, made here with words of our own:

- ``path``: the same bytes under a second path of the same host (``/current/...``);
- ``print``: the printable view on the same host: the site's navigation header, footer and sidebars removed,
  a line naming the page printed;
- ``chrome``: the page on the same host after a change of the site's chrome (a version banner, a feedback line);
- ``alias``: an alias page that repeats the page word for word under another name on the same host;
- ``proxy``: a mirror under another host (an archive, search-cache or translation-proxy snapshot);
- ``edit``: word, character or sentence edits (realweb's).

Labels follow the public set's rules (``realweb.order_and_label``).  ``--mirrors DIR`` also writes each source's half
as a static site (``DIR/NAME-HALF``) with two mirrors (``-m1``: a mirror banner and a footer; ``-m2``: another
stylesheet, a search form and the navigation header removed), for ``site_flags.py`` (the crawl with mirrors: twins
are the same path on two mirrors; the site alone: every flag is onto another document unless its texts agree).
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import re
import shutil
import sys
from collections import Counter
from urllib.parse import urlsplit

import lxml.html
import xxhash

from benchmarks.accuracy import realweb as rw
from benchmarks.benchlib.text import label_text, parse_page
from benchmarks.benchlib.webpages import Source, decode_html, esc, read_file, title_of
from benchmarks.benchlib.webvariants import (
    PROXY_STYLES,
    edited_url,
    make_edit,
    make_proxy,
    parse_fragment,
    serialize,
)

SOURCES = {
    "gimp": "usr/share/gimp/2.0/help/en",
    "postgresql": "usr/share/doc/postgresql-doc-15/html",
    "python": "usr/share/doc/python3.11/html",
    "git": "usr/share/doc/git-doc",
    "debian-reference": "usr/share/debian-reference",
}
PACKAGES = "gimp-help-en postgresql-doc-15 python3.11-doc git-doc debian-reference-en"
SKIP = re.compile(r"(^|/)(search|404|genindex-all)\.html$")
XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")
MIN_WORDS = 20  # a menu page of a manual is short: keep it
MAX_BYTES = 1_500_000
# Chrome of the sites: DocBook's navigation header and footer, Sphinx's relbars, sidebar and footer, asciidoc's
# header and footer; and the generic tags.
CHROME = re.compile(r"^(navheader|navfooter|related|sphinxsidebar|footer|header|nav|navigation)$")
CAUSES = ("path", "print", "chrome", "alias", "proxy", "edit")


def read_page(path: str) -> str:
    """The page's text without an XML declaration (XHTML manuals have one; lxml refuses it in a str)."""
    return XML_DECL.sub("", decode_html(read_file(path)), count=1)


def _body(root):
    body = root.find("body")
    return body if body is not None else root


def half_of(rel: str, seed: int) -> int:
    return xxhash.xxh64_intdigest(rel.encode(), seed) % 2


def site_pages(root: str, name: str, half: int, seed: int) -> list[tuple[str, str]]:
    """(relative path, absolute path) of the source's HTML pages in *half*, sorted."""
    d = os.path.join(root, SOURCES[name])
    out = []
    for path in sorted(glob.glob(os.path.join(d, "**", "*.html"), recursive=True)):
        rel = os.path.relpath(path, d)
        if SKIP.search(rel) or os.path.getsize(path) > MAX_BYTES or half_of(rel, seed) != half:
            continue
        out.append((rel, path))
    return out


def _strip_chrome(root) -> int:
    gone = 0
    for el in list(root.iter("nav", "header", "footer", "div", "table")):
        words = " ".join(filter(None, [el.get("class"), el.get("id"), el.tag if el.tag != "div" else None])).split()
        chrome = el.tag in ("nav", "header", "footer") or any(CHROME.match(w) for w in words if el.tag != "table")
        if chrome and el.getparent() is not None:
            el.drop_tree()
            gone += 1
    return gone


def make_print(src: Source) -> str:
    root = parse_page(src.html)
    _strip_chrome(root)
    body = _body(root)
    body.insert(0, parse_fragment(f'<p class="printed">Printed from {esc(src.url)}</p>'))
    return serialize(root)


BANNERS = [
    "You are reading the documentation of an older release. The current release is documented elsewhere.",
    "This manual is maintained by volunteers: report a mistake on the project's tracker.",
    "Was this page helpful? Tell us what we could explain better.",
]


def make_chrome(rng, src: Source) -> str:
    root = parse_page(src.html)
    body = _body(root)
    body.insert(0, parse_fragment(f'<div class="version-banner"><p>{esc(rng.choice(BANNERS))}</p></div>'))
    body.append(parse_fragment('<div class="feedback"><a href="/feedback">Send feedback</a> '
                               f'<span>Last built {rng.randint(1, 28)} {rng.randint(1, 12)} 2026</span></div>'))
    return serialize(root)


def make_alias(src: Source, title: str) -> str:
    root = parse_page(src.html)
    t = root.find(".//title")
    if t is not None:
        t.text = f"{title} (alias)"
    _body(root).insert(0, parse_fragment(f'<p class="alias">This page is an alias of {esc(src.url)}.</p>'))
    return serialize(root)


def build(args) -> dict:
    from datasketch import MinHash, MinHashLSH

    rng = random.Random(args.seed * 2 + args.half)
    pages: list[rw.Page] = []
    seen: set[str] = set()
    originals, skipped = [], Counter()

    def add(html, url, o, cause, info, template, title, topic):
        while url in seen:
            url += ("&" if "?" in url else "?") + f"v={rng.randint(2, 999)}"
        seen.add(url)
        p = rw.Page(url=url, html=html, cause=cause, orig=o, info=info, template=template, title=title, topic=topic,
                    source="docs", lang="en", cjk=False)
        pages.append(p)
        return p

    hosts = []
    for name in args.source or sorted(SOURCES):
        listed = site_pages(args.root, name, args.half, args.seed)
        if not listed:
            skipped[f"{name}: no pages"] += 1
            continue
        hosts.append(name)
        rng.shuffle(listed)
        for rel, path in sorted(listed[: args.per_site]):
            html = read_page(path)
            parsed = parse_page(html)
            if parsed is None or len(re.findall(r"\w+", label_text(html))) < MIN_WORDS:
                skipped[name] += 1
                continue
            src = Source("docs", f"{name}/{rel}", name, f"https://docs.{name}.example/{rel}", html)
            o = dict(src=src, lang="en", cjk=False, title=title_of(parsed), topic=name)
            o["page"] = add(html, src.url, o, "original", {"collection": name, "key": rel}, name, o["title"], name)
            o["page"]["orig"] = None
            originals.append(o)
    for o in originals:
        s, title = o["src"], o["title"]
        sp = urlsplit(s.url)
        made = []
        if rng.random() < args.variants:
            made.append((s.html, f"{sp.scheme}://{sp.netloc}/current{sp.path}", "path", {}))
        if rng.random() < args.variants:
            made.append((make_print(s), s.url + "?print=1", "print", {}))
        if rng.random() < args.variants:
            made.append((make_chrome(rng, s), s.url + f"?build={rng.randint(2, 99)}", "chrome", {}))
        if rng.random() < args.variants / 2:
            made.append((make_alias(s, title), f"{sp.scheme}://{sp.netloc}/alias/{rw.slugify(title, rng)}.html",
                         "alias", {}))
        if rng.random() < args.variants * 2:
            html, url, info = make_proxy(rng, s, rng.choice(PROXY_STYLES))
            made.append((html, url, "proxy", info))
        if rng.random() < args.variants:
            edit = make_edit(rng, s, False)
            if edit:
                made.append((edit[0], edited_url(rng, s.url), "edit", edit[1]))
        for html, url, cause, info in made:
            add(html, url, o, cause, info, s.site, title, o["topic"])
    return dict(pages=pages, originals=originals, skipped=skipped, hosts=hosts, thin_groups=0, rejects=Counter(),
                rng=rng, MinHash=MinHash, MinHashLSH=MinHashLSH)


MIRROR_STYLES = {
    "m1": ('<div class="mirror-banner"><p>You are on a mirror of this manual, refreshed every night.</p></div>',
           '<div class="mirror-footer"><p>Mirror hosted by a university computing centre.</p></div>', False),
    "m2": ('<form class="mirror-search" action="/search"><input name="q"><button>Search</button></form>', "", True),
}


def write_mirrors(args) -> None:
    """Each source's half as a static site, and its two mirrors."""
    for name in args.source or sorted(SOURCES):
        listed = site_pages(args.root, name, args.half, args.seed)
        if not listed:
            continue
        base = os.path.join(args.mirrors, f"{name}-{args.half}")
        for rel, path in listed:
            for d in (base, *(f"{base}-{m}" for m in MIRROR_STYLES)):
                os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            shutil.copyfile(path, os.path.join(base, rel))
            html = read_page(path)
            for m, (top, bottom, strip) in MIRROR_STYLES.items():
                root = parse_page(html)
                if root is None:
                    shutil.copyfile(path, os.path.join(f"{base}-{m}", rel))
                    continue
                if strip:
                    for el in list(root.iter("div")):
                        if el.get("class") == "navheader" or el.get("class") == "related":
                            el.drop_tree()
                            break
                body = _body(root)
                body.insert(0, parse_fragment(top))
                if bottom:
                    body.append(parse_fragment(bottom))
                with open(os.path.join(f"{base}-{m}", rel), "w", encoding="utf-8") as f:
                    f.write("<!DOCTYPE html>\n" + lxml.html.tostring(root, encoding="unicode"))
        print(f"samesite: {name} half {args.half}: {len(listed)} pages -> {base} (and {base}-m1, {base}-m2)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root", default=os.environ.get("SAMESITE_ROOT", "/work/data/samesite/root"))
    ap.add_argument("--out", default="out/samesite")
    ap.add_argument("--half", type=int, choices=(0, 1), default=0, help="0: the tuning half, 1: the held-out half")
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--source", action="append", choices=sorted(SOURCES), help="default: every source found")
    ap.add_argument("--per-site", type=int, default=500, help="at most this many pages of a source's half")
    ap.add_argument("--variants", type=float, default=0.08, help="the chance of each same-host variant of a page")
    ap.add_argument("--mirrors", metavar="DIR", help="also write the half's sites and their mirrors here")
    ap.add_argument("--before", type=float, default=0.06)
    args = ap.parse_args(argv)
    missing = [n for n in (args.source or SOURCES) if not os.path.isdir(os.path.join(args.root, SOURCES[n]))]
    if len(missing) == len(args.source or SOURCES):
        print(f"samesite: skipped: no documentation under {args.root} (the packages {PACKAGES}; the module's "
              "docstring says how to unpack them)", file=sys.stderr)
        return 0
    if missing:
        print(f"samesite: left out (not under {args.root}): {', '.join(missing)}", file=sys.stderr)
        args.source = [n for n in (args.source or sorted(SOURCES)) if n not in missing]
    for k in rw.DEFAULTS:  # write_set records realweb's sources; here they are the packages
        setattr(args, k, "")
    b = build(args)
    lab = rw.order_and_label(b, args)
    rw.write_set(b, lab, args)
    causes = Counter(p["cause"] for p in b["pages"])
    print(f"samesite: {len(b['pages'])} pages ({len(b['originals'])} real from {b['hosts']}; variants "
          f"{dict((c, causes[c]) for c in CAUSES)}), {len(lab['true_pairs'])} true pairs, {len(lab['amb_pairs'])} "
          f"ambiguous; skipped {dict(b['skipped'])} -> {args.out}")
    if args.mirrors:
        write_mirrors(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
