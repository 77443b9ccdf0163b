"""Changes to a page's HTML that a browser does not show, and how far each moves the fingerprint.

    python -m benchmarks.accuracy.invariance                     # the public set's pages (../shared/datasets)
    python -m benchmarks.accuracy.invariance pages.jsonl --limit 500

Each transformation keeps the rendered page the same: whitespace re-wrapped, minified or re-indented
(outside ``<pre>``, scripts and styles), attributes in another order, characters written as entities, the
page in another charset, comments added.  Prints, per transformation, the share of pages whose fingerprint
did not move (distance 0), the share within k, and the largest distance.  The tests apply the same
transformations to the fixture pages (``tests/test_invariance.py``).
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from benchmarks.benchlib.data import PUBLIC_PAGES, read_jsonl
from benchmarks.benchlib.report import make_parser
from simhash_filter import DEFAULTS, Fingerprinter, hamming

_TOKEN = re.compile(r"(<!--.*?-->|<[^>]*>)", re.S)
_RAW = re.compile(r"<(/?)(pre|script|style|textarea|title)\b", re.I)  # whitespace matters, or not HTML text
_ATTR = re.compile(r"""\s+([^\s=/>]+)(\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+))?""")
_TAG = re.compile(r"<([a-zA-Z][^\s/>]*)(.*?)(/?)>$", re.S)
_WS = re.compile(r"\s+")
_META_CHARSET = re.compile(r"<meta[^>]*charset[^>]*>", re.I)


def _pieces(html: str) -> Iterator[tuple[str, bool]]:
    """The page as (piece, is_text) where text pieces are text outside raw elements, in order."""
    raw_depth = 0
    for piece in _TOKEN.split(html):
        if not piece:
            continue
        if piece.startswith("<"):
            m = _RAW.match(piece)
            if m:
                raw_depth = max(0, raw_depth + (-1 if m[1] else 1))
            yield piece, False
        else:
            yield piece, raw_depth == 0


def _map_text(html: str, fn: Callable[[str], str]) -> str:
    return "".join(fn(p) if is_text else p for p, is_text in _pieces(html))


def rewrap(html: str, width: int = 60) -> str:
    """Text re-wrapped at ``width`` columns, continuation lines indented: some spaces become a newline and
    eight spaces."""

    def wrap(text: str) -> str:
        out, col = [], 0
        for part in re.split(r"( +)", text):
            if part.startswith(" ") and col > width:
                out.append("\n        ")
                col = 0
            else:
                out.append(part)
                col += len(part)
        return "".join(out)

    return _map_text(html, wrap)


_CJK_PAIR = re.compile(r"([\u3400-\u9fff\uf900-\ufaff])(?=[\u3400-\u9fff\uf900-\ufaff])")


def rewrap_cjk(html: str, width: int = 30) -> str:
    """Chinese text re-wrapped: a line break between two CJK characters every ``width`` characters (a
    segment break between CJK characters is not rendered as a space)."""

    def wrap(text: str) -> str:
        count = [0]

        def brk(m: re.Match[str]) -> str:
            count[0] += 1
            return m[1] + ("\n        " if count[0] % width == 0 else "")

        return _CJK_PAIR.sub(brk, text)

    return _map_text(html, wrap)


def minify(html: str) -> str:
    """Every run of whitespace outside raw elements as one space."""
    return _map_text(html, lambda t: _WS.sub(" ", t))


_EDGE_WS = re.compile(r"^\s+|\s+$")


def reindent(html: str) -> str:
    """Whitespace between tags and text (outside raw elements) as a newline and an indent."""
    return _map_text(html, lambda t: _EDGE_WS.sub("\n      ", t))


def reorder_attributes(html: str) -> str:
    """Each tag's attributes in reverse order."""

    def tag(piece: str) -> str:
        m = _TAG.match(piece)
        if not m or piece.startswith("<!"):
            return piece
        attrs = [a.group(0).strip() for a in _ATTR.finditer(m[2])]
        if len(attrs) < 2:
            return piece
        return f"<{m[1]} {' '.join(reversed(attrs))}{m[3]}>"

    return "".join(p if is_text or not p.startswith("<") else tag(p) for p, is_text in _pieces(html))


def entities(html: str) -> str:
    """Letters ``e`` and every non-ASCII character of the text written as numeric character references."""

    def encode(text: str) -> str:
        text = text.replace("&", "\x00")  # existing references stay as they are
        text = "".join(f"&#{ord(c)};" if c == "e" or ord(c) > 127 else c for c in text)
        return text.replace("\x00", "&")

    return _map_text(html, encode)


def comments(html: str) -> str:
    """A comment before every fifth word and between tags."""

    def add(text: str) -> str:
        words = text.split(" ")
        return " ".join(f"<!-- c{i} -->{w}" if i % 5 == 4 else w for i, w in enumerate(words))

    out = _map_text(html, add)
    return out.replace("><", "><!-- between --><")


def recharset(html: str) -> bytes:
    """The page in GB18030 when it has Chinese, else in windows-1252 (characters it lacks as references),
    its ``<meta charset>`` saying so."""
    charset = "gb18030" if re.search(r"[\u4e00-\u9fff]", html) else "windows-1252"
    meta = f'<meta charset="{charset}">'
    html = _META_CHARSET.sub(meta, html) if _META_CHARSET.search(html) else html.replace("<head>", f"<head>{meta}", 1)
    return html.encode(charset, "xmlcharrefreplace")


TRANSFORMS: dict[str, Callable[[str], str | bytes]] = {
    "rewrap": rewrap,
    "rewrap-cjk": rewrap_cjk,
    "minify": minify,
    "reindent": reindent,
    "attributes": reorder_attributes,
    "entities": entities,
    "charset": recharset,
    "comments": comments,
}


def _pages(path: Path, limit: int, seed: int) -> list[str]:
    pages = [row["html"] for row in read_jsonl(path)]
    random.Random(seed).shuffle(pages)
    return pages[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("pages", nargs="?", type=Path, default=PUBLIC_PAGES, help="JSON Lines of {url, html} (.gz ok)")
    parser.add_argument("--limit", type=int, default=1000, help="pages sampled (default: 1000)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if not args.pages.exists():
        print(f"invariance: {args.pages} not found (the public set lives in ../shared/datasets)", file=sys.stderr)
        return 1
    fingerprinter = Fingerprinter(DEFAULTS.fingerprint)
    k = DEFAULTS.max_distance
    pages = _pages(args.pages, args.limit, args.seed)
    base = [fingerprinter.fingerprint(html).value for html in pages]
    print(f"{len(pages)} pages of {args.pages.name}, k = {k}")
    print(f"{'transformation':<14} {'distance 0':>10} {'within k':>9} {'max':>4}")
    for name, transform in TRANSFORMS.items():
        distances = []
        for html, value in zip(pages, base, strict=True):
            if value is None:
                continue
            moved = fingerprinter.fingerprint(transform(html)).value
            distances.append(64 if moved is None else hamming(value, moved))
        n = len(distances)
        zero = sum(d == 0 for d in distances) / n
        within = sum(d <= k for d in distances) / n
        print(f"{name:<14} {zero:>10.1%} {within:>9.1%} {max(distances):>4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
