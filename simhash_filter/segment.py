"""Chinese word segmentation: jieba's algorithm and dictionary, through its compiled implementation.

jieba (precise mode, HMM for unknown words) is the reference; ``rjieba`` binds jieba-rs, a compiled
implementation of the same algorithm with jieba's own dictionary and HMM model, about 10x faster.  Only
runs of CJK ideographs are segmented, where the two give the same words (the test suite checks this
against jieba itself), so fingerprints never depend on which implementation ran.  Both versions are
pinned and recorded in the fingerprint model (:data:`SEGMENTER_ID`); there is no silent fallback.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from importlib.metadata import version
from types import ModuleType

SEGMENTER_ID = f"jieba-{version('jieba')}-precise-hmm/rjieba-{version('rjieba')}"

#: Runs of CJK ideographs (unified, extension A, compatibility).
CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


@lru_cache(maxsize=200_000)
def segment_run(run: str) -> tuple[str, ...]:
    """Words of one run of CJK ideographs (cached: navigation and boilerplate repeat across pages)."""
    if len(run) == 1:
        return (run,)
    return tuple(_rjieba().cut(run, True))


@cache
def _rjieba() -> ModuleType:
    """rjieba, imported on first use: it loads jieba's dictionary, which pages without Chinese never need."""
    import rjieba

    return rjieba
