"""The package's layout: four parts (model, index, Scrapy integration, command line), data flowing one way down.

The import graph is read from the source (every ``import`` outside ``if TYPE_CHECKING:``, lazy ones in
functions included), so a circle or an upward import fails here before it fails a user.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import simhash_filter
from simhash_filter._moved import MOVED

PACKAGE = Path(simhash_filter.__file__).parent
NAME = "simhash_filter"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> set[str]:
    """Every module that *path* imports (a name imported from a package counts as its submodule when it is one)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


GRAPH = {name: {m for m in _imports(path) if m in MODULES and m != name} for name, path in MODULES.items()}
EXTERNAL = {name: {m.split(".")[0] for m in _imports(path)} for name, path in MODULES.items()}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in {"model", "index", "crawl", "cli"} else "top"


def test_the_package_has_the_four_parts():
    """The tree names the architecture: model, index (with its backends), crawl (Scrapy), cli."""
    for part in ("model", "index", "index.backends", "crawl", "cli"):
        assert f"{NAME}.{part}" in MODULES, part
    flat = {name for name in MODULES if name.count(".") == 1}
    flat_modules = ("__main__", "config", "batch", "report", "cli", "crawl", "index", "model", "_moved")
    parts = {f"{NAME}.{p}" for p in flat_modules}
    assert flat == parts | set(MOVED), "a new module at the package root (moved modules' old paths: _moved.py)"


def test_no_import_circles():
    """No module reaches itself through the package's imports (a circle is printed when one appears)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for nxt in sorted(GRAPH[module]):
            if state.get(nxt) == 1:
                circle = [*stack[stack.index(nxt) :], nxt]
                pytest.fail("import circle: " + " -> ".join(circle))
            if nxt not in state:
                walk(nxt)
        stack.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            walk(module)


# What each part may import of the package (the package root only for its version and lazy components).
ALLOWED = {
    "model": {"model"},
    "index": {"index", "model.sketch"},
    "top": {"model", "index", "top"},
    "crawl": {"model", "index", "top", "crawl"},
    "cli": {"model", "index", "top", "cli"},
}


def _allowed(importer: str, imported: str) -> bool:
    target = imported.removeprefix(NAME + ".") if imported != NAME else "top"
    rules = ALLOWED[_part(importer)]
    if _part(imported) in rules or target in rules:
        return True
    return importer == f"{NAME}.__main__" and _part(imported) == "cli"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_data_flows_down(module):
    """Model, index and the top level never import the Scrapy glue or the command line; the model imports no index."""
    upward = sorted(m for m in GRAPH[module] if not _allowed(module, m))
    assert not upward, f"{module} imports {upward}"


def test_the_index_tables_import_no_store():
    """The index's bottom layer (tables, value types) imports no backend, nothing of the facade."""
    assert GRAPH[f"{NAME}.index.tables"] == set()


def test_only_the_scrapy_integration_imports_scrapy():
    """Scrapy, Twisted and itemadapter are imported by the crawl part alone."""
    scrapy_world = {"scrapy", "twisted", "itemadapter"}
    offenders = {m: sorted(EXTERNAL[m] & scrapy_world) for m in MODULES if _part(m) != "crawl"}
    assert not {m: s for m, s in offenders.items() if s}


def test_importing_the_package_imports_no_scrapy():
    """``import simhash_filter`` (and the model and the index) in a fresh interpreter leaves Scrapy unimported."""
    code = (
        "import sys, simhash_filter, simhash_filter.model.fingerprint, simhash_filter.index.nearduplicate;"
        "names = ('scrapy', 'twisted', 'simhash_filter.crawl', 'simhash_filter.cli');"
        "print(sorted(m for m in names if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_crawl_borrows_nothing_from_the_batch_paths_and_its_counts_nothing_from_the_report():
    """The Scrapy integration imports nothing of batch/ (dedup, WARC reading, Spark), and its stats module (the
    counts) imports nothing of the report package."""
    crawl = {m: GRAPH[m] for m in GRAPH if m.startswith(f"{NAME}.crawl")}
    assert not {m: sorted(i for i in imported if i.startswith(f"{NAME}.batch")) for m, imported in crawl.items()
                if any(i.startswith(f"{NAME}.batch") for i in imported)}  # fmt: skip
    assert not [i for i in GRAPH[f"{NAME}.crawl.stats"] if i.startswith(f"{NAME}.report")]
