"""``simhash-filter compare``: the distance of two pages (files, URLs or fingerprints) and the rule's decision
(:func:`~simhash_filter.index.nearduplicate.verdict`), with ``--explain`` the features that pushed them apart."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simhash_filter.cli.common import HEX_FINGERPRINT, UsageError, filter_config, read_bytes, unreadable, warn
from simhash_filter.cli.fetch import Fetched, FetchError, fetch, is_url
from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.index.nearduplicate import is_candidate, spots_of, spots_verdict, verdict
from simhash_filter.index.tables import TableDesign, hamming
from simhash_filter.model.explain import Explanation, FeatureDifference, explain_features
from simhash_filter.model.fingerprint import Fingerprint, Fingerprinter, Status
from simhash_filter.model.sketch import similarity

#: ``compare``'s answer, as ``cmp`` gives it: the same (near-duplicate), different (distinct), or trouble.
EXIT_NEAR_DUPLICATE, EXIT_DISTINCT, EXIT_TROUBLE = 0, 1, 2


def _is_fingerprint(arg: str) -> bool:
    return arg != "-" and not os.path.exists(arg) and HEX_FINGERPRINT.fullmatch(arg) is not None


def _format_weight(w: float) -> str:
    return "-" if w == 0.0 else f"{w:.3g}"


def _print_differences(title: str, diffs: Sequence[FeatureDifference]) -> None:
    print(f"{title} (weight in A / in B):")
    if not diffs:
        print("  (none)")
        return
    width = min(40, max(len(d.name) for d in diffs))
    for d in diffs:
        side = {"a": "only A", "b": "only B", None: "both"}[d.only_in]
        print(f"  {d.name:<{width}}  {_format_weight(d.weight_a):>7} / {_format_weight(d.weight_b):<7}  {side}")


def _print_explanation(e: Explanation) -> None:
    print(
        f"weight difference: {e.text_share:.0%} text, {e.structure_share:.0%} structure "
        f"(weighted Jaccard similarity {e.weighted_jaccard:.2f})"
    )
    _print_differences("text features that differ most", e.text)
    _print_differences("structure features that differ most", e.structure)


def _compared_fingerprint(arg: str, page: Fetched | None, fingerprinter: Fingerprinter) -> Fingerprint:
    if page is None:
        return Fingerprint(int(arg, 16), Status.OK)
    return fingerprinter.fingerprint(page.body, page.charset)


def _compared_page(arg: str) -> Fetched:
    """The bytes of a file, of standard input or of an http(s) URL (with the charset its header names)."""
    if is_url(arg):
        return fetch(arg, DEFAULTS.fingerprint.max_bytes + 1)
    return Fetched(read_bytes(arg), None)


@dataclass(frozen=True)
class _Decision:
    """The two-stage decision about two fingerprinted pages."""

    distance: int
    table_in_common: bool
    similarity: float | None  # None: a side is a bare fingerprint (no sketch)
    decision: str  # "near-duplicate", "distinct" or "candidate"
    k: int
    threshold: float

    @property
    def line(self) -> str:
        d, k, t, s = self.distance, self.k, self.threshold, self.similarity
        if d > k or not self.table_in_common:
            why = f"k={k}" if d > k else f"within k={k} but no table in common"
            return f"distance {d}: distinct ({why})"
        if s is None:
            return f"distance {d}: candidate (k={k}; compare the pages themselves to verify)"
        return f"distance {d}, similarity {s:.2f}: {self.decision} (k={k}, t={t:g})"

    @property
    def exit_status(self) -> int:
        """0 near-duplicate (and a candidate: the one-stage decision, no sketch to verify it), 1 distinct."""
        return EXIT_DISTINCT if self.decision == "distinct" else EXIT_NEAR_DUPLICATE


def _decide(a: Fingerprint, b: Fingerprint, config: FilterConfig) -> _Decision:
    assert a.value is not None and b.value is not None
    d, k, t = hamming(a.value, b.value), config.max_distance, config.min_similarity
    common = TableDesign.parse(config.tables).agree_on_a_lead(a.value, b.value)
    wa, wb = a.word_sketch, b.word_sketch
    s = None if wa is None or wb is None else similarity(wa, wb)
    if s is None:  # a bare fingerprint: only stage one can be told
        decision = "candidate" if is_candidate(d, common, config) else "distinct"
    else:  # the word sketches, else (model v6) the spots of two article-like pages
        spots = spots_of(a.sketch, b.sketch, len(wa))  # type: ignore[arg-type]
        near = verdict(d, common, s, config) or spots_verdict(d, common, spots, config)
        decision = "near-duplicate" if near else "distinct"
    return _Decision(d, common, s, decision, k, t)


def _compare_record(names: Sequence[str], fps: Sequence[Fingerprint], x: _Decision) -> dict[str, Any]:
    """``compare --json``: the inputs, both fingerprints and the decision with its k and threshold."""
    return {
        "a": names[0],
        "b": names[1],
        "fingerprint_a": fps[0].hex,
        "fingerprint_b": fps[1].hex,
        "distance": x.distance,
        "table_in_common": x.table_in_common,
        "similarity": x.similarity,
        "decision": x.decision,
        "k": x.k,
        "threshold": x.threshold,
    }


def _explanation_record(e: Explanation) -> dict[str, Any]:
    def features(diffs: Sequence[FeatureDifference]) -> list[dict[str, Any]]:
        return [{"name": d.name, "weight_a": d.weight_a, "weight_b": d.weight_b, "only_in": d.only_in} for d in diffs]

    return {
        "text_share": e.text_share,
        "structure_share": e.structure_share,
        "weighted_jaccard": e.weighted_jaccard,
        "text": features(e.text),
        "structure": features(e.structure),
    }


def _explained(a: Fetched, b: Fetched, config: FilterConfig, top: int) -> Explanation:
    """:func:`explain` of two pages, each read in the charset its server named (a URL's Content-Type)."""
    fingerprinter = Fingerprinter(config.fingerprint)
    return explain_features(*fingerprinter.analyze(a.body, a.charset), *fingerprinter.analyze(b.body, b.charset),
                            top=top)  # fmt: skip


def cmd_compare(args: argparse.Namespace) -> int:
    config = filter_config(args)
    names = (args.a, args.b)
    if names == ("-", "-"):
        raise UsageError("only one of A and B can be '-' (standard input)")
    given = [_is_fingerprint(arg) for arg in names]
    if args.explain and any(given):
        raise UsageError("--explain needs two HTML files, not fingerprints")
    if args.top < 0:
        raise UsageError(f"--top must be >= 0, got {args.top}")
    pages: list[Fetched | None] = []
    for arg, is_fp in zip(names, given, strict=True):
        try:
            pages.append(None if is_fp else _compared_page(arg))
        except FetchError as exc:
            warn(f"{arg}: {exc}")
            return EXIT_TROUBLE
        except OSError as exc:
            warn(f"{arg}: {unreadable(arg, exc)}")
            return EXIT_TROUBLE
    explanation = None
    if args.explain:
        a_page, b_page = pages
        assert a_page is not None and b_page is not None  # --explain with a fingerprint was refused
        explanation = _explained(a_page, b_page, config, args.top)
        fps = [explanation.a, explanation.b]
    else:
        fingerprinter = Fingerprinter(config.fingerprint)
        fps = [_compared_fingerprint(arg, data, fingerprinter) for arg, data in zip(names, pages, strict=True)]
    failed = [(arg, fp) for arg, fp in zip(names, fps, strict=True) if fp.value is None]
    for arg, fp in failed:
        warn(f"{arg}: cannot fingerprint: {fp.status}")
    if failed:
        return EXIT_TROUBLE
    decision = _decide(fps[0], fps[1], config)
    if args.json:
        record = _compare_record(names, fps, decision)
        if explanation is not None:
            record["explanation"] = _explanation_record(explanation)
        print(json.dumps(record, ensure_ascii=False))
        return decision.exit_status
    print(decision.line)
    if explanation is not None:
        _print_explanation(explanation)
    return decision.exit_status


COMPARE_EPILOG = """\
examples:
  simhash-filter compare a.html b.html              # distance 2, similarity 0.93: near-duplicate (k=10, t=0.75)
  simhash-filter compare a.html 3f0c1e22a9d47b10    # a file or a 16-hex-digit fingerprint on each side
  simhash-filter compare https://a.example/x https://b.example/x   # or a URL: one GET each
  simhash-filter compare a.html b.html --explain    # + the features that pushed the two apart
  simhash-filter compare a.html b.html --json
  if simhash-filter compare a.html b.html >/dev/null; then echo near-duplicate; fi

exit status (as cmp's):
  0  near-duplicate (with a fingerprint on a side: a candidate, which no sketch can verify)
  1  distinct
  2  trouble: an input that is neither a readable file nor a fingerprint, a page that cannot be
     fingerprinted, a usage error"""


def add_compare_parser(sub: Any, threshold: argparse.ArgumentParser, model: argparse.ArgumentParser) -> None:
    """Add ``compare`` to the ``simhash-filter`` parser (``threshold``: -k and -t, ``model``: the model options)."""
    p = sub.add_parser(
        "compare",
        parents=[model, threshold],
        help="Hamming distance and decision for two pages (exit status 0 near-duplicate, 1 distinct)",
        description="Print the Hamming distance of two pages and whether they are near-duplicates.",
        epilog=COMPARE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("a", metavar="A", help="HTML file, http(s) URL or 16-hex-digit fingerprint ('-' for standard input)")
    p.add_argument("b", metavar="B", help="HTML file, http(s) URL or 16-hex-digit fingerprint")
    p.add_argument("--explain", action="store_true", help="list the features that pushed the two pages apart")
    p.add_argument("--top", type=int, default=10, metavar="N", help="features listed per kind (default: 10)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: both fingerprints, distance, similarity, decision, k and threshold",
    )
    p.set_defaults(func=cmd_compare, parser=p, failed=EXIT_TROUBLE)
