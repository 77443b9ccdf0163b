"""The errors a caller of ``open_index`` catches: exported from ``simhash_filter``, each a ``StoreError``, raised
where it happens; and no part of the package tells errors apart by their class names or their messages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import simhash_filter
from simhash_filter import DEFAULTS, IndexLockedError, MetadataMismatchError, StoreError, open_index

PACKAGE = Path(simhash_filter.__file__).parent


def test_a_locked_index_raises_the_exported_error(tmp_path: Path) -> None:
    """A second writer of an on-disk index gets ``IndexLockedError``, a ``StoreError``."""
    with open_index(DEFAULTS, str(tmp_path / "index")), pytest.raises(IndexLockedError) as raised:
        open_index(DEFAULTS, str(tmp_path / "index"))
    assert isinstance(raised.value, StoreError)


def test_an_index_of_other_settings_raises_the_exported_error(tmp_path: Path) -> None:
    """An index opened with another model's settings is refused with ``MetadataMismatchError``."""
    open_index(DEFAULTS, str(tmp_path / "index")).close()
    other = DEFAULTS.__class__(DEFAULTS.fingerprint.with_options(structure_weight=0.5))
    with pytest.raises(MetadataMismatchError):
        open_index(other, str(tmp_path / "index"))


#: Telling an error by its class's name, or by the start of its message.
_BY_NAME = re.compile(r"type\(\w+\)\.__name__\s*(==|!=|in\b)|\.__class__\.__name__\s*(==|!=|in\b)")
_BY_MESSAGE = re.compile(r"str\((exc|error|e|err)\)\.(startswith|endswith)|in str\((exc|error|e|err)\)")


def test_no_error_is_recognised_by_its_name_or_message() -> None:
    """An error is typed where it is raised: nothing compares an exception's class name, or looks into its text
    (Redis's script replies aside: the Lua script's own refusal is a reply text, read in one place)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _BY_NAME.search(line) or _BY_MESSAGE.search(line):
                found.append(f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}")
    # Redis's script replies are texts
    allowed = ("index/backends/redis/",)
    assert [f for f in found if not f.startswith(allowed)] == []
