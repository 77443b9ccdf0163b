"""A crowd of look-alike pages through every engine (issue 39): is a check bounded when thousands of pages are
candidates of each other and never verify, and is a real near-duplicate of one of them still found?

The crowd (``benchmarks/data/crowd.py``): ``--pages`` distinct pages of one real documentation template (every text
node's words replaced by the template's own words), then a near-duplicate of the crowd pages ``--near``.  Each
engine runs ``simhash-filter dedup --workers 1`` over it:

- ``memory``, ``file``: pages per CPU second of the child, beside as many distinct pages of the same template
  (every word replaced by a made-up one: the same size and structure, fingerprints anywhere) through the same
  engine;
- ``redis``: one real ``redis-server`` (``tests/redis_server.py``) with every command logged: the server's time per
  ``EVALSHA`` (one check) p50, p99 and max (targets p99 <= 1 ms, max <= 5 ms) and its mean over every call;
- every engine: the pages kept (the crowd's are all distinct: all must be kept) and, for each near-duplicate,
  the page it was found to duplicate (its crowd page: found).

    python -m benchmarks.scale.bench_crowd [--pages 20000] [--near 0,100,10000,19999] [--parts memory,file,redis]
                                           [--expected-pages N] [--json out.json]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.benchlib.report import make_parser, write_json
from benchmarks.speed import bench_flood
from devsites import crowd

PARTS = ("memory", "file", "redis")


def decisions(path: Path) -> dict[str, Any]:
    """The pages kept, and what each near-duplicate was found to duplicate."""
    kept, twins = 0, {}
    with path.open(encoding="utf-8") as f:
        for row in map(json.loads, f):
            if row["url"].startswith("https://mirror.example/"):
                twins[row["url"].rsplit("/", 1)[1]] = row["duplicate_of"]
            elif row["duplicate_of"] is None:
                kept += 1
    return {"crowd_kept": kept, "twins": twins}


def run_engine(
    part: str, source: Path, pages: int, workdir: Path, name: str, timeout: float, extra: list[str]
) -> dict[str, Any]:
    """*source* through ``dedup`` with *part*'s index."""
    output = workdir / f"{name}.{part}.out.jsonl"
    index = None
    if part == "file":
        index = f"file://{workdir / (name + '.idx')}"
    run = bench_flood.run_child(
        bench_flood.dedup_cmd(source, output, index, extra),
        env=bench_flood.python_env(),
        timeout=timeout,
        output=output,
    )
    row = bench_flood.median_run([run], pages)
    if run.rc == 0:
        row.update(decisions(output))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--near", default="0,100,10000,19999")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--template", default="kb.techcorner.example")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--expected-pages", type=int, default=0, help="dedup's --expected-pages (default: its own)")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    near = [int(x) for x in args.near.split(",") if x and int(x) < args.pages]
    out: dict[str, Any] = {"pages": args.pages, "near": near, "expected_pages": args.expected_pages or None}
    extra = ["--expected-pages", str(args.expected_pages)] if args.expected_pages else []
    with tempfile.TemporaryDirectory(prefix="bench-crowd-") as tmp:
        workdir = Path(tmp)
        source = workdir / "crowd.jsonl"
        out["template"], _ = crowd.write(source, args.pages, near, args.template)
        total = args.pages + len(near)
        for part in parts:
            if part == "redis":
                row = bench_flood.redis_part(
                    ["crowd"], total, workdir, args.timeout, sources={"crowd": source}, extra=extra
                )
                row = row.get("crowd", row)
                if "error" not in row:
                    row.update(decisions(workdir / "crowd.redis.out.jsonl"))
                out["redis"] = row
            else:
                row = run_engine(part, source, total, workdir, "crowd", args.timeout, extra)
                distinct = workdir / "distinct.jsonl"
                if not distinct.exists():
                    crowd.write(distinct, args.pages, [], args.template, distinct=True)
                base = run_engine(part, distinct, args.pages, workdir, "distinct", args.timeout, extra)
                if "pages_per_cpu_s" in row and "pages_per_cpu_s" in base:
                    row["rate_vs_distinct"] = row["pages_per_cpu_s"] / base["pages_per_cpu_s"]
                out[part] = {"crowd": row, "distinct": base}
            print(f"{part}: {json.dumps(out[part], default=str)[:2000]}", file=sys.stderr, flush=True)
    if args.json:
        write_json(args.json, out, default=str)
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
