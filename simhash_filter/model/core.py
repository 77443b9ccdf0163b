"""Which implementation of the model's hot path runs: the compiled core (``simhash_filter.model._core``, a
Cython extension built by ``pip install``: the nesting guard, the parser (Lexbor) and the tree walk, the split of its
text by role, the text features, the vote and the sketch) or the pure-Python reference.  Both give bit-identical
fingerprints (``benchmarks/checks/golden.py check``); the reference is the fallback where no compiler was at hand.

``SIMHASH_FILTER_PURE_PYTHON=1`` in the environment selects the reference (tests run both).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

__all__ = [
    "PURE_ENV",
    "compiled_class_words",
    "compiled_control_bytes",
    "compiled_counts",
    "compiled_guard",
    "compiled_lexbor_walk",
    "compiled_lexbor_walk_split",
    "compiled_page_fingerprint",
    "compiled_sequence_bits",
    "compiled_sketch",
    "compiled_text_features",
    "compiled_vote",
    "compiled_word_table",
    "describe",
]

logger = logging.getLogger(__name__)

#: Set to 1 to run the pure-Python reference even where the compiled core is built.
PURE_ENV = "SIMHASH_FILTER_PURE_PYTHON"


_Compiled = Callable[..., Any] | None
_NONE: tuple[_Compiled, ...] = (None,) * 12


def _load() -> tuple[tuple[_Compiled, ...], str]:
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return _NONE, f"pure-Python core ({PURE_ENV} is set)"
    try:
        from simhash_filter.model._core import (
            ClassWords,
            FeatureCounts,
            WordTable,
            control_bytes,
            lexbor_walk,
            lexbor_walk_split,
            nesting_guard,
            page_fingerprint,
            sequence_bits,
            sketch,
            text_features,
            vote,
        )
    except ImportError as exc:  # not built (no compiler at install time)
        logger.warning(
            "simhash-filter: the compiled core is not available (%s); using the pure-Python core, which gives the "
            "same fingerprints more slowly (reinstall with a C compiler to build it)",
            exc,
        )
        return _NONE, f"pure-Python core (compiled core not available: {exc})"
    compiled = (text_features, FeatureCounts, vote, sketch, WordTable, page_fingerprint, ClassWords,
                nesting_guard, lexbor_walk, lexbor_walk_split, control_bytes, sequence_bits)  # fmt: skip
    return compiled, "compiled core"


_compiled, _description = _load()
(
    compiled_text_features,
    compiled_counts,
    compiled_vote,
    compiled_sketch,
    compiled_word_table,
    compiled_page_fingerprint,
    compiled_class_words,
    compiled_guard,
    compiled_lexbor_walk,
    compiled_lexbor_walk_split,
    compiled_control_bytes,
    compiled_sequence_bits,
) = _compiled


def describe() -> str:
    """``"compiled core"`` or ``"pure-Python core (why)"``: what ``simhash-filter --version`` prints."""
    return _description
