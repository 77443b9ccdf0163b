"""The golden-fingerprint check (benchmarks/checks/golden.py): identical code passes, a changed model fails."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = "benchmarks.checks.golden"


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", GOLDEN, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


def test_check_passes_on_the_code_that_built_it_and_names_what_differs(tmp_path: Path) -> None:
    """``check`` right after ``build`` finds every page identical; an entry changed in the file (as a
    change of the code would) makes it fail and name that page."""
    golden = tmp_path / "golden.json.gz"
    built = run("build", golden, "--limit", "40")
    assert built.returncode == 0, built.stderr
    checked = run("check", golden, "--limit", "40")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "identical" in checked.stdout

    with gzip.open(golden, "rt", encoding="utf-8") as f:
        data = json.load(f)
    key = next(iter(data["entries"]))
    data["entries"][key][0] = "0" * 16
    with gzip.open(golden, "wt", encoding="utf-8") as f:
        json.dump(data, f)
    changed = run("check", golden, "--limit", "40")
    assert changed.returncode == 1
    assert f"differs: {key}" in changed.stdout
