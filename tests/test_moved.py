"""Old paths of moved modules (simhash_filter/_moved.py): each imports as the module it moved to and the Spark job
runs with ``python -m simhash_filter.spark`` as before, each with a DeprecationWarning that names the new path and
the release that removes the old one."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simhash_filter._moved import MOVED, REMOVED_IN

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("old", sorted(MOVED))
def test_the_old_path_imports_the_new_module_with_a_warning(old: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``import old`` warns (naming the new path and the release) and gives the new module itself, so that
    classes and functions are the same objects (a ``SIMHASH_BACKENDS`` subclass of the old ``Backend`` too)."""
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {MOVED[old]}; .* {REMOVED_IN}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])


def test_the_documented_names_of_the_old_paths_still_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    """The names the docs gave under the old paths: ``simhash_filter.backends.Backend`` and ``BACKENDS_BASE``
    (``SIMHASH_BACKENDS``)."""
    from simhash_filter.index.backends import BACKENDS_BASE, Backend

    monkeypatch.delitem(sys.modules, "simhash_filter.backends", raising=False)
    with pytest.warns(DeprecationWarning):
        from simhash_filter.backends import BACKENDS_BASE as old_base
        from simhash_filter.backends import Backend as OldBackend
    assert OldBackend is Backend and old_base is BACKENDS_BASE


@pytest.mark.slow
def test_python_m_simhash_filter_spark_runs_the_job(tmp_path: Path) -> None:
    """``python -m simhash_filter.spark INPUT --output OUT`` (the command the docs gave before the move) runs the
    Spark job: its output and summary line as ``python -m simhash_filter.batch.spark``, and the warning on stderr."""
    page = "<html><body><article>" + "<p>The harbour ferry timetable changes on Monday morning.</p>" * 8
    rows = [{"url": f"https://a.example/{i}", "html": page} for i in range(3)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    cmd = [sys.executable, "-m", "simhash_filter.spark", str(tmp_path / "in.jsonl"), "--output", str(out),
           "--master", "local[1]"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "DeprecationWarning: simhash_filter.spark moved to simhash_filter.batch.spark" in proc.stderr
    assert "3 pages" in proc.stderr and "1 kept, 2 near-duplicates" in proc.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == 3
