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


def _imports(path: Path, *, typing: bool = False) -> set[str]:
    """Every module that *path* imports (a name imported from a package counts as its submodule when it is one);
    *typing*: the imports for type checkers only (``if TYPE_CHECKING:``) too."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not typing:
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
#: The graph with the imports for type checkers only: a circle there is a circle all the same.
TYPED_GRAPH = {
    name: {m for m in _imports(path, typing=True) if m in MODULES and m != name} for name, path in MODULES.items()
}
EXTERNAL = {name: {m.split(".")[0] for m in _imports(path)} for name, path in MODULES.items()}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in {"model", "index", "crawl", "cli", "serve"} else "top"


def test_the_package_has_the_four_parts():
    """The tree names the architecture: model, index (with its backends), crawl (Scrapy), cli."""
    for part in ("model", "index", "index.backends", "crawl", "cli"):
        assert f"{NAME}.{part}" in MODULES, part
    flat = {name for name in MODULES if name.count(".") == 1}
    flat_modules = ("__main__", "config", "errors", "batch", "report", "cli", "crawl", "index", "model", "serve")
    assert flat == {f"{NAME}.{p}" for p in flat_modules}, "a new module at the package root"


def test_no_import_circles():
    """No module reaches itself through the package's imports, type-only ones included (a circle is printed when
    one appears)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for nxt in sorted(TYPED_GRAPH[module]):
            if state.get(nxt) == 1:
                circle = [*stack[stack.index(nxt) :], nxt]
                pytest.fail("import circle: " + " -> ".join(circle))
            if nxt not in state:
                walk(nxt)
        stack.pop()
        state[module] = 2

    for module in sorted(TYPED_GRAPH):
        if module not in state:
            walk(module)


# What each part may import of the package (the package root only for its version and lazy components).
ALLOWED = {
    "model": {"model"},
    "index": {"index", "model.sketch", "errors"},
    "top": {"model", "index", "top"},
    "crawl": {"model", "index", "top", "crawl"},
    # the command line registers serve's command; `index rules` reads the crawl's URL rules
    "cli": {"model", "index", "top", "cli", "serve.command", "crawl.urlrules"},
    # the HTTP service: the crawl's counters, log line and worker processes, the command line's options
    "serve": {"model", "index", "top", "crawl", "cli", "serve"},
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


# -- private methods stay in their module ----------------------------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}
#: (module, class name) -> the class's node, for every class of the package.
CLASSES = {
    (m, node.name): node for m, tree in TREES.items() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
}


def _imported_names(module: str) -> dict[str, tuple[str, str]]:
    """The names *module* imports from the package: local name -> (module, name)."""
    return {
        alias.asname or alias.name: (node.module, alias.name)
        for node in ast.walk(TREES[module])
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(NAME)
        for alias in node.names
    }


IMPORTED = {m: _imported_names(m) for m in TREES}


def _resolve(module: str, name: str) -> tuple[str, str] | None:
    """The package class *name* stands for in *module* (followed through re-exports), or None."""
    for _ in range(5):
        if (module, name) in CLASSES:
            return module, name
        if name not in IMPORTED.get(module, {}):
            return None
        module, name = IMPORTED[module][name]
    return None


def _ancestors(cls: tuple[str, str]) -> list[tuple[str, str]]:
    """*cls* and every package class it derives from."""
    found: list[tuple[str, str]] = []
    todo = [cls]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.append(current)
        for base in CLASSES[current].bases:
            name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
            if name and (resolved := _resolve(current[0], name)):
                todo.append(resolved)
    return found


def _methods(cls: tuple[str, str]) -> set[str]:
    return {node.name for node in CLASSES[cls].body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


#: private method name -> the modules whose classes define it.
PRIVATE_METHODS: dict[str, set[str]] = {}
for _cls in CLASSES:
    for _name in filter(_private, _methods(_cls)):
        PRIVATE_METHODS.setdefault(_name, set()).add(_cls[0])


def test_no_class_overrides_a_private_method_of_a_class_of_another_module():
    """A private method (``_name``) is defined once along a class's bases, or only by classes of one module: a class
    (or a mixin beside it) never replaces another module's private method, whose contract no reader can see."""
    offenders = []
    for cls in CLASSES:
        owners: dict[str, set[str]] = {}
        for ancestor in _ancestors(cls):
            for name in filter(_private, _methods(ancestor)):
                owners.setdefault(name, set()).add(ancestor[0])
        offenders += [f"{cls[0]}.{cls[1]}: {name} in {sorted(mods)}" for name, mods in owners.items() if len(mods) > 1]
    assert not offenders


def test_no_module_calls_a_private_method_defined_in_another_module():
    """A call ``x._name(...)`` (``self._name(...)`` too) names a private method of its own module's classes: no
    module calls another module's private method, be it on another object or inherited from a base or a mixin.
    (Only the package's own methods are checked: ``_replace`` of a named tuple or ``os._exit`` are public APIs of
    the standard library; a private attribute holding a callable, set by the module itself, is no method.)"""
    offenders = []
    for module, tree in TREES.items():
        local = {name for cls in CLASSES if cls[0] == module for name in _methods(cls)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name = node.func.attr
            if _private(name) and name not in local and PRIVATE_METHODS.get(name, set()) - {module}:
                offenders.append(f"{module}:{node.lineno}: {ast.unparse(node.func)}")
    assert not offenders
