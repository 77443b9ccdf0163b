"""URL rules learned from near-duplicates (docs/avoid.md): which URL variants of a host show the same page
(``param:<name>``, ``index``, ``slash``, ``case``, ``prefix:<segment>``) and which hosts mirror which.

Each pair of stored pages whose URLs differ by a rule counts once for it or against it (:meth:`RuleBook.observe`,
:meth:`RuleBook.validated`); a rule acts when :func:`is_active` says so of its two counts, whatever order they were
counted or merged in.  The counts (:meth:`RuleBook.counts`) are kept beside the index; nothing here does I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import parse_qsl, urlencode, urlsplit

__all__ = ["RuleBook", "Url", "Verdict", "is_active", "parse_url", "precision_bound"]

#: Last path segments that name a directory's default page.
INDEX_PAGES = frozenset({"index.html", "index.htm", "index.php", "index.shtml", "default.htm", "default.aspx"})
#: Path parameters (``;name=value``) in a segment.
_PATH_PARAM = re.compile(r";([^;/=]+)=([^;/]*)")
#: At most this many rewrites explain one near-duplicate pair (more: the URLs are not variants of each other).
MAX_REWRITES = 4
#: Kinds of rules (the part of a rule's name before ``:``).
PATH_RULES = ("index", "slash", "case")
#: z of a one-sided 95 % bound.
Z95 = 1.645


@dataclass(frozen=True, slots=True)
class Url:
    """A URL taken apart for the rules: host (with port, lower case), path (path parameters removed), and the
    query and path parameters as sorted ``(name, value)`` pairs."""

    scheme: str
    host: str
    path: str
    params: tuple[tuple[str, str], ...]

    def text(self) -> str:
        """The URL put together again (parameters sorted, as Scrapy's canonical URLs sort them)."""
        query = urlencode(self.params)
        return f"{self.scheme}://{self.host}{self.path}" + (f"?{query}" if query else "")


def parse_url(url: str) -> Url | None:
    """:class:`Url` of an http(s) URL; None for anything else."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    path = parts.path or "/"
    params = parse_qsl(parts.query, keep_blank_values=True)
    if ";" in path:
        params += [(";" + name, value) for name, value in _PATH_PARAM.findall(path)]
        path = _PATH_PARAM.sub("", path)
    return Url(parts.scheme, parts.netloc.lower(), path, tuple(sorted(params)))


def _apply(url: Url, rules: Iterable[str]) -> Url:
    """*url* rewritten by *rules* (in a fixed order: prefixes, index pages, slashes, case, parameters)."""
    rules = set(rules)
    path = url.path
    for rule in sorted(r for r in rules if r.startswith("prefix:")):
        head = "/" + rule[len("prefix:") :] + "/"
        if path.startswith(head):
            path = path[len(head) - 1 :]
    if "index" in rules:
        head, _, last = path.rpartition("/")
        if last.lower() in INDEX_PAGES:
            path = head + "/"
    if "slash" in rules and len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    if "case" in rules:
        path = path.lower()
    params = tuple(p for p in url.params if f"param:{p[0]}" not in rules)
    return Url(url.scheme, url.host, path, params)


def _path_rewrites(a: str, b: str) -> list[str] | None:
    """The fewest path rules that make paths *a* and *b* equal (None when none do)."""
    if a == b:
        return []
    candidates = list(PATH_RULES)
    for path in (a, b):
        segments = path.split("/")
        if len(segments) > 2 and segments[1]:
            candidates.append(f"prefix:{segments[1]}")
    best: list[str] | None = None
    for mask in range(1 << len(candidates)):
        chosen = [c for i, c in enumerate(candidates) if mask >> i & 1]
        if best is not None and len(chosen) >= len(best):
            continue
        ua, ub = (_apply(Url("", "", p, ()), chosen).path for p in (a, b))
        if ua == ub:
            best = chosen
    return best


def explain(duplicate: Url, kept: Url) -> list[str] | None:
    """The rewrites under which two URLs of one host are the same URL (None when rewrites cannot make them so)."""
    path_rules = _path_rewrites(duplicate.path, kept.path)
    if path_rules is None:
        return None
    a, b = dict(duplicate.params), dict(kept.params)
    if len(a) != len(duplicate.params) or len(b) != len(kept.params):
        return None  # a repeated parameter: leave such URLs alone
    params = sorted(f"param:{n}" for n in a.keys() | b.keys() if a.get(n) != b.get(n))
    rules = path_rules + params
    return rules if 0 < len(rules) <= MAX_REWRITES else None


def precision_bound(positives: int, negatives: int, z: float = Z95) -> float:
    """Lower Wilson score bound (one-sided 95 % with the default *z*) of the share of a rule's pairs that are the
    same page (``n`` positives and no negative give ``n / (n + z²)``)."""
    n = positives + negatives
    if n == 0:
        return 0.0
    share, z2 = positives / n, z * z
    centre = share + z2 / (2 * n)
    margin = z * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n))
    return max(0.0, (centre - margin) / (1 + z2 / n))


def is_active(positives: int, negatives: int, min_examples: int, min_precision: float) -> bool:
    """Whether a rule with these counts acts: at least *min_examples* positives and a precision bound of at least
    *min_precision*."""
    return positives >= min_examples and precision_bound(positives, negatives) >= min_precision


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the evidence says of one rule (``host``, ``rule``) or mirror (hosts ``host`` and ``rule``, in order)."""

    kind: str  # "rule" or "mirror"
    host: str
    rule: str
    positives: int
    negatives: int
    active: bool

    def describe(self) -> str:
        what = f"{self.host} and {self.rule} are mirrors" if self.kind == "mirror" else f"{self.host}: {self.rule}"
        state = "active" if self.active else "withdrawn" if self.negatives else "learning"
        bound = precision_bound(self.positives, self.negatives)
        return f"{what} ({state}: {self.positives} examples, {self.negatives} against, precision > {bound:.1%} at 95 %)"


class _Fetched(NamedTuple):
    """A page fetched: its fingerprint, its URL, and the URL of the stored page it is (itself when kept)."""

    fingerprint: int
    url: str
    kept: str


def _parse_key(key: str) -> tuple[str, str, str, str] | None:
    """``(kind, host, rule, sign)`` of a counter's name ``kind|host|rule|sign`` (None for another name)."""
    parts = key.split("|", 2)
    if len(parts) != 3 or parts[0] not in ("rule", "mirror"):
        return None
    rule, _, sign = parts[2].rpartition("|")
    if sign not in ("+", "-") or not rule:
        return None
    return parts[0], parts[1], rule, sign


@dataclass
class RuleBook:
    """The evidence for every rule and mirror, and the rules it makes active (see the module)."""

    min_examples: int = 5
    same_distance: int = 3
    distinct_distance: int = 10
    #: The pages remembered to compare URL variants with (the oldest are forgotten beyond this many).
    max_pages: int = 300_000
    #: The lower 95 % bound of a rule's precision at which it acts (:func:`is_active`).
    min_precision: float = 0.8
    _counts: dict[str, int] = field(default_factory=dict)  # "kind|host|rule|+" or "-" -> count
    _pending: dict[str, int] = field(default_factory=dict)  # counts not handed to the store yet
    _tally: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)  # (kind, host, rule) -> [+, -]
    _pages: dict[int, _Fetched] = field(default_factory=dict)  # hash of a URL (no rules applied) -> its page
    #: (rule, hash of a URL that rule rewrote a fetched page's URL to) -> the first such page
    _classes: dict[tuple[str, int], _Fetched] = field(default_factory=dict)
    _active: dict[str, frozenset[str]] = field(default_factory=dict)  # host -> active rules
    _mirrors: dict[str, frozenset[str]] = field(default_factory=dict)  # host -> hosts it mirrors or is mirrored by
    _partners: dict[str, set[str]] = field(default_factory=dict)  # host -> hosts some example pairs it with
    _seen_examples: set[tuple[str, str, str]] = field(default_factory=set)  # (counter, kept, kept): once a pair
    _touched: set[tuple[str, str, str]] = field(default_factory=set)  # tallies changed since the last refresh

    # --- evidence ---------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Every counter (``kind|host|rule|+`` or ``|-``)."""
        return dict(self._counts)

    def take_pending(self) -> dict[str, int]:
        """The counts added since the last call (to add to the shared store)."""
        pending, self._pending = self._pending, {}
        return pending

    def restore_pending(self, pending: Mapping[str, int]) -> None:
        """Counts taken by :meth:`take_pending` that did not reach the store: pending again."""
        for key, n in pending.items():
            self._pending[key] = self._pending.get(key, 0) + n

    def merge(self, totals: Mapping[str, int]) -> list[Verdict]:
        """Take the store's totals as the counts (what every process sharing the index learned; counts not taken
        yet stay pending); the verdicts whose state changed."""
        counts = {k: int(n) for k, n in totals.items() if _parse_key(k) is not None}
        for key, n in self._pending.items():
            counts[key] = counts.get(key, 0) + n
        self._counts = counts
        self._tally = {}
        self._partners = {}
        for key, n in counts.items():
            kind, host, rule, sign = _parse_key(key)  # type: ignore[misc]  # filtered above
            self._tally.setdefault((kind, host, rule), [0, 0])[sign == "-"] += n
            if kind == "mirror":
                self._pair_hosts(host, rule)
        self._touched = self._keys() | {("rule", h, r) for h, rs in self._active.items() for r in rs}
        self._touched |= {("mirror", h, o) for h, others in self._mirrors.items() for o in others}
        return self._refresh()

    def _pair_hosts(self, a: str, b: str) -> None:
        self._partners.setdefault(a, set()).add(b)
        self._partners.setdefault(b, set()).add(a)

    def _count(self, kind: str, host: str, rule: str, sign: str, pages: tuple[str, str]) -> None:
        """Count one pair of stored pages (their kept URLs) for or against a rule, once however many URL pairs
        show the same two pages."""
        if kind == "mirror":  # a pair of hosts, in order
            host, rule = sorted((host, rule))
        key = f"{kind}|{host}|{rule}|{sign}"
        a, b = sorted(pages)
        if (key, a, b) in self._seen_examples:
            return
        if len(self._seen_examples) > 4 * self.max_pages:
            self._seen_examples.clear()
        self._seen_examples.add((key, a, b))
        self._counts[key] = self._counts.get(key, 0) + 1
        self._pending[key] = self._pending.get(key, 0) + 1
        self._tally.setdefault((kind, host, rule), [0, 0])[sign == "-"] += 1
        self._touched.add((kind, host, rule))
        if kind == "mirror":
            self._pair_hosts(host, rule)
        else:  # the rule's counts on the host's mirrors pool these
            self._touched |= {("rule", other, rule) for other in self._mirrors.get(host, ())}

    def observe(self, url: str, fingerprint: int, duplicate_of: str | None) -> list[Verdict]:
        """A page fetched and fingerprinted (and, when it is a near-duplicate, the URL of the page it duplicates):
        count what it says of the rules; the verdicts whose state changed."""
        page = parse_url(url)
        if page is None:
            return []
        fetched = _Fetched(fingerprint, url, duplicate_of or url)
        if duplicate_of is not None and duplicate_of != url:
            kept = parse_url(duplicate_of)
            if kept is not None:
                self._pair(page, kept, duplicate_of)
        self._variants(page, fetched, duplicate_of)
        if hash(page) not in self._pages:
            if len(self._pages) >= self.max_pages:
                del self._pages[next(iter(self._pages))]
            self._pages[hash(page)] = fetched
        return self._refresh()

    def validated(
        self,
        url: str,
        fingerprint: int,
        duplicate_of: str | None,
        target: str,
        rules: Iterable[str],
        mirror: str | None,
    ) -> list[Verdict]:
        """A validation fetch: compare the page with the page it would have been left for (*target*); against
        the rewrite only when one rule (or the mirror alone) made it.  The verdicts whose state changed."""
        page, known = parse_url(url), parse_url(target)
        other = self._pages.get(hash(known)) if known is not None else None
        if page is None or other is None:
            return []
        rules = list(rules)
        sign = self._sign(fingerprint, duplicate_of, other)
        if sign == "-" and len(rules) + (mirror is not None) > 1:
            sign = None
        if sign is not None:
            pages = (duplicate_of or url, other.kept)
            if mirror is not None:
                self._count("mirror", page.host, mirror, sign, pages)
            for rule in rules:
                self._count("rule", page.host, rule, sign, pages)
        return self._refresh()

    def _sign(self, fingerprint: int, duplicate_of: str | None, other: _Fetched) -> str | None:
        """``+`` when the page is a near-duplicate of *other* (or within ``same_distance``), ``-`` when it was
        kept or duplicates a page beyond ``distinct_distance`` from *other*, else None."""
        distance = (fingerprint ^ other.fingerprint).bit_count()
        if duplicate_of is None:
            return "-"
        if duplicate_of in (other.url, other.kept) or distance <= self.same_distance:
            return "+"
        if distance > self.distinct_distance:
            return "-"
        return None

    def _pair(self, page: Url, kept: Url, duplicate_of: str) -> None:
        if page.host == kept.host:
            for rule in explain(page, kept) or ():
                self._count("rule", page.host, rule, "+", (duplicate_of, duplicate_of))
            return
        a, b = self.canonical(page), self.canonical(kept)
        if (a.path, a.params) == (b.path, b.params):
            self._count("mirror", page.host, kept.host, "+", (duplicate_of, duplicate_of))

    def _variants(self, page: Url, fetched: _Fetched, duplicate_of: str | None) -> None:
        """Pair the page, for each single rewrite of its URL (the host's other active rules applied on both sides),
        with the page fetched before at the rewritten URL or rewritten to it; and with the page at its path on
        each partner host."""
        active = self._active.get(page.host, frozenset())
        for rule in self._single_rewrites(page):
            rewritten = _apply(page, active | {rule})
            if rewritten == _apply(page, active - {rule}):
                continue  # the other rules' rewrite already takes this part away: no pair differs in it alone
            target = hash(rewritten)
            other = self._pages.get(target) or self._classes.get(("", target)) or self._classes.get((rule, target))
            if other is None:
                self._remember_class(rule, target, fetched)
            elif other.url != fetched.url:
                self._compare("rule", page.host, rule, fetched, duplicate_of, other)
        if active:
            self._classes.setdefault(("", hash(_apply(page, active))), fetched)
        for host in sorted(self._partners.get(page.host, ())):
            other = self._pages.get(hash(Url(page.scheme, host, page.path, page.params)))
            if other is not None:
                self._compare("mirror", page.host, host, fetched, duplicate_of, other)

    def _compare(
        self, kind: str, host: str, rule: str, fetched: _Fetched, duplicate_of: str | None, other: _Fetched
    ) -> None:
        sign = self._sign(fetched.fingerprint, duplicate_of, other)
        if sign is not None:
            self._count(kind, host, rule, sign, (fetched.kept, other.kept))

    def _remember_class(self, rule: str, target: int, fetched: _Fetched) -> None:
        if len(self._classes) >= 4 * self.max_pages:
            del self._classes[next(iter(self._classes))]
        self._classes[rule, target] = fetched

    @staticmethod
    def _single_rewrites(page: Url) -> list[str]:
        rules = [f"param:{name}" for name, _ in page.params]
        rules += ["index", "slash", "case"]
        segments = page.path.split("/")
        if len(segments) > 2 and segments[1]:
            rules.append(f"prefix:{segments[1]}")
        return [r for r in rules if _apply(page, (r,)) != page]

    # --- verdicts -----------------------------------------------------------------------------

    def _verdict(self, kind: str, host: str, rule: str) -> Verdict:
        pos, neg = self._pooled(host, rule) if kind == "rule" else self._tally.get((kind, host, rule), (0, 0))
        return Verdict(kind, host, rule, pos, neg, is_active(pos, neg, self.min_examples, self.min_precision))

    def _pooled(self, host: str, rule: str) -> tuple[int, int]:
        """The counts of a rule on *host* and on its confirmed mirrors, pooled (docs/avoid.md)."""
        pos = neg = 0
        for name in (host, *sorted(self._mirrors.get(host, ()))):
            p, n = self._tally.get(("rule", name, rule), (0, 0))
            pos, neg = pos + p, neg + n
        return pos, neg

    def _keys(self) -> set[tuple[str, str, str]]:
        """Every rule and mirror with evidence: its own, or (a rule) a confirmed mirror's."""
        keys = set(self._tally)
        for kind, host, rule in self._tally:
            if kind == "rule":
                keys |= {("rule", other, rule) for other in self._mirrors.get(host, ())}
        return keys

    def verdicts(self) -> list[Verdict]:
        """Every rule and mirror with evidence, active ones first."""
        out = [self._verdict(*key) for key in self._keys()]
        return sorted(out, key=lambda v: (not v.active, v.kind, v.host, v.rule))

    def _refresh(self) -> list[Verdict]:
        """Apply the tallies touched since the last call, mirrors first; the verdicts whose state changed."""
        touched, self._touched = self._touched, set()
        changed = [v for v in map(self._verdict_of, sorted(k for k in touched if k[0] == "mirror")) if v]
        for verdict in changed:
            touched |= self._rules_of(verdict.host, verdict.rule)
        changed += [v for v in map(self._verdict_of, sorted(k for k in touched if k[0] == "rule")) if v]
        return changed

    def _rules_of(self, *hosts: str) -> set[tuple[str, str, str]]:
        """Every rule with evidence on one of *hosts*, on each of them (a pair of mirrors pools their counts)."""
        names = {rule for kind, host, rule in self._tally if kind == "rule" and host in hosts}
        return {("rule", host, rule) for host in hosts for rule in names}

    def _verdict_of(self, key: tuple[str, str, str]) -> Verdict | None:
        """The verdict of *key* applied to the active rules and mirrors; None when its state did not change."""
        verdict = self._verdict(*key)
        kind, host, rule = key
        if kind == "rule":
            if verdict.active == (rule in self._active.get(host, frozenset())):
                return None
            rules = set(self._active.get(host, frozenset()))
            (rules.add if verdict.active else rules.discard)(rule)
            self._active[host] = frozenset(rules)
            return verdict
        if verdict.active == (rule in self._mirrors.get(host, frozenset())) or (verdict.active and host == rule):
            return None
        for a, b in ((host, rule), (rule, host)):
            others = set(self._mirrors.get(a, frozenset()))
            (others.add if verdict.active else others.discard)(b)
            self._mirrors[a] = frozenset(others)
        return verdict

    def rules(self, host: str) -> frozenset[str]:
        """The active rules of *host*."""
        return self._active.get(host, frozenset())

    def mirrors(self, host: str) -> frozenset[str]:
        """The hosts confirmed as mirrors of *host* (either way)."""
        return self._mirrors.get(host, frozenset())

    def canonical(self, url: Url) -> Url:
        """*url* rewritten by its host's active rules."""
        rules = self._active.get(url.host)
        return _apply(url, rules) if rules else url

    def rewrites(self, url: Url) -> list[str]:
        """The active rules that change *url*."""
        return [r for r in sorted(self._active.get(url.host, ())) if _apply(url, (r,)) != url]
