"""The crowd of look-alike pages through the index alone (issue 39): CPU seconds per check of the index, crowd beside
distinct pages of the same template, with the fingerprinting left out.

``bench_crowd`` times whole ``dedup`` runs (parsing and fingerprinting included); this script fingerprints the
crowd and the distinct pages once (``devsites/crowd.py``: ``--pages`` look-alikes of one real template, then
as many distinct pages of it; cached in ``--cache``), then times ``check_and_add`` of every page into a fresh
index (``memory://``, ``file://`` in a temporary directory), ``--rounds`` times each, and reports the median CPU
microseconds per check (process time), the crowd ÷ distinct ratio of pages per CPU s, and the pages kept (every
crowd page is distinct: all are kept).  ``--digest`` prints a hash of every decision and every table's refusals,
to compare two trees.

    python -m benchmarks.scale.bench_crowd_index [--pages 20000] [--parts memory,file] [--rounds 3]
                                                 [--cache /tmp/crowd-fps.npz] [--json out.json]
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.benchlib.report import make_parser, write_json
from devsites import crowd
from simhash_filter import DEFAULTS, fingerprint, open_index


def pages(path: Path, n: int, template: str) -> dict[str, tuple[list[int], list[bytes]]]:
    """The fingerprints and sketches of the crowd and of the distinct pages, cached in *path*."""
    if path.exists():
        data = np.load(path)
        if int(data["pages"]) == n:
            return {
                kind: (data[f"{kind}_fps"].tolist(), [bytes(row) for row in data[f"{kind}_sketches"]])
                for kind in ("crowd", "distinct")
            }
    _, page = crowd.template(template)
    arrays: dict[str, Any] = {"pages": n}
    out = {}
    for kind in ("crowd", "distinct"):
        fps, sketches = [], []
        for h in crowd.crowd(page, n, distinct=kind == "distinct"):
            fp = fingerprint(h)
            fps.append(fp.value)
            sketches.append(fp.sketch)
        arrays[f"{kind}_fps"] = np.array(fps, dtype=np.uint64)
        arrays[f"{kind}_sketches"] = np.frombuffer(b"".join(sketches), dtype=np.uint8).reshape(n, -1)
        out[kind] = (fps, sketches)
    np.savez(path, **arrays)
    return out


def run(part: str, fps: list[int], sketches: list[bytes], workdir: Path) -> dict[str, Any]:
    """Every page checked and added into a fresh index: CPU µs per check, pages kept, decisions' digest."""
    uri = "memory://" if part == "memory" else f"file://{tempfile.mkdtemp(dir=workdir)}/idx"
    index = open_index(DEFAULTS, uri)
    digest = hashlib.sha256()
    kept = 0
    try:
        start = time.process_time()
        for i, (fp, sketch) in enumerate(zip(fps, sketches, strict=True)):
            match = index.check_and_add(fp, f"https://crowd.example/page/{i}", sketch)
            if match is None:
                kept += 1
            else:
                digest.update(f"{i} {match.key} {match.distance}\n".encode())
        cpu = time.process_time() - start
        refusals = getattr(getattr(index.backend, "_store", None), "refusals", None)
        if refusals is not None:
            digest.update(np.ascontiguousarray(refusals[: len(fps)]).tobytes())
    finally:
        index.close()
    return {"cpu_us_per_check": 1e6 * cpu / len(fps), "kept": kept, "digest": digest.hexdigest()[:16]}


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--parts", default="memory,file")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--template", default="kb.techcorner.example")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "crowd-fps.npz")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    data = pages(args.cache, args.pages, args.template)
    out: dict[str, Any] = {"pages": args.pages}
    with tempfile.TemporaryDirectory(prefix="bench-crowd-index-") as tmp:
        for part in [p for p in args.parts.split(",") if p]:
            rounds: dict[str, list[dict[str, Any]]] = {"crowd": [], "distinct": []}
            for _ in range(args.rounds):
                for kind in rounds:  # side by side, round after round
                    rounds[kind].append(run(part, *data[kind], Path(tmp)))
            row: dict[str, Any] = {}
            for kind, rs in rounds.items():
                row[kind] = {
                    "cpu_us_per_check_median": statistics.median(r["cpu_us_per_check"] for r in rs),
                    "rounds": [round(r["cpu_us_per_check"], 1) for r in rs],
                    "kept": rs[0]["kept"],
                    "digest": rs[0]["digest"],
                }
            row["crowd_vs_distinct_us"] = (
                row["crowd"]["cpu_us_per_check_median"] - row["distinct"]["cpu_us_per_check_median"]
            )
            out[part] = row
            print(f"{part}: {json.dumps(row)}", file=sys.stderr, flush=True)
    if args.json:
        write_json(args.json, out)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
