"""End-to-end ``dedup`` speed over a whole page stream, against the baselines, alternated in one run.

Each command reads the same uncompressed JSON Lines file and writes one output line per input line;
the wall-clock time of the whole process is measured (start-up, imports and I/O included):

- ``simhash-filter``: ``simhash-filter dedup INPUT --output OUT`` (one process);
- ``simhash-filter --workers 2``: the same with two fingerprinting processes (reported apart: the
  baselines are single-process);
- ``simhash-pypi``: ``python ../shared/eval/baselines.py simhash INPUT OUT --k 3``;
- ``minhash``: ``python ../shared/eval/baselines.py minhash INPUT OUT``;
- with ``--baseline TREE``, also ``simhash-filter (baseline)``: ``python -m simhash_filter dedup`` run from another
  checkout of this repository (``PYTHONPATH=TREE``), e.g. the last release, to compare versions in one run.

Every repeat runs every command once, in a rotated order; figures are medians over ``--repeat`` runs.  One
untimed ``simhash-filter fingerprint`` comes first: a machine's first run builds the IDF cache (about 1 s, once).

    python -m benchmarks.speed.bench_dedup --repeat 3 [--input PAGES.jsonl[.gz]] [--baseline TREE] [--json OUT.json]

Each command's CPU seconds (user + sys of its whole process tree) are measured too. Targets: at least 3x less
CPU than the simhash baseline and 2x less than the minhash baseline.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.benchlib import ROOT
from benchmarks.benchlib.data import PUBLIC_PAGES, SHARED, open_file, read_jsonl
from benchmarks.benchlib.measure import timed_run
from benchmarks.benchlib.report import make_parser, write_json

DEFAULT_INPUT = PUBLIC_PAGES
BASELINES = SHARED / "eval" / "baselines.py"
CLI_MODULE = ROOT / "simhash_filter" / "cli" / "main.py"
BASELINE = "simhash-filter (baseline)"


def our_command() -> list[str]:
    """``simhash-filter`` from the environment's scripts, else ``python -m simhash_filter``."""
    script = Path(sys.executable).parent / "simhash-filter"
    if script.exists():
        return [str(script)]
    found = shutil.which("simhash-filter")
    return [found] if found else [sys.executable, "-m", "simhash_filter"]


def commands(input_path: Path, out_dir: Path, workers: int, baseline: Path | None = None) -> dict[str, list[str]]:
    ours = our_command()
    cmds = {
        "simhash-filter": [*ours, "dedup", str(input_path), "--output", str(out_dir / "ours.jsonl"), "--workers", "1"],
        "simhash-pypi": [
            sys.executable,
            str(BASELINES),
            "simhash",
            str(input_path),
            str(out_dir / "simhash.jsonl"),
            "--k",
            "3",
        ],
        "minhash": [sys.executable, str(BASELINES), "minhash", str(input_path), str(out_dir / "minhash.jsonl")],
    }
    if baseline is not None:
        out = out_dir / "baseline.jsonl"
        cmds[BASELINE] = [sys.executable, "-m", "simhash_filter", "dedup", str(input_path), "--output", str(out)]
    if workers > 1:
        cmds[f"simhash-filter --workers {workers}"] = [
            *ours,
            "dedup",
            str(input_path),
            "--output",
            str(out_dir / f"ours-w{workers}.jsonl"),
            "--workers",
            str(workers),
        ]
    return cmds


def output_path(cmd: list[str]) -> Path:
    if "--output" in cmd:
        return Path(cmd[cmd.index("--output") + 1])
    return Path(cmd[4])  # baselines.py METHOD INPUT OUTPUT


def check_output(path: Path, lines: int) -> int:
    """Number of pages flagged as duplicates; fail if the output does not have one line per input line."""
    rows = list(read_jsonl(path))
    if len(rows) != lines:
        raise SystemExit(f"{path}: {len(rows)} output lines for {lines} input lines")
    return sum(r.get("duplicate_of") is not None for r in rows)


def wait_for_cli(seconds: float) -> None:
    """The command line is written concurrently: wait for simhash_filter/cli/main.py to exist."""
    deadline = time.monotonic() + seconds
    while not CLI_MODULE.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{CLI_MODULE} does not exist (waited {seconds:.0f} s)")
        time.sleep(5)


def run_once(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[float, float]:
    """Seconds from the command's start to its exit, and CPU seconds (user + sys) of its whole process tree (it
    must succeed)."""
    proc, used = timed_run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return used.wall, used.cpu


def main(argv: list[str] | None = None) -> int:
    ap = make_parser(__doc__, full=True)
    ap.add_argument("--input", type=Path, default=DEFAULT_INPUT, help="JSON Lines page stream, optionally .gz")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="also time simhash-filter with N workers (default: 2)")
    ap.add_argument("--wait-cli", type=float, default=0, help="seconds to wait for simhash_filter/cli/main.py")
    ap.add_argument("--baseline", type=Path, help="also time `python -m simhash_filter dedup` from this checkout")
    ap.add_argument("--json", type=Path, help="also write the results as JSON")
    args = ap.parse_args(argv)
    wait_for_cli(args.wait_cli)
    if not BASELINES.exists():
        raise SystemExit(f"baselines not found: {BASELINES}")

    with tempfile.TemporaryDirectory(prefix="bench-dedup-") as tmp:
        tmp_dir = Path(tmp)
        # The baselines read plain JSON Lines: every command gets the same uncompressed file (not timed).
        plain = tmp_dir / "pages.jsonl"
        with open_file(args.input, "rb") as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst)
        lines = sum(1 for x in plain.open(encoding="utf-8") if x.strip())
        mb = plain.stat().st_size / 1e6
        baseline = args.baseline.resolve() if args.baseline else None
        if baseline is not None and not (baseline / "simhash_filter" / "__init__.py").exists():
            raise SystemExit(f"--baseline {baseline}: no simhash_filter package there")
        cmds = commands(plain, tmp_dir, args.workers, baseline)
        # `python -m` puts its working directory first on sys.path: the baseline runs from its own tree.
        envs = {n: {**os.environ, "PYTHONPATH": str(baseline)} if n == BASELINE else None for n in cmds}
        cwds = {n: baseline if baseline and n == BASELINE else ROOT for n in cmds}
        # Not timed: the first run on a machine builds the IDF cache (~/.cache/simhash-filter, about 1 s, once).
        warm = tmp_dir / "warm-up.html"
        words = " ".join(f"estuary harrier {i} 社区图书馆" for i in range(20))
        warm.write_text(f"<p>{words}</p>", encoding="utf-8")
        run_once([*our_command(), "fingerprint", str(warm)])
        names = list(cmds)
        times: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        flagged: dict[str, int] = {}
        load_before = os.getloadavg()
        print(f"{lines} pages, {mb:.1f} MB; load average {load_before[0]:.2f}", file=sys.stderr)
        for r in range(args.repeat):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                t, cpu = run_once(cmds[name], envs[name], cwds[name])
                times[name].append(t)
                cpus[name].append(cpu)
                flagged[name] = check_output(output_path(cmds[name]), lines)
                print(f"  repeat {r + 1}/{args.repeat} {name}: {t:.2f} s, {cpu:.2f} CPU s", file=sys.stderr, flush=True)
        load_after = os.getloadavg()

    med = {n: statistics.median(v) for n, v in times.items()}
    med_cpu = {n: statistics.median(v) for n, v in cpus.items()}
    ours_cpu = med_cpu["simhash-filter"]
    print(f"# dedup over {args.input.name}: {lines} pages, {mb:.1f} MB, median of {args.repeat} (alternated)")
    if args.baseline:
        print(f"baseline: {args.baseline.resolve()}")
    print("| command | wall s | CPU s | pages/s | pages per CPU s | flagged | CPU s ÷ simhash-filter's (1 process) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in names:
        print(
            f"| {n} | {med[n]:.2f} | {med_cpu[n]:.2f} | {lines / med[n]:.0f} | {lines / med_cpu[n]:.0f} | {flagged[n]} "
            f"| {med_cpu[n] / ours_cpu:.2f} |"
        )
    goals = [
        {
            "target": ">= 3x less CPU than simhash-pypi",
            "value": round(med_cpu["simhash-pypi"] / ours_cpu, 2),
            "met": med_cpu["simhash-pypi"] / ours_cpu >= 3,
        },
        {
            "target": ">= 2x less CPU than minhash",
            "value": round(med_cpu["minhash"] / ours_cpu, 2),
            "met": med_cpu["minhash"] / ours_cpu >= 2,
        },
    ]
    print("\n### Targets (simhash-filter, one process, CPU seconds of the whole process tree)")
    for g in goals:
        print(f"- {g['target']}: {g['value']}x -> {'met' if g['met'] else 'NOT met'}")
    print(f"\nload average before/after: {load_before[0]:.2f} / {load_after[0]:.2f} on {os.cpu_count()} CPUs")
    if args.json:
        blob = {
            "command": " ".join(sys.argv),
            "input": str(args.input),
            "pages": lines,
            "mb": mb,
            "repeat": args.repeat,
            "commands": {n: " ".join(c) for n, c in cmds.items()},
            "baseline": str(args.baseline.resolve()) if args.baseline else None,
            "runs_s": times,
            "median_s": med,
            "runs_cpu_s": cpus,
            "median_cpu_s": med_cpu,
            "flagged": flagged,
            "targets": goals,
            "environment": {
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "load_before": load_before,
                "load_after": load_after,
            },
        }
        write_json(args.json, blob, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
