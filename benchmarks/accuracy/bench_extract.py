"""Main-text extraction on real pages with known main text: ours against Mozilla Readability, Resiliparse and
trafilatura.

Page sets (public, read from disk at run time, never copied into the repository):

- ``readability``: Mozilla Readability's test pages, ``DIR/*/source.html`` with ``expected.html``
  (Readability's own extraction: the reference main content; on these pages Readability is the reference
  itself, so it is reported mainly on ``aeb``);
- ``aeb``: the Scrapinghub article-extraction benchmark, ``DIR/html/*.html.gz`` with ``DIR/ground-truth.json``
  (``articleBody``), 181 news pages.

Metric: precision, recall and F1 on bags of word tokens.  Text is NFKC-normalised and lower-cased; a token is a
CJK ideograph or kana (one character each) or a run of other letters and digits (``[^\\W_]+``).  A page's
true positives are ``sum over tokens of min(count predicted, count in the reference)``; precision is that over
the predicted tokens, recall over the reference's.  An empty prediction scores 0 (both empty: 1).  Reported
figures are means over pages (macro, as the AEB's own report).  Reference HTML (``expected.html``, and
Readability's ``content``) is read as text with block elements and ``<br>`` as word breaks.

Tools:

- ``ours main``: ``Fingerprinter().page_text(html)`` (parse + extract, as the fingerprint does), its
  ``PageText.main_text()`` (the heaviest text: weight 1, the main content);
- ``ours weighted``: every text of ``PageText.texts``, each token counted with its segment's weight: true
  positives ``sum min(weight predicted, count in the reference)``, precision over the predicted weight;
- ``readability``: ``@mozilla/readability`` on jsdom (``npm install`` into ``--node-dir``, outside the
  repository), ``content`` read as the reference is; if node or npm fails, the PyPI port ``readability-lxml``
  (``Document(html).summary()``), reported under that name;
- ``resiliparse``: ``extract_plain_text(html, main_content=True)``;
- ``trafilatura``: ``trafilatura.extract(html, include_comments=False)`` (the main text, no comments).

Peers run only with ``--peers`` (Python ones are pip-installed into the running interpreter's environment
when missing).  Also counted: pages with at least 150 words (or 300 CJK characters) of visible text that get
no fingerprint (status ``too_few_features``, or any other non-OK status), each listed.

Output: a markdown table (set x tool: P, R, F1, pages), our worst pages by F1 of the main text with a
one-line diagnosis each, and with ``--json FILE`` the per-page numbers; ``--compare OLD.json`` prints the
pages whose F1 moved between an earlier run and this one (e.g. before and after a model change).

    python -m benchmarks.accuracy.bench_extract [--readability-dir DIR] [--aeb-dir DIR] [--sets readability,aeb]
                                       [--peers [readability,resiliparse,trafilatura]] [--node-dir DIR]
                                       [--worst 15] [--json FILE] [--compare OLD.json] [--min-delta 0.05]
"""

from __future__ import annotations

import gzip
import importlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# benchmarks/ (benchlib) also when this file is loaded by its path, as the tests do
import lxml.html
from lxml import etree

from benchmarks.benchlib.report import make_parser, write_json
from benchmarks.benchlib.text import CJK_CHAR, EXTRACT_INVISIBLE, block_text, tokens, visible_text
from simhash_filter.model import extract as extract_module
from simhash_filter.model.fingerprint import Fingerprinter

READABILITY_DIR = Path("/work/sources/readability/test/test-pages")
AEB_DIR = Path("/work/sources/aeb")
NODE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "simhash-filter-bench" / "node"
NODE_PACKAGES = ("@mozilla/readability@0.6.0", "jsdom@29.1.1")
NODE_SCRIPT = Path(__file__).resolve().parent / "benchlib" / "readability.cjs"
SETS = ("readability", "aeb")
PEERS = ("readability", "resiliparse", "trafilatura")
PIP_NAMES = {"resiliparse": "resiliparse", "trafilatura": "trafilatura", "readability-lxml": "readability-lxml"}
#: A page with at least this many words (or CJK_MIN_CHARS CJK characters) of visible text should be fingerprinted.
MIN_WORDS = 150
CJK_MIN_CHARS = 300
#: A weight this low is boilerplate's (the model gives boilerplate about 0.01, capped lower on boilerplate-heavy pages).
BOILERPLATE_LIKE = 0.02


# ---------------------------------------------------------------- metric


def bag(text: str) -> Counter[str]:
    return Counter(tokens(text))


def weighted_bag(texts: Iterable[tuple[float, str]]) -> dict[str, float]:
    """Each token with the summed weight of its occurrences."""
    out: dict[str, float] = {}
    for w, text in texts:
        for t in tokens(text):
            out[t] = out.get(t, 0.0) + w
    return out


@dataclass(frozen=True)
class Score:
    p: float
    r: float
    f1: float

    def as_dict(self) -> dict[str, float]:
        return {"p": round(self.p, 4), "r": round(self.r, 4), "f1": round(self.f1, 4)}


def score(predicted: dict[str, float] | Counter[str], reference: Counter[str]) -> Score:
    """Precision, recall, F1 of a (weighted) bag of tokens against the reference's bag (see the module's doc)."""
    pred_total = float(sum(predicted.values()))
    true_total = float(sum(reference.values()))
    if pred_total <= 0 or true_total <= 0:
        both_empty = pred_total <= 0 and true_total <= 0
        return Score(float(both_empty), float(both_empty), float(both_empty))
    tp = sum(min(float(n), float(reference.get(t, 0))) for t, n in predicted.items())
    p, r = tp / pred_total, tp / true_total
    return Score(p, r, 2 * p * r / (p + r) if p + r else 0.0)


def visible_size(html: bytes) -> tuple[int, int]:
    """(words, CJK characters) of the page's visible text."""
    text = visible_text(html)
    cjk = len(CJK_CHAR.findall(text))
    return len(tokens(text)) - cjk, cjk


# ---------------------------------------------------------------- pages


@dataclass
class Page:
    set: str
    id: str
    html: bytes
    reference: str
    url: str = ""
    scores: dict[str, Score] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.set}/{self.id}"

    @property
    def text(self) -> str:
        """The page as every tool gets it: both sets store their pages as UTF-8, whatever charset they declare."""
        return self.html.decode("utf-8", "replace")


class MissingSet(Exception):
    pass


def readability_pages(directory: Path) -> list[Page]:
    """Readability's test pages: ``*/source.html`` with ``expected.html`` (read as text)."""
    dirs = sorted(d for d in directory.glob("*") if (d / "source.html").is_file() and (d / "expected.html").is_file())
    if not dirs:
        raise MissingSet(
            f"--readability-dir {directory}: no */source.html with expected.html (Readability's test pages)"
        )
    pages = []
    for d in dirs:
        meta = d / "expected-metadata.json"
        url = "http://fakehost/test/page.html"  # the URL Readability's own tests give jsdom
        if meta.is_file():
            url = json.loads(meta.read_text(encoding="utf-8")).get("url") or url
        pages.append(Page("readability", d.name, (d / "source.html").read_bytes(),
                          block_text((d / "expected.html").read_bytes()), url))  # fmt: skip
    return pages


def aeb_pages(directory: Path) -> list[Page]:
    """The article-extraction benchmark: ``html/*.html.gz`` with ``ground-truth.json`` (``articleBody``)."""
    truth_file = directory / "ground-truth.json"
    if not truth_file.is_file() or not (directory / "html").is_dir():
        raise MissingSet(
            f"--aeb-dir {directory}: no ground-truth.json with html/*.html.gz (article-extraction benchmark)"
        )
    truth = json.loads(truth_file.read_text(encoding="utf-8"))
    pages = []
    for name, item in sorted(truth.items()):
        path = directory / "html" / f"{name}.html.gz"
        if path.is_file():
            with gzip.open(path) as f:
                pages.append(Page("aeb", name, f.read(), item.get("articleBody") or "", item.get("url") or ""))
    if not pages:
        raise MissingSet(f"--aeb-dir {directory}: none of ground-truth.json's pages in html/")
    return pages


# ---------------------------------------------------------------- ours


def run_ours(pages: list[Page]) -> float:
    """Score our main text and weighted text on every page; record its fingerprint status.  Seconds taken."""
    fp = Fingerprinter()
    start = time.perf_counter()
    for page in pages:
        page_text, _, _ = fp.page_text(page.text)
        texts = page_text.texts if page_text is not None else ()
        main = page_text.main_text() if page_text is not None else ""
        ref = bag(page.reference)
        page.scores["ours main"] = score(bag(main), ref)
        page.scores["ours weighted"] = score(weighted_bag(texts), ref)
        status = fp.fingerprint(page.text).status
        words, cjk = visible_size(page.html)
        page.info.update(
            status=str(status),
            visible_words=words,
            visible_cjk=cjk,
            main_words=len(tokens(main)),
            main_weight=texts[0][0] if texts else 0.0,
            diagnosis=diagnose(main, texts, page.reference, page.text),
        )
    return time.perf_counter() - start


def big_enough(page: Page) -> bool:
    return page.info["visible_words"] >= MIN_WORDS or page.info["visible_cjk"] >= CJK_MIN_CHARS


COMMENT = re.compile(r"\b(comments?|reply|replies|repl(y|ied) to|commented|posted by|log in to comment)\b", re.I)
COOKIE = re.compile(r"\b(cookies?|consent|privacy (policy|settings)|gdpr|accept all)\b", re.I)
SUBSCRIBE = re.compile(r"\b(subscribe|subscription|sign (in|up)|log ?in|newsletter|paywall|register)\b", re.I)


def diagnose(main: str, texts: tuple[tuple[float, str], ...], reference: str, html: str = "") -> str:
    """One line on what our main text picked, against the reference."""
    ref = bag(reference)
    main_bag = bag(main)
    if not main_bag:
        return "nothing: no main text" + ("" if texts else " (no text at all)") + boilerplate_cover(html)
    s = score(main_bag, ref)
    # where the reference's tokens went: the weight holding most of them
    held = [(score(bag(t), ref).r, w) for w, t in texts]
    best_r, best_w = max(held) if held else (0.0, 0.0)
    lines = [ln for ln in main.split("\n") if ln.strip()]
    foreign = [ln for ln in lines if len(tokens(ln)) >= 4 and score(bag(ln), ref).p < 0.5]
    sample = " ".join((foreign or lines)[0].split())[:70]
    n = sum(main_bag.values())
    short_lines = statistics.median(len(tokens(ln)) for ln in lines) <= 6 if lines else False
    if s.r >= 0.8:
        extra = sum(main_bag.values()) - round(s.p * n)
        kind = _kind(foreign, short_lines) if foreign else "surroundings"
        return f"article + {kind}: {extra} of {n} words outside the reference, e.g. '{sample}'"
    if s.p >= 0.8:
        where = ""
        if best_w != texts[0][0]:
            where = f"; most of the rest at weight {best_w:g} ({best_r:.0%} of the reference)"
            if best_w <= BOILERPLATE_LIKE:
                where += article_under(html, ref)
        return f"part of the article: {s.r:.0%} of it in {n} words{where}"
    kind = _kind(lines, short_lines)
    where = ""
    if best_w != texts[0][0] and best_r > 0.3:
        where = f"; the article at weight {best_w:g} ({best_r:.0%} of it)"
        if best_w <= BOILERPLATE_LIKE:
            where += article_under(html, ref)
    return f"another block ({kind}): {n} words, {s.p:.0%} in the reference, e.g. '{sample}'{where}"


def _boilerplate_tops(html: str) -> tuple[int, list[tuple[Counter[str], str]]]:
    """Tokens of the visible text, and each outermost boilerplate-looking element (by the model's own test, when it
    has one by that name) with its tokens and ``tag.class``."""
    looks = getattr(extract_module, "_looks_like_boilerplate", None)
    if looks is None or not html.strip():
        return 0, []
    try:
        doc = lxml.html.document_fromstring(html.encode("utf-8"), parser=lxml.html.HTMLParser(encoding="utf-8"))
    except (etree.ParserError, ValueError):
        return 0, []
    for el in list(doc.iter(*EXTRACT_INVISIBLE, etree.Comment, etree.ProcessingInstruction)):
        if el.getparent() is not None:
            el.drop_tree()
    body = doc.find("body")
    body = body if body is not None else doc
    tops: list[tuple[Counter[str], str]] = []
    stack = [body]
    while stack:
        el = stack.pop()
        if not isinstance(el.tag, str):
            continue
        if el is not body and looks(el.tag, el):
            words = bag(el.text_content())
            if words:
                tops.append((words, f"{el.tag}.{'.'.join((el.get('class') or el.get('id') or '').split())}"[:48]))
            continue
        stack.extend(el)
    return len(tokens(body.text_content())), tops


def boilerplate_cover(html: str) -> str:
    """``; N % of the visible text under boilerplate-looking elements, the largest tag.class (M %)``."""
    total, tops = _boilerplate_tops(html)
    if not total or not tops:
        return ""
    sizes = [(sum(words.values()), name) for words, name in tops]
    n, name = max(sizes)
    return (f"; {100 * sum(c for c, _ in sizes) / total:.0f} % of the visible text under boilerplate-looking "
            f"elements, the largest {name} ({100 * n / total:.0f} %)")  # fmt: skip


def article_under(html: str, ref: Counter[str]) -> str:
    """``, under boilerplate-looking tag.class (N % of the article)``: the one holding most of the reference."""
    _, tops = _boilerplate_tops(html)
    held = [(score(words, ref).r, name) for words, name in tops]
    if not held or max(held)[0] < 0.3:
        return ""
    r, name = max(held)
    return f", under boilerplate-looking {name} ({r:.0%} of it)"


def _kind(lines: list[str], short_lines: bool) -> str:
    text = "\n".join(lines)
    for name, pattern in (("comment thread", COMMENT), ("cookie/consent box", COOKIE), ("sign-up box", SUBSCRIBE)):
        if len(pattern.findall(text)) >= 2:
            return name
    return "teaser/link list" if short_lines else "other text"


# ---------------------------------------------------------------- peers


def ensure_python_peer(module: str, pip_name: str) -> Any:
    """Import ``module``, pip-installing ``pip_name`` into this interpreter's environment when missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        pass
    print(f"installing {pip_name} into {sys.prefix} ...", file=sys.stderr)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", pip_name], capture_output=True, text=True)
    if done.returncode != 0:
        raise PeerError(f"pip install {pip_name} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    importlib.invalidate_caches()
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise PeerError(f"{module} not importable after pip install {pip_name}: {e}") from None


class PeerError(Exception):
    pass


def run_python_peer(name: str, extract: Callable[[str], str], pages: list[Page]) -> tuple[float, int]:
    """Score ``extract(html) -> text`` on every page: (seconds, pages that raised)."""
    errors = 0
    start = time.perf_counter()
    for page in pages:
        try:
            text = extract(page.text) or ""
        except Exception:  # a peer's failure on one page scores that page as empty
            text, errors = "", errors + 1
        page.scores[name] = score(bag(text), bag(page.reference))
    return time.perf_counter() - start, errors


def node_readability(node_dir: Path) -> Path:
    """The node_modules holding @mozilla/readability and jsdom, installed into ``node_dir`` when missing."""
    modules = node_dir / "node_modules"
    if not ((modules / "@mozilla" / "readability").is_dir() and (modules / "jsdom").is_dir()):
        if not shutil.which("node") or not shutil.which("npm"):
            raise PeerError("node or npm not found")
        node_dir.mkdir(parents=True, exist_ok=True)
        print(f"npm install {' '.join(NODE_PACKAGES)} into {node_dir} ...", file=sys.stderr)
        done = subprocess.run(["npm", "install", "--prefix", str(node_dir), "--no-audit", "--no-fund", "--silent",
                               *NODE_PACKAGES], capture_output=True, text=True)  # fmt: skip
        if done.returncode != 0:
            raise PeerError(f"npm install failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return modules


def run_node_readability(pages: list[Page], node_dir: Path) -> tuple[float, int, str]:
    """Mozilla Readability on jsdom over every page, in one node process: (seconds, errors, versions)."""
    modules = node_readability(node_dir)
    versions = ", ".join(
        f"{n} {json.loads((modules / n / 'package.json').read_text())['version']}"
        for n in ("@mozilla/readability", "jsdom")
    )
    feed = "".join(json.dumps({"id": p.key, "html": p.text, "url": p.url}) + "\n" for p in pages)
    start = time.perf_counter()
    done = subprocess.run(["node", str(NODE_SCRIPT)], input=feed, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "NODE_PATH": str(modules)})  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise PeerError(f"node {NODE_SCRIPT.name} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    results = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    errors = 0
    for page in pages:
        r = results.get(page.key) or {"content": "", "error": "no output"}
        errors += bool(r.get("error"))
        page.scores["readability"] = score(bag(block_text(r["content"])), bag(page.reference))
    return seconds, errors, versions


def run_peers(names: list[str], pages: list[Page], node_dir: Path) -> dict[str, str]:
    """Run each named peer over the pages; a note per tool (version, seconds, errors, or why it did not run)."""
    notes: dict[str, str] = {}
    for name in names:
        try:
            if name == "readability":
                try:
                    seconds, errors, versions = run_node_readability(pages, node_dir)
                    notes["readability"] = f"{versions} (node {_node_version()}), {seconds:.0f} s, {errors} errors"
                except (PeerError, subprocess.TimeoutExpired, OSError) as e:
                    print(f"readability (node): {str(e).splitlines()[0]}; using readability-lxml", file=sys.stderr)
                    mod = ensure_python_peer("readability", "readability-lxml")
                    seconds, errors = run_python_peer(
                        "readability-lxml", lambda h, mod=mod: block_text(mod.Document(h).summary()), pages
                    )
                    notes["readability-lxml"] = (
                        f"readability-lxml {_version('readability-lxml')}, {seconds:.0f} s, {errors} errors"
                    )
            elif name == "resiliparse":
                ensure_python_peer("resiliparse", "resiliparse")
                from resiliparse.extract.html2text import extract_plain_text

                seconds, errors = run_python_peer(
                    "resiliparse", lambda h: extract_plain_text(h, main_content=True), pages
                )
                notes[name] = f"resiliparse {_version('resiliparse')}, {seconds:.0f} s, {errors} errors"
            elif name == "trafilatura":
                mod = ensure_python_peer("trafilatura", "trafilatura")
                seconds, errors = run_python_peer(
                    "trafilatura", lambda h, mod=mod: mod.extract(h, include_comments=False), pages
                )
                notes[name] = f"trafilatura {_version('trafilatura')}, {seconds:.0f} s, {errors} errors"
        except PeerError as e:
            print(f"{name}: {e}", file=sys.stderr)
            notes[name] = f"not run: {e}"
    return notes


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def _node_version() -> str:
    try:
        return subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


# ---------------------------------------------------------------- report


def tools_of(pages: list[Page]) -> list[str]:
    seen: dict[str, None] = {}
    for p in pages:
        seen.update(dict.fromkeys(p.scores))
    return list(seen)


def summary(pages: list[Page]) -> dict[str, dict[str, dict[str, float]]]:
    """Per set (and ``all``) and tool: mean P, R, F1 and pages."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    sets = [s for s in SETS if any(p.set == s for p in pages)]
    for name in [*sets, "all"] if len(sets) > 1 else sets:
        group = [p for p in pages if name in ("all", p.set)]
        out[name] = {}
        for tool in tools_of(group):
            scored = [p.scores[tool] for p in group if tool in p.scores]
            out[name][tool] = {
                "p": round(statistics.fmean(s.p for s in scored), 4),
                "r": round(statistics.fmean(s.r for s in scored), 4),
                "f1": round(statistics.fmean(s.f1 for s in scored), 4),
                "pages": len(scored),
            }
    return out


def markdown_table(summ: dict[str, dict[str, dict[str, float]]]) -> str:
    rows = ["| set | tool | P | R | F1 | pages |", "| --- | --- | --- | --- | --- | --- |"]
    for set_name, tools in summ.items():
        for tool, s in tools.items():
            note = " (the reference)" if set_name == "readability" and tool == "readability" else ""
            name = f"**{tool}**" if tool.startswith("ours") else tool
            rows.append(f"| {set_name} | {name}{note} | {100 * s['p']:.1f} | {100 * s['r']:.1f} | "
                        f"{100 * s['f1']:.1f} | {s['pages']} |")  # fmt: skip
    return "\n".join(rows)


def unfingerprinted(pages: list[Page]) -> list[Page]:
    return [p for p in pages if big_enough(p) and p.info["status"] != "ok"]


def report(pages: list[Page], worst: int) -> str:
    out = [markdown_table(summary(pages)), ""]
    for set_name in [*SETS, "all"]:
        group = [p for p in pages if set_name in ("all", p.set)]
        if not group or (set_name == "all" and len({p.set for p in pages}) < 2):
            continue
        big = [p for p in group if big_enough(p)]
        missing = unfingerprinted(group)
        share = f"{100 * len(missing) / len(big):.1f} %" if big else "-"
        out.append(f"No fingerprint ({set_name}): {len(missing)} of {len(big)} pages with >= {MIN_WORDS} words "
                   f"(or >= {CJK_MIN_CHARS} CJK characters) of visible text ({share})")  # fmt: skip
    for p in unfingerprinted(pages):
        out.append(f"- {p.key}: {p.info['status']}, {p.info['visible_words']} visible words, "
                   f"{p.info['main_words']} in the main text; {p.info['diagnosis']}")  # fmt: skip
    out += ["", f"Our worst {worst} pages by F1 of the main text:", "",
            "| page | P | R | F1 | what our main text picked |", "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for p in sorted(pages, key=lambda p: (p.scores["ours main"].f1, p.key))[:worst]:
        s = p.scores["ours main"]
        diag = p.info["diagnosis"].replace("|", "\\|")
        out.append(f"| {p.key[:40]} | {100 * s.p:.0f} | {100 * s.r:.0f} | {100 * s.f1:.0f} | {diag} |")
    return "\n".join(out)


def to_json(pages: list[Page], notes: dict[str, str], args: list[str]) -> dict[str, Any]:
    return {
        "command": "python -m benchmarks.accuracy.bench_extract " + " ".join(args),
        "metric": "bag of word tokens (NFKC, lower-case, CJK characters alone), mean over pages",
        "peers": notes,
        "summary": summary(pages),
        "pages": {
            p.key: {"set": p.set, **p.info, "scores": {t: s.as_dict() for t, s in p.scores.items()}} for p in pages
        },
    }


def compare(old: dict[str, Any], new: dict[str, Any], min_delta: float) -> str:
    """Pages whose F1 (ours main, ours weighted) or fingerprint status moved between two JSON outputs."""
    out: list[str] = []
    common = sorted(set(old["pages"]) & set(new["pages"]))
    out.append(f"Compared {len(common)} pages (old {len(old['pages'])}, new {len(new['pages'])})")
    for tool in ("ours main", "ours weighted"):
        moved = []
        for key in common:
            a, b = old["pages"][key]["scores"].get(tool), new["pages"][key]["scores"].get(tool)
            if a and b and abs(b["f1"] - a["f1"]) >= min_delta:
                moved.append((b["f1"] - a["f1"], key, a, b))
        if not moved:
            out.append(f"\n{tool}: no page moved by {min_delta:g} or more in F1")
            continue
        mean_a = statistics.fmean(old["pages"][k]["scores"][tool]["f1"] for k in common)
        mean_b = statistics.fmean(new["pages"][k]["scores"][tool]["f1"] for k in common)
        better = sorted((m for m in moved if m[0] > 0), reverse=True)
        worse = sorted(m for m in moved if m[0] < 0)
        out.append(f"\n{tool}: mean F1 {100 * mean_a:.1f} -> {100 * mean_b:.1f}; "
                   f"{len(better)} pages better, {len(worse)} worse by {min_delta:g} or more")  # fmt: skip
        for label, group in (("better", better), ("worse", worse)):
            for d, key, a, b in group:
                diag = new["pages"][key].get("diagnosis", "") if tool == "ours main" else ""
                out.append(f"  {label:6} {100 * d:+6.1f}  {key[:40]:40}  F1 {100 * a['f1']:.0f} -> {100 * b['f1']:.0f}"
                           f"  (P {100 * b['p']:.0f}, R {100 * b['r']:.0f}){'  ' + diag if diag else ''}")  # fmt: skip
    flips = [
        (k, old["pages"][k].get("status"), new["pages"][k].get("status"))
        for k in common
        if old["pages"][k].get("status") != new["pages"][k].get("status")
    ]
    out.append(f"\nfingerprint status changed on {len(flips)} pages")
    out += [f"  {k}: {a} -> {b}" for k, a, b in flips]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--readability-dir", type=Path, default=READABILITY_DIR,
                        help=f"Readability's test pages (default {READABILITY_DIR})")  # fmt: skip
    parser.add_argument("--aeb-dir", type=Path, default=AEB_DIR,
                        help=f"article-extraction benchmark: ground-truth.json, html/ (default {AEB_DIR})")  # fmt: skip
    parser.add_argument("--sets", default=",".join(SETS), help="page sets to read (default: readability,aeb)")
    parser.add_argument("--peers", nargs="?", const=",".join(PEERS), default="",
                        help=f"also run these tools (default when given alone: {','.join(PEERS)})")  # fmt: skip
    parser.add_argument("--node-dir", type=Path, default=NODE_DIR,
                        help=f"where npm installs Readability and jsdom (default {NODE_DIR})")  # fmt: skip
    parser.add_argument("--worst", type=int, default=15, help="how many of our worst pages to list (default 15)")
    parser.add_argument("--json", type=Path, help="write the per-page numbers here")
    parser.add_argument("--compare", type=Path, metavar="OLD.json", help="print the pages that moved since OLD.json")
    parser.add_argument("--min-delta", type=float, default=0.05, help="F1 change that --compare lists (default 0.05)")
    args = parser.parse_args(argv)
    argv_used = sys.argv[1:] if argv is None else list(argv)

    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    peers = [s.strip() for s in args.peers.split(",") if s.strip()]
    for s in sets:
        if s not in SETS:
            parser.error(f"--sets: unknown set {s!r} (known: {', '.join(SETS)})")
    for s in peers:
        if s not in PEERS:
            parser.error(f"--peers: unknown tool {s!r} (known: {', '.join(PEERS)})")
    old = None
    if args.compare is not None:
        try:
            old = json.loads(args.compare.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            parser.error(f"--compare {args.compare}: {e}")
    pages: list[Page] = []
    try:
        if "readability" in sets:
            pages += readability_pages(args.readability_dir)
        if "aeb" in sets:
            pages += aeb_pages(args.aeb_dir)
    except MissingSet as e:
        if not any(a.startswith(("--readability-dir", "--aeb-dir")) for a in argv_used) and not any(
            d.exists() for d in (args.readability_dir, args.aeb_dir)
        ):  # make bench on a machine without the public sets
            print(f"bench_extract: skipped, no page sets at the default paths ({e})", file=sys.stderr)
            return 0
        parser.error(str(e))
    pages = [p for p in pages if tokens(p.reference)]  # a page without reference text cannot be scored

    seconds = run_ours(pages)
    print(f"ours: {len(pages)} pages in {seconds:.1f} s", file=sys.stderr)
    notes = run_peers(peers, pages, args.node_dir) if peers else {}
    print(report(pages, args.worst))
    if notes:
        print("\nPeers: " + "; ".join(f"{k}: {v}" for k, v in notes.items()))
    data = to_json(pages, notes, argv_used)
    if args.json:
        write_json(args.json, data, indent=1, ensure_ascii=False)
    if old is not None:
        print("\n" + compare(old, data, args.min_delta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
