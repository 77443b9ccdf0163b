"""What the benchmarks measure on: the public near-duplicate set, JSON Lines files, pages by language, and
random fingerprints with URL-like keys."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import numpy as np

from . import ROOT
from .text import html_language

SHARED = ROOT.parent / "shared"
#: The public near-duplicate set: ``pages.jsonl.gz`` (``url``, ``html``) and ``truth.json.gz`` (its labels).
PUBLIC_SET = SHARED / "datasets" / "neardup-public"
PUBLIC_PAGES = PUBLIC_SET / "pages.jsonl.gz"
#: Fingerprints per ``add_many`` of a bulk load.
BATCH = 100_000


def open_file(path: Path | str, mode: str = "rt") -> IO[Any]:
    """``path`` opened, decompressed when its name ends in ``.gz``; text modes read UTF-8."""
    path = Path(path)
    encoding = "utf-8" if "b" not in mode else None
    if path.suffix == ".gz":
        return gzip.open(path, mode, encoding=encoding)
    return open(path, mode, encoding=encoding)


def read_jsonl(path: Path | str) -> Iterator[dict[str, Any]]:
    """The rows of a JSON Lines file (optionally gzip), blank lines skipped."""
    with open_file(path) as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


# --- the labelled set, served as a site -----------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """A page of the set: its URL there, HTML, language and id."""

    url: str
    html: str
    lang: str
    label: str

    @property
    def path(self) -> str:
        """Where the local site serves it: ``/<host><path>[?query]``."""
        parts = urlsplit(self.url)
        return f"/{parts.hostname}{parts.path}" + (f"?{parts.query}" if parts.query else "")


@dataclass
class Corpus:
    """The pages to serve, where they come from, and the public set's true pairs among them."""

    name: str
    sources: list[Source]
    true_pairs: set[frozenset[str]] = field(default_factory=set)


def load_public(n: int, directory: Path = PUBLIC_SET) -> Corpus:
    """The first ``n`` original pages of the public set, in stream order, with their labels' true pairs."""
    with gzip.open(directory / "truth.json.gz", "rt", encoding="utf-8") as f:
        truth = json.load(f)
    labels = truth["pages"]
    originals = sum(1 for p in labels if p["cause"] == "original")
    if n > originals:
        raise SystemExit(f"the public set has {originals} original pages; --pages {n} asks for more")
    sources: list[Source] = []
    with gzip.open(directory / "pages.jsonl.gz", "rt", encoding="utf-8") as f:
        for line, label in zip(f, labels, strict=False):
            if label["cause"] != "original":
                continue
            row = json.loads(line)
            sources.append(Source(row["url"], row["html"], label["lang"], label["id"]))
            if len(sources) == n:
                break
    ids = {s.label for s in sources}
    pairs = {frozenset(p[:2]) for p in truth["true_pairs"] if p[0] in ids and p[1] in ids}
    return Corpus(f"public near-duplicate set ({directory}), original pages", sources, pairs)


# --- pages by language -------------------------------------------------------------------------------------

_BODY = re.compile(r"<body[^>]*>(.*?)(?:</body>|\Z)", re.S | re.I)


def pages_by_language(path: Path) -> dict[str, list[str]]:
    """HTML of every page of a JSON Lines file (optionally gzip), by language."""
    out: dict[str, list[str]] = {"en": [], "zh": []}
    for page in read_jsonl(path):
        lang = "zh" if ".zh-cn" in page["url"] else html_language(page["html"])
        out[lang].append(page["html"])
    return out


def spread_sample(pages: list[str], n: int) -> list[str]:
    """``n`` pages taken at an even stride over the list (deterministic)."""
    if len(pages) <= n:
        return list(pages)
    step = len(pages) / n
    return [pages[int(i * step)] for i in range(n)]


def enlarge(pages: list[str], n: int, size: int) -> list[str]:
    """``n`` pages of about ``size`` bytes: each page's body followed by the bodies of the next pages."""
    bodies = [m.group(1) if (m := _BODY.search(p)) else p for p in pages]
    out = []
    for i in range(min(n, len(pages))):
        base = pages[i]
        m = _BODY.search(base)
        head, tail = (base[: m.end(1)], base[m.end(1) :]) if m else (base, "")
        parts, total, j = [head], len(base.encode("utf-8")), i + 1
        while total < size and j < i + 1 + len(pages):
            extra = f'\n<div class="section">{bodies[j % len(pages)]}</div>'
            parts.append(extra)
            total += len(extra.encode("utf-8"))
            j += 1
        parts.append(tail)
        out.append("".join(parts))
    return out


# --- fingerprints ------------------------------------------------------------------------------------------


def random_fingerprints(n: int, seed: int) -> np.ndarray:
    """``n`` random 64-bit fingerprints (seeded)."""
    return np.random.default_rng(seed).integers(0, 2**64, size=n, dtype=np.uint64)


def url_keys(start: int, stop: int) -> list[str]:
    """URL keys of rows ``start`` to ``stop`` (about 45 bytes each)."""
    return [f"https://site{i % 997}.example.org/articles/{i:09d}.html" for i in range(start, stop)]
