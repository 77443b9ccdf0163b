"""The one rule that decides a pair (simhash_filter.index.nearduplicate: ``is_candidate``, ``verdict``) and the one
``open_index``: the same answers on Python numbers and numpy arrays, and every caller uses them."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import simhash_filter
from simhash_filter import DEFAULTS
from simhash_filter.index.nearduplicate import NearDuplicateIndex, Rule, is_candidate, open_index, verdict

PACKAGE = Path(simhash_filter.__file__).parent


def test_the_rule_in_two_stages() -> None:
    """A candidate is within k and shares a lead; a near-duplicate is a candidate at least t similar."""
    rule = Rule(3, 0.75)
    assert is_candidate(3, True, rule) and not is_candidate(4, True, rule) and not is_candidate(0, False, rule)
    assert verdict(3, True, 0.75, rule) and not verdict(3, True, 0.74, rule)
    assert not verdict(4, True, 1.0, rule) and not verdict(1, False, 1.0, rule)
    assert verdict(2, True, 0.9, DEFAULTS) == verdict(
        2, True, 0.9, Rule(DEFAULTS.max_distance, DEFAULTS.min_similarity)
    )


def test_numpy_arrays_get_the_answers_of_single_pairs() -> None:
    """Elementwise on arrays (calibrate's sweeps) as pair by pair."""
    rng = np.random.default_rng(7)
    d, lead, s = rng.integers(0, 8, 500), rng.random(500) < 0.7, rng.random(500)
    for rule in (Rule(2, 0.5), Rule(4, 0.8)):
        assert verdict(d, lead, s, rule).tolist() == [bool(verdict(*x, rule)) for x in zip(d, lead, s, strict=True)]


def test_open_index_is_one_function_for_config() -> None:
    """The package's, dedup's and the crawl's open_index are the same function, and it opens the config's index."""
    from simhash_filter.batch import dedup
    from simhash_filter.crawl import crawlfilter

    assert simhash_filter.open_index is dedup.open_index is crawlfilter.open_index is open_index
    with open_index(DEFAULTS) as index:
        assert isinstance(index, NearDuplicateIndex)
        assert index.rule == Rule(DEFAULTS.max_distance, DEFAULTS.min_similarity)
        assert index.k == DEFAULTS.max_distance and index.sketch_bytes == DEFAULTS.fingerprint.sketch_bytes


def test_no_other_module_defines_open_index_or_compares_with_min_similarity() -> None:
    """Outside the index's module (and the bound's early stop on verified rows, inside the engines), no function is
    named open_index and no code compares a value with ``min_similarity`` (``x >= ...min_similarity``)."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in {"nearduplicate.py", "bound.py"}:  # the rule; the bound's early stop (its docstring)
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name == "open_index":
                offenders.append(f"{path.name}: def open_index")
            if isinstance(node, ast.Compare) and any(isinstance(op, ast.GtE) for op in node.ops):
                right = node.comparators[-1]
                name = right.attr if isinstance(right, ast.Attribute) else getattr(right, "id", "")
                if name == "min_similarity":
                    offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, offenders
