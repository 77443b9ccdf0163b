"""Duplicate floods (issue 24): generated page streams that used to make the index's checks O(n²), and a
crawler trap to serve on loopback.

Every word here is written for this module (no text from elsewhere); every stream is deterministic for its
seed.  A page is ``{"url", "html"}``, one JSON object per line.

- ``changing``: one documentation page of our own (``DOC_*``: a manual page of an imaginary tool), the same on
  every page but for one line: the day of an archive calendar, a visitor counter and a session id;
- ``bag``: 300 words drawn from 19 (``BAG_WORDS``) per page: every page a near-duplicate of every other;
- ``template``: one shop template with a different 40-word product text on each page (drawn from
  ``PRODUCT_WORDS``): a flood of one template, but no two pages near-duplicates;
- ``distinct``: the baseline of different pages: generated articles of :mod:`devsites.sample` (a new
  article each page, in its site templates).

The trap (:func:`calendar_trap`): an infinite calendar, ``/calendar/YYYY-MM-DD``, every day the same
documentation page with its date and a visit counter, linking to the next day (and the day before, a week
and a month on, and ``/about``); ``/`` links to the first day.  Serve it with
``devsites.localsite.LocalSite({}, resolve=calendar_trap())``.

    python -m devsites.floods changing 100000 out/changing.jsonl [--seed 24]
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import itertools
import json
import random
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from devsites import sample
from devsites.localsite import Page

KINDS = ("changing", "bag", "template")
#: The flood kinds and the baseline of distinct pages.
ALL_KINDS = (*KINDS, "distinct")
SEED = 24

# --- the documentation page (our own text) ------------------------------------------------------------------

DOC_TITLE = "Rotating the archive: the nightly job of Ledgerkeep"
DOC = [
    "Ledgerkeep writes every change of a ledger to an append-only archive.  Left alone, the archive grows "
    "without end, so a nightly job rotates it: the segments older than the retention period are packed into "
    "one compressed bundle, checked against their own digests, and only then removed from the live directory.",
    "The job runs at the hour named by the rotate_at option, in the server's local time.  When a rotation is "
    "still running at the next hour, the second one does not start; it is logged as skipped and the "
    "counter named rotations_skipped goes up by one.  Two skipped nights in a row deserve a look at the disk.",
    "Retention is counted in whole days.  A segment is old when its last record is older than the period, not "
    "its first one, so a busy segment that spans midnight stays one night longer than a quiet one.  Setting "
    "the period to zero keeps nothing but the open segment, which is rarely what anybody wants.",
    "Each bundle carries a manifest: the names of its segments, their sizes, the first and last sequence "
    "numbers and a digest of each.  The restore command reads the manifest first and refuses a bundle whose "
    "digests do not match, naming the first segment that differs, before it writes a single record back.",
    "Bundles may live on another machine.  The upload step sends a finished bundle to the target named by "
    "archive_target, waits for the remote digest, and only deletes the local copy when both agree.  A failed "
    "upload leaves the bundle in the outbox directory, where the next night's job tries again.",
    "To test a rotation without waiting for the night, run the job by hand with the dry-run flag.  It prints "
    "the segments it would pack, the bundle's expected size and the space it would free, and changes nothing.  "
    "Operators often keep this output in the change log before they shorten the retention period.",
    "Common mistakes: pointing the outbox at the live directory, which makes every bundle a segment of the "
    "next one; running two servers against one archive, which the lock file prevents unless it was removed "
    "by hand; and forgetting that the clock of a virtual machine may jump after it resumes from a pause.",
]
DOC_SECTIONS = ("Guide", "Reference", "Operations", "Release notes", "Support")

# --- the bag of words (our own nineteen) -------------------------------------------------------------------

BAG_WORDS = (
    "lantern copper willow ferry pebble orchard thistle harbour saddle quill meadow tinder "
    "bramble anvil cobble heron kettle marble juniper"
).split()
assert len(BAG_WORDS) == 19
BAG_PAGE_WORDS = 300

# --- the shop template and its product words (our own) -----------------------------------------------------

PRODUCT_WORDS = (
    "sturdy light folding compact waterproof quiet rechargeable wooden steel ceramic linen woollen cotton "
    "bamboo brass leather glass enamel walnut oak maple cedar slate granite canvas rubber silicone titanium "
    "aluminium kettle lamp chair bench table shelf basket blanket cushion mug bowl plate jug vase clock radio "
    "speaker torch tent stove flask backpack umbrella scarf glove boot jacket apron towel rug curtain mirror "
    "frame hook rack drawer cabinet stool ladder bucket spade rake hose trowel planter lantern candle "
    "notebook pencil easel brush palette keyboard mouse cable charger adapter battery holds keeps folds "
    "pours lights warms cools stores carries hangs stands fits opens closes locks cleans dries grinds brews "
    "measures weighs cuts sews fixes kitchen garden office workshop cabin balcony hallway attic cellar "
    "terrace porch studio nursery pantry garage shed red blue green amber ivory charcoal olive rust teal "
    "sand plum copper pearl honey smoke mint coral indigo lemon two three four five six eight ten twelve "
    "litre metre gram inch pair set pack dozen spare extra handmade recycled vintage modern classic rustic "
    "everyday seasonal limited gentle bright soft smooth rough heavy slim wide narrow tall short round "
    "square oval curved flat deep shallow warm cool fresh dry"
).split()
PRODUCT_TEXT_WORDS = 40
SHOP_NAME = "Fieldhouse Goods"
SHOP_SECTIONS = ("Home", "Kitchen", "Garden", "Workshop", "Textiles", "Lighting", "Sale", "Contact")
#: The template's own text beside each product's (in the page's main content, as shops print it): enough that
#: the fingerprints of two products fall within the candidate distance, not so much that their sketches verify.
SHOP_PROMISE = (
    "Every piece is checked by hand in our workshop before it leaves. Orders placed before noon are packed the "
    "same day and sent by tracked post; most parcels arrive within three working days. If something is not "
    "right, send it back within thirty days in its original wrapping and we refund the full price, postage "
    "included. Wooden items like a little oil twice a year, and nothing we sell needs special cleaners "
    "or tools."
)


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def doc_page(changing_line: str, *, links: str = "") -> str:
    """The documentation page with one line that changes per page (and *links*, HTML, after it)."""
    nav = "".join(f'<li><a href="/docs/{i}">{_e(s)}</a></li>' for i, s in enumerate(DOC_SECTIONS))
    paras = "\n".join(f"<p>{_e(p)}</p>" for p in DOC)
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>{_e(DOC_TITLE)} | Ledgerkeep manual</title></head>
<body><header><a class="logo" href="/">Ledgerkeep manual</a><nav><ul>{nav}</ul></nav></header>
<main><article><h1>{_e(DOC_TITLE)}</h1>
<p class="visit">{_e(changing_line)}</p>
{paras}
</article>{links}</main>
<footer><p>Ledgerkeep manual, written for the tool's operators. Edit this page on the project's wiki.</p></footer>
</body></html>
"""


def _changing(rng: random.Random, i: int) -> dict[str, str]:
    day = dt.date(2026, 1, 1) + dt.timedelta(days=i)
    sid = f"{rng.getrandbits(64):016x}"
    visitor = 10_000 + 7 * i + rng.randint(0, 6)
    line = f"Archive calendar: day {i + 1}, {day.isoformat()} · visitor {visitor} · session {sid}"
    return {"url": f"https://docs.ledgerkeep.example/calendar/{day.isoformat()}?sid={sid}", "html": doc_page(line)}


def _bag(rng: random.Random, i: int) -> dict[str, str]:
    words = " ".join(rng.choices(BAG_WORDS, k=BAG_PAGE_WORDS))
    title = " ".join(rng.choices(BAG_WORDS, k=3))
    page = f"<!DOCTYPE html><html><head><title>{title}</title></head><body><p>{words}</p></body></html>\n"
    return {"url": f"https://bag.example/w/{i}", "html": page}


def shop_page(product: str, text: str, number: int) -> str:
    """The shop's template around one product (its name, its text, its number)."""
    nav = "".join(f'<li><a href="/c/{i}">{_e(s)}</a></li>' for i, s in enumerate(SHOP_SECTIONS))
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>{_e(product)} | {SHOP_NAME}</title></head>
<body><header><a class="logo" href="/">{SHOP_NAME}</a><nav><ul>{nav}</ul></nav>
<form class="search" action="/search"><input name="q" placeholder="Search the shop"></form></header>
<main><div class="product"><h1>{_e(product)}</h1>
<div class="price">Item {number}</div>
<div class="description"><p>{_e(text)}</p></div>
<div class="promise"><p>{_e(SHOP_PROMISE)}</p></div>
<button class="add">Add to basket</button></div>
<aside class="help"><h3>Delivery</h3><ul><li><a href="/delivery">Delivery and returns</a></li>
<li><a href="/care">Care guides</a></li><li><a href="/gift">Gift cards</a></li></ul></aside></main>
<footer><p>{SHOP_NAME}: small things made to last. Prices include tax.</p>
<ul><li><a href="/terms">Terms</a></li><li><a href="/privacy">Privacy</a></li></ul></footer></body></html>
"""


def _template(rng: random.Random, i: int) -> dict[str, str]:
    words = rng.choices(PRODUCT_WORDS, k=PRODUCT_TEXT_WORDS)
    product = " ".join(rng.sample(PRODUCT_WORDS, 3)).capitalize()
    text = " ".join(words).capitalize() + "."
    return {"url": f"https://shop.fieldhouse.example/p/{i}", "html": shop_page(product, text, i + 1)}


def _distinct(rng: random.Random, i: int) -> dict[str, str]:
    lang = "en" if i % 2 == 0 else "zh"
    article = sample.make_article(rng, lang)
    site = rng.choice([s for s in sample.SITES if s.lang == lang])
    return {"url": f"https://{site.domain}/{article.date[:7]}/{article.topic}-{i}.html".replace(" ", "-"),
            "html": sample.render(site, article)}  # fmt: skip


_MAKERS: dict[str, Callable[[random.Random, int], dict[str, str]]] = {
    "changing": _changing,
    "bag": _bag,
    "template": _template,
    "distinct": _distinct,
}


def pages(kind: str, n: int | None = None, seed: int = SEED) -> Iterator[dict[str, str]]:
    """The first *n* pages (None: without end) of a stream of *kind* (:data:`ALL_KINDS`), lazily."""
    if kind not in _MAKERS:
        raise ValueError(f"kind must be one of {', '.join(ALL_KINDS)}, got {kind!r}")
    make, rng = _MAKERS[kind], random.Random(f"{kind}/{seed}")
    for i in range(n) if n is not None else itertools.count():
        yield make(rng, i)


def write(kind: str, n: int, path: Path | str, seed: int = SEED) -> int:
    """*n* pages of *kind* as JSON Lines in *path* (streamed); returns the bytes written."""
    size = 0
    with open(path, "w", encoding="utf-8") as out:
        for page in pages(kind, n, seed):
            line = json.dumps(page, ensure_ascii=False) + "\n"
            size += len(line.encode("utf-8"))
            out.write(line)
    return size


# --- the crawler trap: an infinite calendar ----------------------------------------------------------------

CALENDAR_START = dt.date(2026, 1, 1)


class CalendarTrap:
    """An infinite calendar to serve with ``LocalSite({}, resolve=trap)``: ``/`` links to the first day,
    ``/calendar/YYYY-MM-DD`` is the documentation page with its date and a visit counter (one count per page
    served, across the whole site), linking to the day before, the next day, the same day next week and 30 days
    on (so that the frontier widens as on a real calendar), and to ``/about``, a page of its own;
    ``/robots.txt`` allows everything.  Any other path: 404."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.visits = 0
        #: The calendar pages served (days).
        self.days_served = 0

    def __call__(self, host: str, path: str) -> Any:
        path, _, _query = path.partition("?")
        if path == "/robots.txt":
            return Page(b"User-agent: *\nAllow: /\n", "text/plain")
        if path == "/":
            body = (f'<!DOCTYPE html><html><head><title>Ledgerkeep manual</title></head><body><h1>Ledgerkeep manual'
                    f'</h1><p><a href="/calendar/{CALENDAR_START.isoformat()}">The archive calendar</a></p>'
                    '<p><a href="/about">About this manual</a></p></body></html>')  # fmt: skip
            return Page(body.encode("utf-8"))
        if path == "/about":
            body = ("<!DOCTYPE html><html><head><title>About the Ledgerkeep manual</title></head><body><h1>About"
                    "</h1><p>This manual is kept by the operators who run Ledgerkeep in production. Corrections "
                    "are welcome: every page names the wiki page it was built from, and a change reaches the "
                    "published manual within the hour after a reviewer accepts it.</p></body></html>")  # fmt: skip
            return Page(body.encode("utf-8"))
        if not path.startswith("/calendar/"):
            return None
        try:
            day = dt.date.fromisoformat(path.removeprefix("/calendar/"))
        except ValueError:
            return None
        with self._lock:
            self.visits += 1
            self.days_served += 1
            visit = self.visits
        links = " ".join(
            f'<a href="/calendar/{(day + dt.timedelta(days=step)).isoformat()}">{label}</a>'
            for step, label in ((-1, "Previous day"), (1, "Next day"), (7, "Next week"), (30, "In a month"))
        )
        links = f'<nav class="calendar">{links} <a href="/about">About</a></nav>'
        line = f"Archive calendar: {day.strftime('%A %d %B %Y')} · you are visitor {40_000 + visit}"
        return Page(doc_page(line, links=links).encode("utf-8"))


def calendar_trap() -> CalendarTrap:
    """A new :class:`CalendarTrap` (its visit counter at zero)."""
    return CalendarTrap()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("kind", choices=ALL_KINDS)
    parser.add_argument("pages", type=int)
    parser.add_argument("output", type=Path)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    size = write(args.kind, args.pages, args.output, args.seed)
    print(f"{args.pages} {args.kind} pages, {size / 1e6:.1f} MB: {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
