"""``simhash-filter dedup --workers 1`` against the Rust MinHash peers gaoya and rensa (issue #27), alternated.

Each round runs every command once as a subprocess, in a rotated order, over the same uncompressed JSON Lines
file (the public set by default): this environment's ``simhash-filter dedup INPUT --output OUT --workers 1``, and
``PEERS_PYTHON SHARED/eval/peers.py METHOD INPUT OUT --extract selectolax --n 5 --threshold 0.5`` for each peer
(their own virtualenv, so that this one stays clean).  The figures are medians over the rounds of the CPU seconds
(user + sys of the whole process tree) and of the wall time; start-up and imports are included.  A peer whose
virtualenv or ``peers.py`` is missing is skipped with one line.  With ``--score`` the last round's outputs are
scored by ``SHARED/eval/score.py --set public --output OUT`` (precision, recall and F1 of the duplicate flags).

    python -m benchmarks.speed.bench_peers [--rounds 5] [--score] [--peers gaoya,rensa] [--input PAGES.jsonl[.gz]]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.benchlib import ROOT
from benchmarks.benchlib.data import open_file
from benchmarks.benchlib.measure import timed_run
from benchmarks.benchlib.report import make_parser

OURS = "simhash-filter"


def our_command() -> list[str]:
    """``simhash-filter`` of this environment (beside its python), else ``python -m simhash_filter``."""
    script = Path(sys.executable).parent / "simhash-filter"
    return [str(script)] if script.exists() else [sys.executable, "-m", "simhash_filter"]


def commands(args: argparse.Namespace, plain: Path, out_dir: Path) -> dict[str, tuple[list[str], Path]]:
    """The commands to time and the output each writes, by name (the peers whose virtualenv and script exist)."""
    ours = out_dir / "ours.jsonl"
    cmds = {OURS: ([*our_command(), "dedup", str(plain), "--output", str(ours), "--workers", "1"], ours)}
    script = args.shared / "eval" / "peers.py"
    for peer in [p for p in args.peers.split(",") if p]:
        if not args.peers_python.exists():
            print(f"skipped {peer}: no peers virtualenv at {args.peers_python}", file=sys.stderr)
            continue
        if not script.exists():
            print(f"skipped {peer}: no {script}", file=sys.stderr)
            continue
        out = out_dir / f"{peer}.jsonl"
        options = ["--extract", args.extract, "--n", str(args.n), "--threshold", str(args.threshold)]
        cmds[peer] = ([str(args.peers_python), str(script), peer, str(plain), str(out), *options], out)
    return cmds


def run_once(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + sys of the process tree) of a command that must succeed."""
    proc, used = timed_run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return used.wall, used.cpu


def score(shared: Path, output: Path, work: Path) -> dict[str, float] | None:
    """Precision, recall and F1 (in %) of an output on the public set, by ``score.py`` (None: it failed)."""
    script = shared / "eval" / "score.py"
    blob = work / f"{output.stem}.score.json"
    cmd = [sys.executable, str(script), "--set", "public", "--output", str(output), "--json", str(blob),
           "--work", str(work / "score")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not blob.exists():
        print(f"score.py failed on {output.name}: {proc.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    overall = next(iter(json.loads(blob.read_text()).values()))["overall"]
    return {key: 100 * overall[key] for key in ("precision", "recall", "f1")}


def main(argv: list[str] | None = None) -> int:
    ap = make_parser(__doc__, full=True)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of alternated runs (default 5)")
    ap.add_argument("--input", type=Path, help="JSON Lines pages, optionally .gz (default: SHARED's public set)")
    ap.add_argument("--peers", default="gaoya,rensa", help="peers.py methods to run (default gaoya,rensa)")
    ap.add_argument("--peers-python", type=Path, default=ROOT.parent / "peers-venv" / "bin" / "python",
                    help="the python of the peers' virtualenv (default ../peers-venv/bin/python)")  # fmt: skip
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared", help="the shared tree (default ../shared)")
    ap.add_argument("--extract", default="selectolax", help="the peers' text extractor (default selectolax)")
    ap.add_argument("--n", type=int, default=5, help="the peers' shingle size in words (default 5)")
    ap.add_argument("--threshold", type=float, default=0.5, help="the peers' Jaccard threshold (default 0.5)")
    ap.add_argument("--score", action="store_true", help="also P/R/F1 of each output by score.py --set public")
    args = ap.parse_args(argv)
    source = args.input or args.shared / "datasets" / "neardup-public" / "pages.jsonl.gz"
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")

    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        work = Path(tmp)
        plain = work / "pages.jsonl"  # every command reads the same uncompressed file (not timed)
        with open_file(source, "rb") as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst)
        pages = sum(1 for line in plain.open("rb") if line.strip())
        cmds = commands(args, plain, work)
        names = list(cmds)
        walls: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        load = os.getloadavg()[0]
        for r in range(args.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                wall, cpu = run_once(cmds[name][0])
                walls[name].append(wall)
                cpus[name].append(cpu)
                print(f"  round {r + 1}/{args.rounds} {name}: {cpu:.2f} CPU s, {wall:.2f} s", file=sys.stderr)
        scores = {n: score(args.shared, cmds[n][1], work) for n in names} if args.score else {}

    cpu = {n: statistics.median(v) for n, v in cpus.items()}
    wall = {n: statistics.median(v) for n, v in walls.items()}
    print(f"# dedup of {source.name} ({pages} pages), median of {args.rounds} alternated rounds; "
          f"load average {load:.2f} at the start, {os.cpu_count()} CPUs")  # fmt: skip
    head = "| command | CPU s | wall s | CPU ÷ simhash-filter's |"
    if args.score:
        head += " P | R | F1 |"
    print(head)
    print("| --- |" + " ---: |" * (head.count("|") - 2))
    for n in names:
        row = f"| {n} | {cpu[n]:.2f} | {wall[n]:.2f} | {cpu[n] / cpu[OURS]:.2f} |"
        if args.score:
            s = scores.get(n)
            row += " - | - | - |" if s is None else f" {s['precision']:.1f} | {s['recall']:.1f} | {s['f1']:.1f} |"
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
