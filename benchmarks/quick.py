"""Every benchmark at a tiny size, end to end: ``make bench`` (and tests/test_bench_quick.py) runs this.

A step is a module run as ``python -m`` from the repository root with arguments small enough that the whole
quick tier takes well under a minute; it checks that each script still runs, not how fast anything is (the
docs' figures come from the full-size commands beside them).  ``--tier all`` adds the slower scripts (the
sharded Redis fleet, the scale designs, the stage profile) at tiny sizes too.  Scripts that crawl, start Spark or
Scrapyd, or need the peers' virtualenv run only at full size (their tests run them small: tests/test_bench_crawl.py,
tests/test_floods.py, tests/test_spark.py, ...).

    python -m benchmarks.quick [--tier quick|all] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time

from benchmarks.benchlib import ROOT
from benchmarks.benchlib.data import PUBLIC_SET

#: The steps that read the public set (``../shared/datasets``, beside a checkout of this team, not in a user's clone):
#: skipped, with that reason, where it is absent.
NEEDS_PUBLIC_SET = frozenset({
    "benchmarks.speed.bench_sketch", "benchmarks.speed.bench_core", "benchmarks.speed.bench_fingerprint",
    "benchmarks.speed.bench_prose", "benchmarks.speed.bench_text_kinds", "benchmarks.speed.bench_two_stage",
    "benchmarks.speed.bench_serve", "benchmarks.scale.bench_redis", "benchmarks.scale.bench_scale",
    "benchmarks.scale.bench_sharded", "benchmarks.accuracy.invariance", "benchmarks.profiling.callgrind_fingerprint",
    "benchmarks.profiling.profile_stages", "benchmarks.checks.golden", "benchmarks.scale.bench_disk",
})  # fmt: skip

#: (tier, module, arguments); ``{tmp}`` is a scratch directory shared by the steps, in this order.
STEPS: list[tuple[str, str, str]] = [
    ("quick", "devsites.sample", "{tmp}/sample.jsonl --articles 10"),
    ("quick", "benchmarks.data.make_pairs", "{tmp}/pages.jsonl {tmp}/labels.jsonl --articles 10"),
    ("quick", "benchmarks.data.make_warc", "{tmp}/sample.warc.gz --bytes 1e6 --pages {tmp}/sample.jsonl"),
    ("quick", "devsites.floods", "template 200 {tmp}/flood.jsonl"),
    ("quick", "simhash_filter", "dedup {tmp}/sample.jsonl --output {tmp}/sample.dedup.jsonl"),
    ("quick", "benchmarks.data.demo_report", "{tmp}/sample.jsonl {tmp}/sample.dedup.jsonl"),
    ("quick", "benchmarks.speed.bench_sketch", "--pages 50 --repeat 1"),
    ("quick", "benchmarks.speed.bench_core", "--pages 50 --repeat 1 --json {tmp}/core.json"),
    (
        "quick",
        "benchmarks.speed.bench_fingerprint",
        "--pages 20 --big-pages 2 --repeat 1 --methods simhash-filter,lxml-text --json {tmp}/fingerprint.json",
    ),
    ("quick", "benchmarks.speed.bench_prose", "--limit 20 --repeat 1"),
    ("quick", "benchmarks.speed.bench_text_kinds", "--pages 20 --repeat 1 --json {tmp}/kinds.json"),
    ("quick", "benchmarks.speed.bench_nesting", "--scale 0.01 --repeat 1 --json {tmp}/nesting.json"),
    (
        "quick",
        "benchmarks.speed.bench_index",
        "--sizes 10000 --queries 500 --repeat 1 --no-simhash --json {tmp}/i.json",
    ),
    ("quick", "benchmarks.speed.bench_two_stage", "--sizes 10000 --queries 500 --json {tmp}/two_stage.json"),
    (
        "quick",
        "benchmarks.speed.bench_file_index",
        "--sizes 10000 --queries 500 --repeat 1 --dir {tmp} --json {tmp}/f.json",
    ),
    ("quick", "benchmarks.speed.bench_run_checks", "--rows 20000 --pages 100000 --checks 500 --json {tmp}/runs.json"),
    (
        "quick",
        "benchmarks.speed.bench_flood",
        "--pages 300 --repeat 1 --parts dedup --no-public --json {tmp}/flood.json",
    ),
    ("all", "benchmarks.speed.bench_serve", "--pages 40 --parts throughput,kill --json {tmp}/serve.json"),
    ("quick", "benchmarks.scale.bench_disk", "build --size 20000 --dir {tmp}/disk"),
    ("quick", "benchmarks.scale.bench_disk", "check --dir {tmp}/disk --checks 200"),
    ("quick", "benchmarks.scale.bench_redis", "--only shared --size 5000 --checks 100 --repeat 1 --articles 0"),
    ("quick", "benchmarks.accuracy.invariance", "--limit 20"),
    ("quick", "benchmarks.accuracy.bench_extract", "--sets '' --json {tmp}/extract.json"),
    ("quick", "benchmarks.profiling.callgrind_fingerprint", "warm --pages 10"),
    ("quick", "benchmarks.checks.golden", "build {tmp}/golden.json.gz --limit 20"),
    ("quick", "benchmarks.checks.golden", "check {tmp}/golden.json.gz --limit 20"),
    ("quick", "benchmarks.checks.sharded_race_model", "--processes 2"),
    ("all", "benchmarks.scale.bench_scale", "designs --sizes 10000 --json {tmp}/scale.json"),
    ("all", "benchmarks.scale.bench_sharded", "--size 2000 --checks 100 --json {tmp}/sharded.json"),
    ("all", "benchmarks.scale.bench_crowd", "--pages 300 --near 0,299 --json {tmp}/crowd.json"),
    ("all", "benchmarks.profiling.profile_stages", "--json {tmp}/stages.json"),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--tier", choices=("quick", "all"), default="quick", help="quick (default) or all")
    ap.add_argument("--only", default="", help="only the steps whose module contains this")
    args = ap.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    skipped = 0
    with tempfile.TemporaryDirectory(prefix="bench-quick-") as tmp:
        for tier, module, arguments in STEPS:
            if (tier == "all" and args.tier != "all") or args.only not in module:
                continue
            if module in NEEDS_PUBLIC_SET and not PUBLIC_SET.is_dir():
                print(f"== python -m {module}: skipped, it reads the public set ({PUBLIC_SET} is absent)", flush=True)
                skipped += 1
                continue
            words = [w.replace("{tmp}", tmp) for w in shlex.split(arguments)]
            print(f"== python -m {module} {arguments}", flush=True)
            step = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", module, *words], cwd=ROOT, env=env)
            if proc.returncode:
                print(f"FAILED ({proc.returncode}): python -m {module} {arguments}", file=sys.stderr)
                return proc.returncode
            print(f"   ({time.perf_counter() - step:.1f} s)", flush=True)
    but = f", but {skipped} that need the public set" if skipped else ""
    print(f"bench {args.tier}: every step ran{but} ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
