"""What the commands share: the error of bad arguments found after parsing, and the configurations built from the
command line's options (``-k``, ``-t``, the model's options) -- one place, so that every command reads them alike."""

from __future__ import annotations

import argparse

from simhash_filter.config import DEFAULTS, FilterConfig, FingerprintConfig


class UsageError(Exception):
    """Bad arguments found after parsing (reported like argparse errors, exit status 2)."""


def fingerprint_config(args: argparse.Namespace) -> FingerprintConfig:
    """The model's options (``--structure-weight``, ``--dom-decay``) over the defaults."""
    try:
        return DEFAULTS.fingerprint.with_options(structure_weight=args.structure_weight, dom_decay=args.dom_decay)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def filter_config(args: argparse.Namespace) -> FilterConfig:
    """The filter's configuration from a command's options; the options a command lacks keep their defaults."""
    try:
        return FilterConfig(
            fingerprint=fingerprint_config(args),
            max_distance=args.max_distance,
            min_similarity=getattr(args, "min_similarity", DEFAULTS.min_similarity),
            candidates_per_table=getattr(args, "candidates_per_table", DEFAULTS.candidates_per_table),
            block_duplicates=getattr(args, "block_duplicates", DEFAULTS.block_duplicates),
            expected_pages=getattr(args, "expected_pages", DEFAULTS.expected_pages),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
