"""The generated sites and servers (``devsites/``) sit below the demo, the tests and the benchmarks: they import
none of them, the benchmarks import nothing of ``tests/``, and the Scrapy project imports no benchmark."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imported_tops(folder: str) -> dict[str, set[str]]:
    """For each module under ``folder``: the top-level names of what it imports (``from . import`` excluded)."""
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
        out[path.relative_to(ROOT).as_posix()] = names
    return out


def test_devsites_import_no_upper_layer() -> None:
    """No module of devsites/ imports the tests, the benchmarks or the Scrapy project."""
    for module, names in _imported_tops("devsites").items():
        assert not names & {"tests", "benchmarks", "crawler", "conftest", "crawl_helpers"}, module


def test_benchmarks_import_nothing_of_the_tests() -> None:
    """The benchmarks take their sites and servers from devsites/, not from tests/."""
    test_modules = {p.stem for p in (ROOT / "tests").glob("*.py")}
    for module, names in _imported_tops("benchmarks").items():
        assert not names & (test_modules | {"tests"}), module


def test_the_scrapy_project_imports_no_benchmark() -> None:
    """crawler/ (settings, items, spiders, the demo) builds its demo site from devsites/, not from benchmarks/."""
    for module, names in _imported_tops("crawler").items():
        assert "benchmarks" not in names, module
