"""The Spark job (``simhash_filter.batch.spark``) in local mode: its scaling from one core to two, beside one machine's
``dedup``, and its time on floods of near-duplicates beside the same number of distinct pages.

``scaling``: the public stream (``--copies`` copies of it, each copy's URLs suffixed ``#copy-N``, so that the
corpus is larger; a copy's pages are near-duplicates of the first copy's) through ``spark-dedup`` with
``local[1]`` and ``local[2]``, alternated ``--repeat`` times, and through ``simhash-filter dedup --workers 1``; wall
seconds (the Spark session's start included) and pages/s; the outputs must be identical.

``flood``: ``--pages`` pages of each kind through ``spark-dedup`` on ``--master``, the kinds alternated
``--repeat`` times (with ``--baseline TREE``, also another checkout's job, e.g. the self-join of an earlier
version, alternated with them): ``counter``, one fixture article of devsites/pages.py whose view counter, date and
session id change on every page; ``words``, 300 words drawn from 19 (every page a near-duplicate of every other);
``distinct``, the same template with a different random 40-word text (wordfreq's 5,000 most frequent English words).
Each output is compared with ``simhash-filter dedup``'s of the same corpus (not timed, once).

    python -m benchmarks.scale.bench_spark scaling [--copies 4] [--repeat 3]
    python -m benchmarks.scale.bench_spark flood [--pages 20000] [--repeat 3] [--master local[2]] [--baseline TREE]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.benchlib import ROOT
from benchmarks.benchlib.data import PUBLIC_PAGES, read_jsonl
from benchmarks.benchlib.report import make_parser, write_json


def _corpus(path: Path, copies: int) -> int:
    rows = list(read_jsonl(PUBLIC_PAGES))
    with path.open("w", encoding="utf-8") as out:
        for copy in range(copies):
            for row in rows:
                url = row["url"] if copy == 0 else f"{row['url']}#copy-{copy}"
                out.write(json.dumps({"url": url, "html": row["html"]}, ensure_ascii=False) + "\n")
    return copies * len(rows)


def _run(cmd: list[str], tree: Path = ROOT) -> float:
    start = time.perf_counter()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    if tree != ROOT:  # `python -m` puts the working directory first on sys.path; the executors get PYTHONPATH
        env["PYTHONPATH"] = str(tree)
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def scaling(copies: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        pages = _corpus(corpus, copies)
        runs: dict[str, list[float]] = {"local[1]": [], "local[2]": [], "dedup --workers 1": []}
        outputs: dict[str, Path] = {name: Path(tmp) / f"{i}.jsonl" for i, name in enumerate(runs)}
        for r in range(repeat):
            names = list(runs)[r % 3 :] + list(runs)[: r % 3]
            for name in names:
                out = outputs[name]
                out.unlink(missing_ok=True)
                if name.startswith("local"):
                    cmd = [sys.executable, "-m", "simhash_filter.batch.spark", str(corpus), "--output", str(out),
                           "--master", name]  # fmt: skip
                else:
                    cmd = [sys.executable, "-m", "simhash_filter", "dedup", str(corpus), "--output", str(out),
                           "--workers", "1", "--no-progress"]  # fmt: skip
                runs[name].append(_run(cmd))
                print(f"  {name}: {runs[name][-1]:.1f} s", file=sys.stderr, flush=True)
        texts = {name: path.read_bytes() for name, path in outputs.items()}
        identical = len(set(texts.values())) == 1
    med = {name: statistics.median(v) for name, v in runs.items()}
    print(f"# spark-dedup scaling: {pages} pages ({copies} copies of the public stream), median of {repeat}")
    print("| run | wall s | pages/s |")
    print("| --- | ---: | ---: |")
    for name, seconds in med.items():
        print(f"| {name} | {seconds:.1f} | {pages / seconds:.0f} |")
    print(f"\nlocal[1] -> local[2]: {med['local[1]'] / med['local[2]']:.2f}x; outputs identical: {identical}")
    return {"pages": pages, "median_s": med, "runs_s": runs, "identical": identical}


#: The 19 words of the ``words`` flood.
FLOOD_WORDS = (
    "river stone lantern copper meadow harbor violet ember cedar falcon orbit quartz willow tundra saddle beacon "
    "marble pepper thistle"
).split()


def _flood_corpus(path: Path, kind: str, n: int) -> None:
    """*n* pages of one kind (see the module) as JSON Lines."""
    import random

    from devsites.pages import RAINWATER, Article, Counter, gazette

    rng = random.Random(7)
    vocabulary: list[str] = []
    if kind == "distinct":
        import wordfreq

        vocabulary = wordfreq.top_n_list("en", 5000)
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            if kind == "counter":
                stamp = f"2024-05-{1 + i % 28:02d} 08:{i % 60:02d}:07"
                page = gazette(RAINWATER, counter=Counter(1000 + i, stamp, f"{rng.getrandbits(64):016x}"))
            elif kind == "words":
                page = f"<html><body><p>{' '.join(rng.choice(FLOOD_WORDS) for _ in range(300))}</p></body></html>"
            else:
                text = " ".join(rng.choice(vocabulary) for _ in range(40))
                page = gazette(Article(f"Notes {i}", "Ada Field", "3 May 2024", (text,)))
            out.write(json.dumps({"url": f"https://{kind}.example/{i}", "html": page}) + "\n")


def flood(n: int, repeat: int, master: str, baseline: Path | None) -> dict:
    kinds = ["counter", "words", "distinct"]
    trees = {"": ROOT, **({" (baseline)": baseline.resolve()} if baseline else {})}
    runs: dict[str, list[float]] = {f"{kind}{tag}": [] for tag in trees for kind in kinds}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-spark-flood-") as tmp:
        corpora = {kind: Path(tmp) / f"{kind}.jsonl" for kind in kinds}
        identical: dict[str, bool] = {}
        for kind, path in corpora.items():
            _flood_corpus(path, kind, n)
        names = list(runs)
        for r in range(repeat):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                kind, _, tag = name.partition(" ")
                out = Path(tmp) / f"{name}.out.jsonl"
                out.unlink(missing_ok=True)
                cmd = [sys.executable, "-m", "simhash_filter.batch.spark", str(corpora[kind]), "--output", str(out),
                       "--master", master]  # fmt: skip
                runs[name].append(_run(cmd, trees[f" {tag}" if tag else ""]))
                load.append(os.getloadavg()[0])
                print(f"  {name}: {runs[name][-1]:.1f} s (load {load[-1]:.1f})", file=sys.stderr, flush=True)
        for kind, path in corpora.items():
            one = Path(tmp) / f"{kind}.dedup.jsonl"
            _run([sys.executable, "-m", "simhash_filter", "dedup", str(path), "--output", str(one), "--no-progress"])
            outputs = [Path(tmp) / f"{name}.out.jsonl" for name in names if name.split(" ")[0] == kind]
            identical[kind] = all(p.read_bytes() == one.read_bytes() for p in outputs)
    med = {name: statistics.median(v) for name, v in runs.items()}
    print(f"# spark-dedup on floods: {n:,} pages of each kind, {master}, median of {repeat} (alternated)")
    print("| corpus | wall s | ÷ distinct | identical to dedup |")
    print("| --- | ---: | ---: | --- |")
    for name, seconds in med.items():
        kind, _, tag = name.partition(" ")
        ratio = seconds / med[f"distinct{' ' + tag if tag else ''}"]
        print(f"| {name} | {seconds:.1f} | {ratio:.2f} | {identical[kind]} |")
    print(f"\nload average (1 min) during the runs: {min(load):.1f} to {max(load):.1f}")
    return {"pages": n, "master": master, "median_s": med, "runs_s": runs, "identical": identical, "load": load}


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("what", choices=("scaling", "flood"))
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--baseline", type=Path, help="another checkout whose job runs alternated with this one's")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.what == "scaling":
        result = scaling(args.copies, args.repeat)
    else:
        result = flood(args.pages, args.repeat, args.master, args.baseline)
    if args.json:
        write_json(args.json, result, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
