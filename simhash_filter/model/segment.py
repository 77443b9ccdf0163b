"""Chinese word segmentation: jieba's algorithm and dictionary, through its compiled implementation.

jieba (precise mode, HMM for unknown words) is the reference; ``rjieba`` binds jieba-rs, a compiled
implementation of the same algorithm with jieba's own dictionary and HMM model, about 10x faster.  Only
runs of CJK ideographs are segmented, where the two give the same words (the test suite checks this
against jieba itself), so fingerprints never depend on which implementation ran.  Both versions are
pinned and recorded in the fingerprint model (:data:`SEGMENTER_ID`); there is no silent fallback.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from functools import cache, lru_cache
from importlib.metadata import version
from types import ModuleType

SEGMENTER_ID = f"jieba-{version('jieba')}-precise-hmm/rjieba-{version('rjieba')}"

#: Runs of CJK ideographs (unified, extension A, compatibility).
CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


#: Runs longer than this are segmented in slices of this many characters and not cached: a natural run ends at
#: the next punctuation mark, so only a hostile page (a million characters without one) has such runs, and its
#: words must neither fill the memo nor be held all at once.
MAX_CACHED_RUN = 4096


def segment_run(run: str) -> tuple[str, ...]:
    """Words of one run of CJK ideographs (short runs cached: navigation and boilerplate repeat across pages)."""
    if len(run) <= MAX_CACHED_RUN:
        return _segment_cached(run)
    return tuple(w for words in segment_slices(run) for w in words)


def segment_slices(run: str) -> Iterator[list[str]]:
    """The words of a long run, slice by slice of :data:`MAX_CACHED_RUN` characters (not cached)."""
    cut = _rjieba().cut
    for i in range(0, len(run), MAX_CACHED_RUN):
        yield cut(run[i : i + MAX_CACHED_RUN], True)


@lru_cache(maxsize=200_000)
def _segment_cached(run: str) -> tuple[str, ...]:
    if len(run) == 1:
        return (run,)
    return tuple(_rjieba().cut(run, True))


def jieba_cut() -> Callable[[str, bool], list[str]]:
    """The segmenter :func:`segment_run` calls on a run of two ideographs or more: ``cut(run, True)`` (the compiled
    core calls it itself, once per distinct run, and keeps the words)."""
    cut: Callable[[str, bool], list[str]] = _rjieba().cut
    return cut


@cache
def _rjieba() -> ModuleType:
    """rjieba, imported on first use: it loads jieba's dictionary, which pages without Chinese never need."""
    return importlib.import_module("rjieba")
