"""benchmarks/host_boilerplate.py: text seen on enough pages of one host is blanked there, and only there."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "host_boilerplate.py"
FOOTER = "Sitephrase newsletter and contact details of the county paper"


def page(url: str, body: str) -> dict[str, str]:
    return {"url": url, "html": f"<html><body><p>{body}</p><footer>{FOOTER}</footer></body></html>"}


def write_set(path: Path, rows: list[dict[str, str]]) -> None:
    path.mkdir()
    with gzip.open(path / "pages.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    with gzip.open(path / "truth.json.gz", "wt", encoding="utf-8") as f:
        json.dump({"pages": []}, f)


def run(*args: str | Path) -> list[str]:
    subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], check=True, capture_output=True, timeout=60)
    with gzip.open(Path(args[1]) / "pages.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["html"] for line in f]


def test_text_on_min_pages_of_a_host_is_blanked_on_that_host_only(tmp_path: Path) -> None:
    """The footer repeated on three pages of one host goes; each page's own text and the other host's footer stay."""
    rows = [page(f"http://a.example/{i}", f"Ownphrase{i} about the harbour wall") for i in range(3)]
    rows.append(page("http://b.example/1", "Ownphrase9 about the ferry"))
    write_set(tmp_path / "in", rows)
    out = run(tmp_path / "in", tmp_path / "out", "--min", "3")
    assert all(FOOTER not in html for html in out[:3])
    assert FOOTER in out[3]
    assert all(f"Ownphrase{i}" in out[i] for i in range(3))


def test_only_kept_pages_teach_when_a_dedup_output_is_given(tmp_path: Path) -> None:
    """With ``--kept``, pages a dedup flagged do not count: two kept pages are too few for ``--min 3``."""
    rows = [page(f"http://a.example/{i}", f"Ownphrase{i} about the harbour wall") for i in range(3)]
    write_set(tmp_path / "in", rows)
    decisions = tmp_path / "dedup.jsonl"
    flagged = [None, None, "http://a.example/0"]
    decisions.write_text("".join(json.dumps({"duplicate_of": d}) + "\n" for d in flagged), encoding="utf-8")
    out = run(tmp_path / "in", tmp_path / "out", "--min", "3", "--kept", decisions)
    assert all(FOOTER in html for html in out)
