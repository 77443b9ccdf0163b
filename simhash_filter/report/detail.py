"""The report's detail of a pair of pages: each page's main text, and why the two fingerprints differ; a chunk
of pairs at a time, each of its pages read once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from simhash_filter.model.config import FingerprintConfig
from simhash_filter.model.explain import explain_features
from simhash_filter.model.features import Features
from simhash_filter.model.fingerprint import Fingerprint, Fingerprinter
from simhash_filter.model.sketch import similarity

__all__ = ["Job", "display_text", "work"]

#: Features listed per kind in a pair's explanation.
FEATURES_LISTED = 8
_SPACES = re.compile(r"[ \t\r\f\v\u00a0\u3000]+")
_SENTENCE_END = tuple(".!?:;。！？：；”\"')]）")


@dataclass(frozen=True, slots=True)
class Job:
    """A chunk of pairs ``(pair_id, page_a, page_b)`` and the content of their pages: ``(html, encoding)``, or
    ``(None, text)`` when the source holds text only."""

    pairs: tuple[tuple[int, int, int], ...]
    pages: dict[int, tuple[str | bytes | None, str | None]]
    text_cap: int


def display_text(text: str, cap: int) -> tuple[str, bool]:
    """Text segments as lines to read: spaces collapsed, a short piece that does not end a sentence joined to
    the next (inline links, emphasis), cut at ``cap`` characters; whether it was cut."""
    lines: list[str] = []
    carry = ""
    for raw in text.split("\n"):
        piece = _SPACES.sub(" ", raw).strip()
        if not piece:
            continue
        carry = f"{carry} {piece}" if carry else piece
        if len(carry) >= 40 or carry.endswith(_SENTENCE_END):
            lines.append(carry)
            carry = ""
    if carry:
        lines.append(carry)
    joined = "\n".join(lines)
    return (joined[:cap], True) if len(joined) > cap else (joined, False)


_fingerprinter: Fingerprinter | None = None


def init(config: FingerprintConfig) -> None:
    """Worker initialiser: the fingerprinter of the report's model."""
    global _fingerprinter
    _fingerprinter = Fingerprinter(config)


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def work(job: Job) -> dict[str, Any]:
    """The chunk's data for the report: ``texts`` by page id, ``cut`` (ids whose text was cut), ``pairs`` by id."""
    assert _fingerprinter is not None, "detail.init() first"
    fingerprinter = _fingerprinter
    texts: dict[str, str] = {}
    cut: list[int] = []
    analysed: dict[int, tuple[Fingerprint, Features | None] | None] = {}
    for page_id, (html, value) in job.pages.items():
        if html is None:  # text only: nothing to explain
            text, analysed[page_id] = value or "", None
        else:
            try:
                fp, feats, text = fingerprinter.inspect(html, value)
            except Exception:  # a page that breaks the model shows without its detail; the rest goes on
                fp, feats, text = None, None, ""
            analysed[page_id] = None if fp is None else (fp, feats)
        shown, was_cut = display_text(text, job.text_cap)
        texts[str(page_id)] = shown
        if was_cut:
            cut.append(page_id)
    pairs: dict[str, dict[str, Any]] = {}
    for pair_id, a, b in job.pairs:
        pair: dict[str, Any] = {"a": a, "b": b, "distance": None, "similarity": None, "weighted_jaccard": None,
                                "text_share": None, "text": [], "structure": []}  # fmt: skip
        side_a, side_b = analysed.get(a), analysed.get(b)
        if side_a is not None and side_b is not None:
            why = explain_features(*side_a, *side_b, top=FEATURES_LISTED)
            sketch_a, sketch_b = why.a.word_sketch, why.b.word_sketch
            pair.update(
                distance=why.distance,
                similarity=None if sketch_a is None or sketch_b is None else _rounded(similarity(sketch_a, sketch_b)),
                weighted_jaccard=_rounded(why.weighted_jaccard),
                text_share=_rounded(why.text_share),
                text=[[d.name, _rounded(d.weight_a, 4), _rounded(d.weight_b, 4)] for d in why.text],
                structure=[[d.name, _rounded(d.weight_a, 4), _rounded(d.weight_b, 4)] for d in why.structure],
            )
        pairs[str(pair_id)] = pair
    return {"texts": texts, "cut": cut, "pairs": pairs}
