"""Old paths of moved modules: each still imports (and runs with ``python -m``) as the module it moved to, with a
``DeprecationWarning`` that names the new path, until release :data:`REMOVED_IN` removes it (docs/design.md,
"Moved modules").  Each old path is a three-line file at the package root that calls :func:`follow`."""

from __future__ import annotations

import importlib
import runpy
import sys
import warnings
from types import ModuleType

#: The release that removes the old paths.
REMOVED_IN = "0.3.0"

#: Old module path -> the module it moved to.
MOVED = {
    "simhash_filter.spark": "simhash_filter.batch.spark",
    "simhash_filter.dedup": "simhash_filter.batch.dedup",
    "simhash_filter.warc": "simhash_filter.batch.warc",
    "simhash_filter.backends": "simhash_filter.index.backends",
    "simhash_filter.explain": "simhash_filter.model.explain",
}


def follow(old: str, run_as_main: bool = False) -> ModuleType | None:
    """Warn that *old* moved; then run its new module as ``__main__`` (``python -m old``, for the one that has a
    command line: the Spark job) or put the new module in its place in ``sys.modules`` (an import of *old* gets the
    new module itself)."""
    new = MOVED[old]
    message = f"{old} moved to {new}; the old path is removed in simhash-filter {REMOVED_IN}"
    # Attributed to the old path's file when it runs as __main__ (so Python shows it), else to the code that
    # imported it (the import machinery's frames are skipped).
    warnings.warn(message, DeprecationWarning, stacklevel=2 if run_as_main else 3)
    if run_as_main:
        runpy.run_module(new, run_name="__main__", alter_sys=True)
        return None
    module = importlib.import_module(new)
    sys.modules[old] = module
    return module
