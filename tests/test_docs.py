"""Tests that the README stays true to the code: settings table and public facade."""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import simhash_filter
from simhash_filter.config import FilterConfig, FingerprintConfig

README = Path(__file__).resolve().parent.parent / "README.md"
ROW = re.compile(r"^\| `(\w+)` \| `([^`]*)` \|", re.MULTILINE)


def _settings_table() -> dict[str, object]:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Settings", 1)[1].split("\n## ", 1)[0]
    return {name: ast.literal_eval(value) for name, value in ROW.findall(section)}


def test_readme_settings_table_matches_config():
    """Every FingerprintConfig/FilterConfig field is in the README's table with its current default."""
    documented = _settings_table()
    fp = FingerprintConfig()
    expected = {f.name: getattr(fp, f.name) for f in fields(FingerprintConfig)}
    expected.update({f.name: getattr(FilterConfig(), f.name) for f in fields(FilterConfig) if f.name != "fingerprint"})
    assert documented == expected, "README.md's Settings table is out of date with simhash_filter/config.py"


def test_readme_three_line_usage_runs():
    """The README's three-line Python example works as written."""
    html = "<html><body><article>" + "<p>The harbour ferry timetable changes on Monday morning.</p>" * 5
    ns: dict[str, object] = {"html": html, "url": "https://a.example/1"}
    block = README.read_text(encoding="utf-8").split("```python\n", 1)[1].split("```", 1)[0]
    exec(block, ns)
    assert ns["match"] is None
    assert len(ns["index"]) == 1


def test_facade_exports():
    """The package facade exports the documented names, and a version string."""
    for name in (
        "fingerprint",
        "Fingerprinter",
        "Fingerprint",
        "Status",
        "hamming",
        "FingerprintConfig",
        "FilterConfig",
        "DEFAULTS",
        "NearDuplicateIndex",
        "Match",
        "__version__",
    ):
        assert name in simhash_filter.__all__
        assert hasattr(simhash_filter, name)
    assert isinstance(simhash_filter.__version__, str) and simhash_filter.__version__
