"""Where the IDF tables are cached: the user's cache directory as platformdirs knows it on each platform."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import pytest
from platformdirs.macos import MacOS

from simhash_filter.model import weights


def test_cache_dir_follows_the_platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On macOS (platformdirs' macOS rules) the cache is ~/Library/Caches/simhash-filter, not a Linux path."""
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(platformdirs, "PlatformDirs", MacOS)
    assert weights.cache_dir() == tmp_path / "Library" / "Caches" / "simhash-filter"


def test_cache_dir_honours_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An absolute $XDG_CACHE_HOME is the override, and the table cache is written under it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert weights.cache_dir() == tmp_path / "simhash-filter"
    weights.cached_table("test", lambda: {"estuary": 9.5})
    assert [p.name for p in (tmp_path / "simhash-filter").iterdir()] == [weights.cache_path("test").name]
