"""benchmarks/quick.py (what ``make bench`` runs): every benchmark script of the quick tier runs to its end at a
tiny size, as a module of the ``benchmarks`` package."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_tier_runs_every_step() -> None:
    """Each step exits 0 and the runner says so at the end."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.quick"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    assert "bench quick: every step ran" in proc.stdout


def test_every_benchmark_is_a_package_module_without_path_edits() -> None:
    """No script under benchmarks/ edits sys.path (they run as ``python -m benchmarks.<part>.<script>``), and each
    one is listed in benchmarks/README.md."""
    readme = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert "sys.path.insert" not in text and "sys.path[:0]" not in text, path
        if path.parent.name != "benchlib":
            assert f"`{path.relative_to(ROOT / 'benchmarks').as_posix()}`" in readme, f"{path} not in the README"


def test_every_docs_page_the_benchmarks_readme_names_quotes_its_script() -> None:
    """A page in the "quoted in" column of benchmarks/README.md names the script of its row (a moved or renamed
    script, or a figure that left the page, shows up here)."""
    readme = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([^`]+\.py)` \|.*\| ([^|]*) \|$", readme, re.MULTILINE)
    assert len(rows) > 30
    for script, pages in rows:
        for page in filter(None, (p.strip() for p in pages.split(","))):
            text = (ROOT / page).read_text(encoding="utf-8")
            assert Path(script).stem in text, f"{page} does not name {script}"
