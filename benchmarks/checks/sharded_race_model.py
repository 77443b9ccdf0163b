"""An exhaustive model of the sharded Redis check (simhash_filter/index/backends/redis/sharded.py): every
interleaving of two or three processes checking near-duplicates at the same moment, over every placement of their
blocks and homes on three shards, with rule 2 of the bound at 1, 2 or never.  It prints, for the protocol before
and after the fix, how many placements let two pages both be kept ("more") or none of them ("none"), and the
first interleaving found that does.

    python -m benchmarks.checks.sharded_race_model

The model keeps what decides the race and nothing else: a shard holds one block that every page touching that
shard shares (the worst case), every page's sketch verifies against every other's (a group of copies), and each
atomic step of Redis is one action:

- a page's *shard step* (one script call on one shard: read the block, decide rule 2, store the page unless its
  verdict waits for sketches kept on other homes); the calls of one round run in any order;
- a *home lookup* (what ``_homes`` asks a candidate's home for a candidate seen with a hashed key): before the
  fix two reads (the home's tables, then its ``x`` hash), after it one script that also leaves a *claim* on the
  home when the candidate is not there yet;
- ``keep_key`` (a page its home's tables refused and another shard stored: the home keeps its URL and sketch),
  which after the fix also returns the claims left for the page.

A page is kept when none of its candidates is known to it with a sketch (then none verifies: in the model every
known candidate verifies).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import dataclass, field, replace

#: Rule 2 "never": a block holds fewer verified near-duplicates than this in every run of the model.
NEVER = 99


@dataclass(frozen=True)
class Page:
    home: int
    shards: frozenset[int]


@dataclass(frozen=True)
class Proc:
    """One process's check of its page: where it is, what each shard answered, what it learnt of homes."""

    phase: str = "round"  # round, lookup, keep, done
    pending: frozenset[int] = frozenset()  # the shard calls of this round not yet run
    lookups: frozenset[tuple[int, int]] = frozenset()  # (candidate, part) home reads not yet run (part 0: tables)
    found: tuple[tuple[int, tuple[tuple[int, bool], ...]], ...] = ()  # (shard, ((page, hashed), ...))
    stored: tuple[tuple[int, bool | None], ...] = ()  # (shard, stored: True, False, None = waited)
    homes: tuple[tuple[int, bool], ...] = ()  # candidate -> its home has its record (sketch)
    claimed: frozenset[int] = frozenset()  # pages that claimed this one (the fix): known candidates
    half: frozenset[int] = frozenset()  # lookups whose tables read found nothing (before the fix: 2 reads)


@dataclass(frozen=True)
class State:
    blocks: tuple[tuple[int, ...], ...]  # per shard, the pages its block holds, in order
    xs: tuple[frozenset[int], ...]  # per shard, the pages its x hash keeps (its home's tables refused them)
    claims: tuple[frozenset[tuple[int, int]], ...]  # per shard, (claimed page, claimer) (the fix)
    procs: tuple[Proc, ...] = field(default=())


def _get(pairs: tuple, key: int, default=None):
    for k, v in pairs:
        if k == key:
            return v
    return default


def _put(pairs: tuple, key: int, value) -> tuple:
    return tuple(sorted([(k, v) for k, v in pairs if k != key] + [(key, value)]))


class Model:
    def __init__(self, pages: list[Page], duplicates: int, fixed: bool) -> None:
        self.pages, self.duplicates, self.fixed = pages, duplicates, fixed

    def start(self) -> State:
        n_shards = 3
        procs = tuple(Proc(pending=p.shards) for p in self.pages)
        return State(tuple(() for _ in range(n_shards)), (frozenset(),) * n_shards, (frozenset(),) * n_shards, procs)

    def actions(self, state: State):
        """Every action enabled in *state*: (label, next state)."""
        for i, proc in enumerate(state.procs):
            if proc.phase == "round":
                for s in sorted(proc.pending):
                    yield f"P{i} step on shard {s}", self.step(state, i, s)
            elif proc.phase == "lookup":
                for q, part in sorted(proc.lookups):
                    yield (
                        f"P{i} looks P{q} up on its home {self.pages[q].home}"
                        + ("" if self.fixed else (" (tables)", " (x)")[part]),
                        self.lookup(state, i, q, part),
                    )
            elif proc.phase == "keep":
                yield f"P{i} keep_key on its home {self.pages[i].home}", self.keep(state, i)

    def _with(self, state: State, i: int, proc: Proc, **changes) -> State:
        procs = list(state.procs)
        procs[i] = proc
        return replace(state, procs=tuple(procs), **changes)

    def step(self, state: State, i: int, s: int) -> State:
        page, proc = self.pages[i], state.procs[i]
        homes = dict(proc.homes)
        visible = tuple((q, self.pages[q].home != s) for q in state.blocks[s] if q != i)
        verified = unknown = 0
        for q, hashed in visible:
            known = True if not hashed else homes.get(q)
            if known is None:
                unknown += 1
            elif known:
                verified += 1
        blocks = state.blocks
        if verified >= self.duplicates:
            took: bool | None = False
        elif verified + unknown >= self.duplicates:
            took = None  # waits for sketches: stores nothing
        else:
            took = True
            blocks = tuple((*b, i) if j == s else b for j, b in enumerate(blocks))
        claimed = proc.claimed
        if self.fixed and s == page.home and took is not None:  # the home's step reads the claims on the page
            claimed |= {c for q, c in state.claims[s] if q == i}
        proc = replace(
            proc,
            pending=proc.pending - {s},
            found=_put(proc.found, s, visible),
            stored=_put(proc.stored, s, took),
            claimed=claimed,
        )
        state = self._with(state, i, proc, blocks=blocks)
        return self._after_round(state, i) if not proc.pending else state

    def _wanted(self, proc: Proc) -> frozenset[int]:
        seen = {(q, hashed) for _, found in proc.found for q, hashed in found}
        direct = {q for q, hashed in seen if not hashed}
        known = {q for q, _ in proc.homes}
        return frozenset(q for q, hashed in seen if hashed and q not in direct and q not in known)

    def _after_round(self, state: State, i: int) -> State:
        proc = state.procs[i]
        wanted = self._wanted(proc)
        if wanted:
            return self._with(state, i, replace(proc, phase="lookup", lookups=frozenset((q, 0) for q in wanted)))
        return self._next_round(state, i)

    def _next_round(self, state: State, i: int) -> State:
        proc = state.procs[i]
        waiting = frozenset(s for s, took in proc.stored if took is None)
        if waiting:
            return self._with(state, i, replace(proc, phase="round", pending=waiting))
        stored = dict(proc.stored)
        if any(stored.values()) and not stored[self.pages[i].home]:
            return self._with(state, i, replace(proc, phase="keep"))
        return self._with(state, i, replace(proc, phase="done"))

    def lookup(self, state: State, i: int, q: int, part: int) -> State:
        proc, h = state.procs[i], self.pages[q].home
        lookups = proc.lookups - {(q, part)}
        claims = state.claims
        if self.fixed:  # one script: the tables, the x hash, and a claim when neither has the page
            there = q in state.blocks[h] or q in state.xs[h]
            if not there:
                claims = tuple(c | {(q, i)} if j == h else c for j, c in enumerate(claims))
            proc = replace(proc, lookups=lookups, homes=_put(proc.homes, q, there))
        elif part == 0:  # its home's tables (candidates_in at distance 0)
            if q in state.blocks[h]:
                proc = replace(proc, lookups=lookups, homes=_put(proc.homes, q, True))
            else:
                proc = replace(proc, lookups=lookups | {(q, 1)})
        else:  # then its x hash (kept_key)
            proc = replace(proc, lookups=lookups, homes=_put(proc.homes, q, q in state.xs[h]))
        state = self._with(state, i, proc, claims=claims)
        return self._next_round(state, i) if not lookups else state

    def keep(self, state: State, i: int) -> State:
        h, proc = self.pages[i].home, state.procs[i]
        xs = tuple(x | {i} if j == h else x for j, x in enumerate(state.xs))
        claimed = proc.claimed
        if self.fixed:
            claimed |= {c for q, c in state.claims[h] if q == i}
        return self._with(state, i, replace(proc, phase="done", claimed=claimed), xs=xs)

    def kept(self, state: State) -> list[bool]:
        out = []
        for proc in state.procs:
            homes = dict(proc.homes)
            known = {q for _, found in proc.found for q, hashed in found if not hashed or homes.get(q)}
            out.append(not (known | proc.claimed))
        return out


def explore(model: Model) -> dict[str, list[str] | None]:
    """Every interleaving from the start: the first trace that ends with two pages kept, and with none."""
    bad: dict[str, list[str] | None] = {"more": None, "none": None}
    seen: set[State] = set()
    stack: list[tuple[State, list[str]]] = [(model.start(), [])]
    while stack:
        state, trace = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        moves = list(model.actions(state))
        if not moves:
            kept = sum(model.kept(state))
            what = "more" if kept > 1 else "none" if kept == 0 else ""
            if what and bad[what] is None:
                bad[what] = trace
            continue
        for label, nxt in moves:
            stack.append((nxt, [*trace, label]))
    return bad


def placements(n: int, every_shard: bool = False):
    """Every placement of *n* pages over 3 shards: a home each, and the other shards it touches; every two pages
    touch a shard in common (they are candidates of each other).  Up to relabelling the shards, page 0's home is 0.
    With *every_shard*, only those where every page touches all three (the most interleavings)."""
    options = [Page(h, frozenset({h, *extra})) for h in range(3) for r in range(3)
               for extra in itertools.combinations([s for s in range(3) if s != h], r)]  # fmt: skip
    for rest in itertools.product(options, repeat=n - 1):
        for first in (p for p in options if p.home == 0):
            pages = [first, *rest]
            if every_shard and any(len(p.shards) < 3 for p in pages):
                continue
            if all(a.shards & b.shards for a, b in itertools.combinations(pages, 2)):
                yield pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--protocols", default="before,fixed", help="before, fixed, or both (comma-separated)")
    parser.add_argument("--every-shard", action="store_true", help="only placements where each page touches all")
    args = parser.parse_args(argv)
    failed = False
    for fixed in [name == "fixed" for name in args.protocols.split(",")]:
        for n in args.processes:
            for duplicates in (1, 2, NEVER):
                counts = {"more": 0, "none": 0}
                first: dict[str, tuple[list[Page], list[str]] | None] = {"more": None, "none": None}
                total = 0
                for pages in placements(n, args.every_shard):
                    total += 1
                    for what, trace in explore(Model(pages, duplicates, fixed)).items():
                        if trace is not None:
                            counts[what] += 1
                            first[what] = first[what] or (pages, trace)
                rule = "never" if duplicates == NEVER else duplicates
                name = "fixed" if fixed else "before"
                print(f"{name}: {n} processes, rule 2 at {rule}: {total} placements, two kept in {counts['more']}, "
                      f"none kept in {counts['none']}")  # fmt: skip
                for what, found in first.items():
                    if found is not None and (what == "more" or n == 2):
                        pages, trace = found
                        where = ", ".join(f"P{i} home {p.home} shards {sorted(p.shards)}" for i, p in enumerate(pages))
                        print(f"  {what}: {where}\n    " + "\n    ".join(trace))
                failed |= fixed and counts["more"] > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
