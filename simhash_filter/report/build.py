"""The report of what the filter did (docs/report.md), built from a :class:`~simhash_filter.report.source.Source`
in two reads: the decisions (clusters, near misses, hosts, skipped pages), then the content of the pages of the
first ``max_pairs`` pairs, kept compressed in a temporary file, whose details are worked out a chunk at a time.
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any

from simhash_filter import __version__
from simhash_filter.batch.dedup import MALFORMED
from simhash_filter.config import FilterConfig
from simhash_filter.index.nearduplicate import NearDuplicateIndex, host_of
from simhash_filter.report import DEFAULT_MAX_PAIRS, DEFAULT_TEXT_CAP, detail, html, svg
from simhash_filter.report.source import Source

__all__ = ["Decisions", "Options", "Report", "build", "read_decisions"]

#: Pairs per lazily decoded block of the report (and per unit of work).
PAIRS_PER_CHUNK = 50
#: Near misses: kept pages within k + this many bits of an earlier page (at most 16).
NEAR_MISS_MARGIN = 3
#: Status of a page that a near-duplicate names but that is not in the input (kept by an earlier crawl).
ABSENT = "absent"
#: Chunks of work in flight per worker process.
JOBS_IN_FLIGHT = 3


@dataclass(slots=True)
class Options:
    """How to build a report."""

    config: FilterConfig = field(default_factory=FilterConfig)
    max_pairs: int = DEFAULT_MAX_PAIRS
    text_cap: int = DEFAULT_TEXT_CAP
    workers: int = 1
    title: str | None = None
    #: Called with a line of progress now and then (None: quiet).
    progress: Callable[[str], None] | None = None


@dataclass(slots=True)
class Decisions:
    """The first read: one row per page in input order (page id = row), and pages named but absent after them."""

    urls: list[str] = field(default_factory=list)
    hosts: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    statuses: list[str | None] = field(default_factory=list)
    fingerprints: list[int | None] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)  # the page it duplicates, or -1
    distances: list[int | None] = field(default_factory=list)
    #: The similarity a near-duplicate's feed item carries (a crawl's flag mode), or None.
    similarities: list[float | None] = field(default_factory=list)
    host_names: list[str] = field(default_factory=list)
    unchanged: int = 0  # near-duplicates of themselves: the same URL kept by an earlier crawl
    html: bool = False  # whether the source holds HTML (else text, or nothing)
    text: bool = False  # whether it holds any page's text
    malformed: int = 0  # lines that are neither a feed item nor a dedup output line

    def __len__(self) -> int:
        return len(self.urls)


@dataclass(frozen=True, slots=True)
class Report:
    """A report's data (:func:`simhash_filter.report.html.render` makes the HTML of it) and its numbers."""

    summary: dict[str, Any]
    #: The pairs' details, :data:`PAIRS_PER_CHUNK` a chunk, encoded for the HTML (:func:`html.encode`).
    chunks: list[html.Encoded]
    charts: dict[str, str]
    clusters: int
    pairs: int
    near_misses: int
    #: Pairs shown with both pages' texts (none when the input holds neither HTML nor text).
    detailed: int

    @property
    def pages(self) -> int:
        """The pages read (malformed lines not counted)."""
        return int(self.summary["meta"]["pages"]) - self.malformed

    @property
    def malformed(self) -> int:
        """Lines that were neither a feed item nor a dedup output line."""
        return int(self.summary["meta"]["malformed"])

    def html(self) -> str:
        """The self-contained HTML file."""
        return html.render(self.summary, self.chunks, self.charts, title=self.summary["meta"]["title"])


def read_decisions(source: Source) -> Decisions:
    """The first read: every page's decision, and each near-duplicate joined to the page it names."""
    d = Decisions()
    host_ids: dict[str, int] = {}
    by_url: dict[str, list[int]] = {}
    named: list[tuple[int, str]] = []

    def add(url: str, size: int, status: str | None, fingerprint: int | None, distance: int | None,
            similarity: float | None = None) -> int:  # fmt: skip
        host = host_of(url) or ""
        d.hosts.append(host_ids.setdefault(host, len(host_ids)))
        d.urls.append(url)
        d.sizes.append(size)
        d.statuses.append(status)
        d.fingerprints.append(fingerprint)
        d.targets.append(-1)
        d.distances.append(distance)
        d.similarities.append(similarity)
        return len(d.urls) - 1

    for entry in source.entries(content=False):
        url = entry.url or ""
        d.html = d.html or entry.has_html
        d.text = d.text or entry.has_text
        d.malformed += entry.status == MALFORMED
        page = add(url, entry.size, entry.status, entry.fingerprint, entry.distance, entry.similarity)
        if entry.url is not None:
            by_url.setdefault(url, []).append(page)
        if entry.duplicate_of is not None:
            named.append((page, entry.duplicate_of))
    # The page a near-duplicate names: its latest occurrence before it, else its first after it (a feed written
    # out of order), else a page kept before this input (absent).  A page that names its own URL with no
    # occurrence before it was unchanged since an earlier crawl.
    for page, url in named:
        if url == d.urls[page] and by_url[url][0] == page:
            d.unchanged += 1
            continue
        ids = by_url.get(url)
        if ids is None:
            ids = by_url[url] = [add(url, 0, ABSENT, None, None)]
        before = [i for i in ids if i < page]
        d.targets[page] = before[-1] if before else next(i for i in ids if i != page)
    d.host_names = list(host_ids)
    return d


def _clusters(d: Decisions) -> list[tuple[int, list[int]]]:
    """``(kept page, members in page order)`` per cluster, largest first."""
    parent = list(range(len(d)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for page, target in enumerate(d.targets):
        if target >= 0:
            a, b = find(page), find(target)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for page, target in enumerate(d.targets):
        if target >= 0:
            groups.setdefault(find(page), []).append(page)
    clusters = []
    for members in groups.values():
        roots = [p for p in {find(members[0]), *members, *(d.targets[m] for m in members)} if d.targets[p] < 0]
        root = min(roots) if roots else min(members)
        inside = sorted({*members, *(d.targets[m] for m in members)} - {root})
        clusters.append((root, inside))
    clusters.sort(key=lambda c: (-len(c[1]), c[0]))
    return clusters


def _near_misses(d: Decisions, config: FilterConfig) -> list[tuple[int, int, int]]:
    """``(kept page, nearest earlier page, distance)`` for kept pages within k + margin of an earlier page,
    nearest first."""
    reach = min(16, config.max_distance + NEAR_MISS_MARGIN)
    sketch_bytes = config.fingerprint.word_sketch_bytes
    blank = bytes(sketch_bytes)
    found: list[tuple[int, int, int]] = []
    with NearDuplicateIndex(reach, design=config.tables, metadata={"sketch_bytes": sketch_bytes}) as index:
        for page, fp in enumerate(d.fingerprints):
            if fp is None:
                continue
            if d.targets[page] < 0 and d.statuses[page] is None:
                # The nearest: widening steps, as a template's pages can put thousands within the reach.
                matches = []
                for k in sorted({min(reach, step) for step in (2, 4, 7, 10, 13, 16)}):
                    matches = index.query(fp, k)
                    if matches:
                        break
                if matches:
                    best = min(matches, key=lambda m: (m.distance, int(m.key)))
                    found.append((page, int(best.key), best.distance))
            index.add(fp, str(page), blank)
    found.sort(key=lambda m: (m[2], m[0]))
    return found


def _spill(source: Source, wanted: set[int], store: IO[bytes]) -> dict[int, tuple[int, int, str | None, bool]]:
    """The second read: the content of the ``wanted`` pages, compressed into ``store``; ``page -> (offset,
    length, encoding, is_html)``."""
    where: dict[int, tuple[int, int, str | None, bool]] = {}
    for page, entry in enumerate(source.entries(content=True)):
        if page not in wanted:
            continue
        content = entry.html if entry.html is not None else entry.text
        if content is None:
            continue
        raw = content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass")
        blob = zlib.compress(raw, 1)
        where[page] = (store.tell(), len(blob), entry.encoding if isinstance(content, bytes) else None,
                       entry.html is not None)  # fmt: skip
        store.write(blob)
    return where


def _jobs(
    pairs: list[tuple[int, int, int]], where: dict[int, tuple[int, int, str | None, bool]], store: IO[bytes], cap: int
) -> Iterator[detail.Job]:
    for start in range(0, len(pairs), PAIRS_PER_CHUNK):
        chunk = pairs[start : start + PAIRS_PER_CHUNK]
        pages: dict[int, tuple[str | bytes | None, str | None]] = {}
        for page in sorted({p for _, a, b in chunk for p in (a, b)}):
            if page not in where:
                continue
            offset, length, encoding, is_html = where[page]
            store.seek(offset)
            raw = zlib.decompress(store.read(length))
            if is_html:
                pages[page] = (raw if encoding is not None else raw.decode("utf-8", "surrogatepass"), encoding)
            else:
                pages[page] = (None, raw.decode("utf-8", "surrogatepass"))
        yield detail.Job(tuple(chunk), pages, cap)


def _worked(jobs: Iterator[detail.Job], options: Options) -> Iterator[dict[str, Any]]:
    """Each job's result, in order: in this process, or in ``options.workers`` processes, a few jobs in flight."""
    if options.workers <= 1:
        detail.init(options.config.fingerprint)
        yield from map(detail.work, jobs)
        return
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(options.workers, mp_context=ctx, initializer=detail.init,
                             initargs=(options.config.fingerprint,)) as pool:  # fmt: skip
        pending: deque[Future[dict[str, Any]]] = deque()
        for job in jobs:
            pending.append(pool.submit(detail.work, job))
            if len(pending) >= options.workers * JOBS_IN_FLIGHT:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _histogram_charts(cluster_rows: list[list[Any]], similarities: list[float], config: FilterConfig) -> dict[str, str]:
    distances = Counter(m[2] for _, members in cluster_rows for m in members if m[2] is not None)
    top = max([config.max_distance, *distances])
    charts = {
        "distance": svg.bar_chart(
            [str(i) for i in range(top + 1)],
            [distances.get(i, 0) for i in range(top + 1)],
            title="Near-duplicates by Hamming distance to the page they duplicate",
            x_label="distance (bits)",
            y_label="pages",
            highlight=range(min(top, config.max_distance) + 1),
        )
    }
    if similarities:
        bins = [min(int(s * 20), 19) for s in similarities]
        counts = Counter(bins)
        low = round(config.min_similarity * 20)
        charts["similarity"] = svg.bar_chart(
            [f"{i / 20:.2f}" for i in range(20)],
            [counts.get(i, 0) for i in range(20)],
            title="Pairs shown by sketch similarity (near-duplicates and near misses)",
            x_label="similarity (bins of 0.05)",
            y_label="pairs",
            highlight=range(low, 20),
        )
    return charts


def build(source: Source, options: Options) -> Report:
    """The report of ``source``: two reads of it, and the pairs worked out."""
    say = options.progress or (lambda _line: None)
    config = options.config
    started = time.perf_counter()
    d = read_decisions(source)
    say(f"read the decisions of {len(d)} pages in {time.perf_counter() - started:.1f} s")
    clusters = _clusters(d)
    misses = _near_misses(d, config)
    # Pair ids: the clusters' pairs (largest cluster first), then the near misses (nearest first).
    pairs: list[tuple[int, int, int]] = []
    cluster_rows: list[list[Any]] = []
    for root, members in clusters:
        rows = []
        for m in members:
            target = d.targets[m]
            if target < 0:  # the cluster's kept page when it is not the root (a crawl's feed out of order)
                target = root
            pair_id = -1
            if len(pairs) < options.max_pairs:
                pair_id = len(pairs)
                pairs.append((pair_id, m, target))
            rows.append([m, target, d.distances[m], None, pair_id])
        cluster_rows.append([root, rows])
    miss_rows: list[list[Any]] = []
    for page, nearest, distance in misses:
        pair_id = -1
        if len(pairs) < options.max_pairs:
            pair_id = len(pairs)
            pairs.append((pair_id, page, nearest))
        miss_rows.append([page, nearest, distance, None, pair_id])
    say(f"{len(clusters)} clusters, {len(misses)} near misses; {len(pairs)} pairs to show")

    chunks: list[html.Encoded] = []
    similarity: dict[int, float] = {}
    read = _read_values(d, cluster_rows, miss_rows)
    with tempfile.TemporaryFile() as store:
        where = _spill(source, {p for _, a, b in pairs for p in (a, b)}, store)
        with_texts = sum(1 for _, a, b in pairs if a in where and b in where)
        for result in _worked(_jobs(pairs, where, store, options.text_cap), options):
            _fill_in(result, read)
            chunks.append(html.encode(result))  # only the compressed text is kept
            for pair_id, pair in result["pairs"].items():
                if pair["similarity"] is not None:
                    similarity[int(pair_id)] = pair["similarity"]
            if len(chunks) % 20 == 0:
                say(f"worked out {len(chunks) * PAIRS_PER_CHUNK} of {len(pairs)} pairs")
    for row in [m for _, members in cluster_rows for m in members] + miss_rows:
        row[3] = similarity.get(row[4])

    summary = _summary(d, cluster_rows, miss_rows, (len(pairs), with_texts), options, source)
    charts = _histogram_charts(cluster_rows, list(similarity.values()), config)
    return Report(summary, chunks, charts, len(clusters), sum(len(m) for _, m in clusters), len(misses), with_texts)


def _read_values(
    d: Decisions, cluster_rows: list[list[Any]], miss_rows: list[list[Any]]
) -> dict[int, tuple[int | None, float | None]]:
    """``pair id -> (distance, similarity)`` as the input gives them: a pair whose pages the report cannot
    fingerprint again (a feed without HTML) still shows the numbers its feed item carries."""
    read: dict[int, tuple[int | None, float | None]] = {}
    for _, members in cluster_rows:
        for page, target, distance, _, pair_id in members:
            if pair_id >= 0:
                similarity = d.similarities[page] if d.targets[page] == target else None
                read[pair_id] = (distance, similarity)
    for _, _, distance, _, pair_id in miss_rows:
        if pair_id >= 0:
            read[pair_id] = (distance, None)
    return read


def _fill_in(result: dict[str, Any], read: dict[int, tuple[int | None, float | None]]) -> None:
    """A worked-out chunk's pairs get the input's distance and similarity where the texts gave none."""
    for pair_id, pair in result["pairs"].items():
        distance, similarity = read.get(int(pair_id), (None, None))
        if pair["distance"] is None:
            pair["distance"] = distance
        if pair["similarity"] is None:
            pair["similarity"] = similarity


def _summary(
    d: Decisions,
    cluster_rows: list[list[Any]],
    miss_rows: list[list[Any]],
    shown: tuple[int, int],
    options: Options,
    source: Source,
) -> dict[str, Any]:
    """The report's numbers and notes (``shown``: the pairs given a detail, and those of them with texts)."""
    config = options.config
    detailed, with_texts = shown
    present = [i for i in range(len(d)) if d.statuses[i] != ABSENT]
    near = [i for i in present if d.targets[i] >= 0]
    skipped = [i for i in present if d.statuses[i] is not None]
    per_host: dict[int, list[int]] = {}
    for i in present:
        row = per_host.setdefault(d.hosts[i], [d.hosts[i], 0, 0, 0, 0, 0])
        row[1] += 1
        if d.targets[i] >= 0:
            row[3] += 1
            row[5] += d.sizes[i]
        elif d.statuses[i] is not None:
            row[4] += 1
        else:
            row[2] += 1
    notes = [_content_note(d)] if not d.html else []
    absent = len(d) - len(present)
    if absent:
        notes.append(f"{absent} kept pages named by near-duplicates are not in this input (kept by an earlier crawl).")
    if d.unchanged:
        notes.append(f"{d.unchanged} pages were unchanged since an earlier crawl (near-duplicates of themselves).")
    total_pairs = sum(len(m) for _, m in cluster_rows) + len(miss_rows)
    if with_texts and detailed < total_pairs:
        notes.append(f"Texts and explanations are shown for the first {detailed} of {total_pairs} pairs (--max-pairs).")
    title = options.title or f"simhash-filter report: {source.path}"
    meta = {
        "title": title,
        "source": source.path if source.pages is None else f"{source.path} (input {source.pages})",
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "version": __version__,
        "model": config.fingerprint.model_id(),
        "k": config.max_distance,
        "min_similarity": config.min_similarity,
        "pages": len(present),
        "kept": len(present) - len(near) - len(skipped),
        "near_duplicates": len(near),
        "skipped": sum(1 for i in skipped if d.statuses[i] != MALFORMED),
        "malformed": sum(1 for i in skipped if d.statuses[i] == MALFORMED),
        "bytes_total": sum(d.sizes[i] for i in present),
        "bytes_saved": sum(d.sizes[i] for i in near),
        "bytes_kind": "HTML" if d.html else "text",
        "pairs": total_pairs,
        "pairs_with_detail": with_texts,
        "pairs_per_chunk": PAIRS_PER_CHUNK,
        "text_cap": options.text_cap,
        "explained": d.html,
        "content": "HTML" if d.html else "text" if d.text else "none",
        "notes": notes,
    }
    return {
        "meta": meta,
        "hosts": d.host_names,
        "pages": [[d.urls[i], d.hosts[i], d.sizes[i], d.statuses[i]] for i in range(len(d))],
        "clusters": cluster_rows,
        "near_misses": miss_rows,
        "host_stats": sorted(per_host.values(), key=lambda r: (-r[3], -r[1], r[0])),
        "skipped": [[i, d.statuses[i]] for i in skipped],
    }


def _content_note(d: Decisions) -> str:
    """The note on an input without HTML: the pairs show its text, or (neither text nor HTML) only its numbers."""
    how = "(a crawl with -a store=both, or a dedup output with --pages, has them)"
    if d.text:
        return (
            f"The input holds no HTML: the pairs show the stored text, without the features that set them apart "
            f"{how}."
        )
    return (
        "The input holds neither HTML nor text: the pairs show the distance and similarity it gives, without texts "
        f"or the features that set them apart {how}."
    )
