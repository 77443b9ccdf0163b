"""The crowd of look-alike pages through the index alone (issue 39): CPU seconds per check of the index, crowd beside
distinct pages of the same template, with the fingerprinting left out.

``bench_crowd`` times whole ``dedup`` runs (parsing and fingerprinting included); this script fingerprints the
crowd and the distinct pages once (``devsites/crowd.py``: ``--pages`` look-alikes of one real template, then
as many distinct pages of it; cached in ``--cache``), then times ``check_and_add`` of every page into a fresh
index (``memory://``, ``file://`` in a temporary directory, ``redis``: one real ``redis-server``), ``--rounds``
times each, and reports the median CPU microseconds per check (process time), the crowd ÷ distinct ratio of pages
per CPU s, and the pages kept (every crowd page is distinct: all are kept); for ``redis``, the server's time per
check (``EVALSHA``, every command logged in ``SLOWLOG``): p50, p99 and the slowest, medians over the rounds.  Each
row has a hash of every decision (and, in memory, every table's refusals), to compare two trees.

    python -m benchmarks.scale.bench_crowd_index [--pages 20000] [--parts memory,file,redis] [--rounds 3]
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
from devsites.redis_server import RedisServer
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


#: Server calls of at least this many µs are logged (SLOWLOG): the checks of a crowd, and few of the commands a
#: script calls (all of them would be 50 or more a check); a percentile of 0 means "less than this".
_LOGGED_US = 50


def run(part: str, fps: list[int], sketches: list[bytes], workdir: Path) -> dict[str, Any]:
    """Every page checked and added into a fresh index: CPU µs per check, pages kept, decisions' digest (and, for
    ``redis``, the server's µs per check)."""
    if part == "redis":
        with RedisServer(Path(tempfile.mkdtemp(dir=workdir))) as server:
            with server.client() as client:
                client.config_set("slowlog-max-len", 4 * len(fps) + 1000)
                client.config_set("slowlog-log-slower-than", _LOGGED_US)
            row = _checks(f"{server.url}?prefix=crowd", fps, sketches)
            with server.client() as client:
                calls = client.slowlog_get(4 * len(fps) + 1000)
            slow = sorted(e["duration"] for e in calls if e["command"][:7].lower() == b"evalsha")
            every = [0] * (len(fps) - len(slow)) + slow  # one call a check; those not logged took less
            row["server_us_p50_p99_max"] = [every[len(every) // 2], every[int(0.99 * (len(every) - 1))], every[-1]]
            return row
    return _checks("memory://" if part == "memory" else f"file://{tempfile.mkdtemp(dir=workdir)}/idx", fps, sketches)


def _checks(uri: str, fps: list[int], sketches: list[bytes]) -> dict[str, Any]:
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
                if "server_us_p50_p99_max" in rs[0]:
                    row[kind]["server_us_p50_p99_max"] = [
                        statistics.median(r["server_us_p50_p99_max"][i] for r in rs) for i in range(3)
                    ]
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
