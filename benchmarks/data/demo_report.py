"""Summarise a ``simhash-filter dedup`` run over a sample written by ``devsites/sample.py``.

The sample knows which pages belong together (``group``), so each page's outcome can be judged:
the first page of a group to arrive should be kept, every later one flagged as a near-duplicate of a
page of the same group.

    python -m benchmarks.data.demo_report out/sample.jsonl out/sample.dedup.jsonl
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict

from benchmarks.benchlib.data import read_jsonl
from benchmarks.benchlib.report import make_parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("sample", help="JSON Lines written by devsites/sample.py")
    parser.add_argument("result", help="JSON Lines written by simhash-filter dedup on that sample")
    parser.add_argument("--examples", type=int, default=3, help="examples of each kind of mistake (default: 3)")
    args = parser.parse_args(argv)

    group_of: dict[str, str] = {}
    seen_groups: set[str] = set()
    # per (variant, lang): [pages, correct]
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    outcomes: Counter[str] = Counter()
    missed: list[str] = []
    wrong: list[str] = []
    for page, result in zip(read_jsonl(args.sample), read_jsonl(args.result), strict=True):
        if page["url"] != result["url"]:
            raise SystemExit(f"out of order: {page['url']} vs {result['url']}")
        group, first = page["group"], page["group"] not in seen_groups
        seen_groups.add(group)
        group_of[page["url"]] = group
        dup = result["duplicate_of"]
        if result["fingerprint"] is None:
            outcomes[f"skipped ({result.get('status')})"] += 1
            ok = False
        elif dup is None:
            outcomes["kept"] += 1
            ok = first
            if not first:
                missed.append(f"  {page['variant']:<8} {page['url']}")
        else:
            outcomes["flagged"] += 1
            ok = not first and group_of.get(dup) == group
            if not ok:
                wrong.append(f"  {page['url']} -> {dup} (distance {result['distance']})")
        cell = tally["first page" if first else page["variant"], page["lang"]]
        cell[0] += 1
        cell[1] += ok

    total = sum(outcomes.values())
    print(f"\n{total} pages: " + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items())))
    print(f"{len(seen_groups)} distinct articles: the first page of each should be kept, the rest flagged.\n")
    langs = sorted({lang for _, lang in tally})
    print(f"{'':<12}" + "".join(f"{lang:>14}" for lang in langs) + f"{'all':>14}")
    for variant in ["first page", "mirror", "copy", "ads", "edit"]:
        cells = [tally.get((variant, lang), [0, 0]) for lang in langs]
        both = [sum(c[0] for c in cells), sum(c[1] for c in cells)]
        what = "kept" if variant == "first page" else "flagged"
        row = "".join(f"{f'{c[1]}/{c[0]} {what}':>14}" for c in [*cells, both])
        print(f"{variant:<12}{row}")
    print(f"\nwrongly flagged (false positives): {len(wrong)}")
    print("\n".join(wrong[: args.examples]))
    print(f"near-duplicates missed: {len(missed)}")
    print("\n".join(missed[: args.examples]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
