"""The pages of a calibration's pairs: read from JSON Lines or WARC inputs, only those whose URL a pair names (the
first page of a URL wins), fingerprinted as ``dedup`` does, each with its language."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from simhash_filter.batch.dedup import Page, auto_workers, fingerprint_items, parse_line
from simhash_filter.batch.inputs import input_files
from simhash_filter.batch.reader import InputReader
from simhash_filter.batch.warc import WarcCounts
from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.model.html import NotHtml, parse
from simhash_filter.report.calibrate.labels import MAX_EXAMPLES

__all__ = ["CJK_SHARE", "PageCounts", "PageInfo", "PagesUnreadable", "language", "load_pages"]

#: A page without ``<html lang>`` is Chinese ("zh") when CJK ideographs are at least this share of its letters.
CJK_SHARE = 0.2


@dataclass(frozen=True, slots=True)
class PageInfo:
    """A page of a pair: its fingerprint and sketch, or the status that says why it has none; its language."""

    fingerprint: int | None
    sketch: bytes | None
    status: str | None = None
    lang: str = "und"


@dataclass
class PageCounts:
    """What reading the pages met."""

    inputs: list[str] = field(default_factory=list)
    #: URLs named by the pairs, found in the inputs, fingerprinted; the others by status.
    wanted: int = 0
    found: int = 0
    fingerprinted: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    #: JSON lines read, and those that are not a page (the first :data:`MAX_EXAMPLES` as (input, line, reason)).
    lines: int = 0
    malformed: int = 0
    malformed_lines: list[tuple[str, int, str]] = field(default_factory=list)
    #: What the WARC inputs held (pages, records skipped by reason, damaged places).
    warc: WarcCounts = field(default_factory=WarcCounts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "inputs": list(self.inputs),
            "wanted": self.wanted,
            "found": self.found,
            "fingerprinted": self.fingerprinted,
            "not_fingerprinted": dict(sorted(self.failed.items())),
            "json_lines": self.lines,
            "malformed": self.malformed,
            "malformed_lines": [{"input": i, "line": n, "reason": why} for i, n, why in self.malformed_lines],
            "warc": {
                "files": self.warc.files,
                "records": self.warc.records,
                "pages": self.warc.pages,
                "skipped": dict(sorted(self.warc.skipped.items())),
                "damaged": [str(d) for d in self.warc.damaged],
            },
        }


class PagesUnreadable(Exception):
    """A pages input failed while it was read (a ``.gz`` cut short, a read error): ``path`` names it, the error
    is the ``__cause__``."""

    def __init__(self, path: str, error: BaseException) -> None:
        super().__init__(f"{path}: read error: {error}")
        self.path = path


_LETTER = re.compile(r"[^\W\d_]")
_CJK = re.compile("[\u3400-\u9fff\uf900-\ufaff]")
_LANG = re.compile(r"[A-Za-z]{2,8}")


def language(html: bytes | str, encoding: str | None = None, max_bytes: int = DEFAULTS.fingerprint.max_bytes) -> str:
    """A page's language: the primary subtag of its ``<html lang>``, lower-cased (``zh-CN``: ``zh``); without one,
    ``zh`` when CJK ideographs are at least :data:`CJK_SHARE` of the letters of its visible text, else ``und``."""
    try:
        root = parse(html, encoding, max_bytes).root
    except NotHtml:
        return "und"
    if root is None:
        return "und"
    primary = re.split(r"[-_]", (root.get("lang") or "").strip(), maxsplit=1)[0]
    if _LANG.fullmatch(primary):
        return primary.lower()
    text = " ".join(root.itertext())
    letters = len(_LETTER.findall(text))
    return "zh" if letters and len(_CJK.findall(text)) >= CJK_SHARE * letters else "und"


def _pages(reader: InputReader, counts: PageCounts) -> Iterator[Page]:
    """The pages of one input as ``dedup`` reads it; its JSON lines that are not a page counted."""
    for n, item in enumerate(reader, 1):
        if isinstance(item, Page):
            yield item
            continue
        if not item.strip():
            continue
        counts.lines += 1
        url, html, why = parse_line(item)
        if url is None or html is None:
            counts.malformed += 1
            if len(counts.malformed_lines) < MAX_EXAMPLES:
                name, line, _ = reader.where(n)
                counts.malformed_lines.append((name, line, why or "malformed"))
            continue
        yield Page(url, html)


def load_pages(
    inputs: Sequence[str],
    urls: Iterable[str],
    *,
    config: FilterConfig = DEFAULTS,
    workers: int | None = 1,
    lang_urls: Iterable[str] | None = None,
) -> tuple[dict[str, PageInfo], PageCounts]:
    """Fingerprint the pages of ``inputs`` (each read as ``dedup`` reads it, in the order given) whose URL is in
    ``urls`` (the first page of each URL), in ``workers`` processes (None: as ``dedup`` chooses by the inputs'
    size), and tell the language of those in ``lang_urls`` (default: all).  An input that gives no file raises
    :class:`FileNotFoundError` before any work; a read error part way raises :class:`PagesUnreadable`."""
    wanted = set(urls)
    langs_wanted = wanted if lang_urls is None else set(lang_urls) & wanted
    counts = PageCounts(inputs=list(inputs), wanted=len(wanted))
    max_bytes = config.fingerprint.max_bytes + 1  # the work cap, and a byte to know a page was cut
    readers = [(path, InputReader(input_files([path]), max_bytes=max_bytes)) for path in inputs]
    size = sum((reader.size or 0) + reader.compressed * 4 for _, reader in readers)
    langs: dict[str, str] = {}

    def items() -> Iterator[Page]:
        seen: set[str] = set()
        for path, reader in readers:
            pages = _pages(reader, counts)
            while True:
                try:
                    page = next(pages, None)
                except (OSError, EOFError) as exc:
                    raise PagesUnreadable(reader.current or path, exc) from exc
                if page is None:
                    break
                if page.url in wanted and page.url not in seen:
                    seen.add(page.url)
                    if page.url in langs_wanted:
                        langs[page.url] = language(page.html, page.encoding, max_bytes)
                    yield page
            counts.warc.update(reader.counts)

    if workers is None:
        workers = auto_workers(size)
    infos: dict[str, PageInfo] = {}
    for url, value, status, _reason, sketch in fingerprint_items(items(), config=config.fingerprint, workers=workers):
        if url is None:  # pragma: no cover - every item is a Page with a URL
            continue
        counts.found += 1
        if value is None or status is not None:
            counts.failed[str(status)] += 1
            infos[url] = PageInfo(None, None, str(status), langs.get(url, "und"))
        else:
            counts.fingerprinted += 1
            infos[url] = PageInfo(value, sketch, None, langs.get(url, "und"))
    return infos, counts
