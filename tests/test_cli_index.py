"""``simhash-filter dedup --index DIR`` remembers earlier runs; ``simhash-filter index`` inspects and
maintains the stored index (stats, query, export, delete, compact)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import page_line, read_records, run_cli, write_jsonl
from tqdm import tqdm

from simhash_filter.cli.main import main
from simhash_filter.index.backends.file import parse_age
from simhash_filter.model.fingerprint import fingerprint


@pytest.fixture
def pages_file(tmp_path: Path, pages: dict[str, str]) -> Path:
    return write_jsonl(
        tmp_path / "pages.jsonl",
        [
            page_line("https://a.example/garden", pages["en_article"]),
            page_line("https://a.example/library", pages["zh_article"]),
            page_line("https://b.example/garden-copy", pages["en_edited"]),
        ],
    )


def test_dedup_with_an_index_remembers_the_previous_run(tmp_path: Path, pages_file: Path, capsys) -> None:
    """A second dedup over the same pages with the same --index finds every page already stored (each is a
    near-duplicate of itself: unchanged since the first run)."""
    index = str(tmp_path / "idx")
    assert main(["dedup", str(pages_file), "--index", index, "--no-progress"]) == 0
    first = read_records(capsys.readouterr().out)
    assert [r["duplicate_of"] for r in first] == [None, None, "https://a.example/garden"]
    assert main(["dedup", str(pages_file), "--index", index, "--no-progress"]) == 0
    second = read_records(capsys.readouterr().out)
    assert [(r["duplicate_of"], r["distance"]) for r in second] == [
        ("https://a.example/garden", 0),
        ("https://a.example/library", 0),
        ("https://b.example/garden-copy", 0),
    ]


def test_index_stats_query_export(tmp_path: Path, pages_file: Path, page_files, capsys) -> None:
    """stats counts the stored pages (near-duplicates too), query finds a page's twins with their sketch
    similarity, export lists every stored page."""
    index = str(tmp_path / "idx")
    main(["dedup", str(pages_file), "--index", index, "--no-progress"])
    capsys.readouterr()
    assert main(["index", "stats", index]) == 0
    out = capsys.readouterr().out
    assert "entries  3 (stored 3; deleted 0; expired 0)" in out and "FileBackend" in out
    assert main(["index", "stats", index, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 3

    assert main(["index", "query", index, str(page_files["en_edited"]), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [(m["url"], m["verified"]) for m in answer["matches"]] == [
        ("https://b.example/garden-copy", True),  # the same page, stored by the dedup run
        ("https://a.example/garden", True),
    ]
    assert answer["matches"][0]["similarity"] == 1.0 and answer["matches"][1]["similarity"] >= 0.75
    assert main(["index", "query", index, str(page_files["en_edited"])]) == 0
    assert "2 candidate(s) within 10, 2 verified (similarity >= 0.75)" in capsys.readouterr().out
    hex_value = fingerprint(page_files["zh_article"].read_bytes()).hex
    assert main(["index", "query", index, hex_value, "-k", "0"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{hex_value}: {hex_value}: 1 candidate(s) within 0",
        f"  0  {hex_value}  https://a.example/library",
    ]

    assert main(["index", "export", index, "-o", str(tmp_path / "export.jsonl")]) == 0
    exported = [json.loads(line) for line in (tmp_path / "export.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [e["url"] for e in exported] == [
        "https://a.example/garden",
        "https://a.example/library",
        "https://b.example/garden-copy",
    ]
    assert exported[1]["fingerprint"] == hex_value and exported[1]["added"].endswith("UTC")


def test_index_query_refuses_pages_of_another_model(tmp_path: Path, pages_file: Path, page_files, capsys) -> None:
    """Pages fingerprinted with other model settings are not compared with the stored ones."""
    index = str(tmp_path / "idx")
    main(["dedup", str(pages_file), "--index", index, "--no-progress"])
    capsys.readouterr()
    assert main(["index", "query", index, str(page_files["en_edited"]), "--dom-decay", "0.9"]) == 1
    assert "other metadata" in capsys.readouterr().err


def test_index_delete_and_compact(tmp_path: Path, pages_file: Path, capsys) -> None:
    """A deleted URL is forgotten (its page is new again next time, though its copy is still stored);
    compaction rewrites the files."""
    index = str(tmp_path / "idx")
    main(["dedup", str(pages_file), "--index", index, "--no-progress"])
    assert main(["index", "delete", index, "https://a.example/garden", "https://nowhere.example/"]) == 0
    assert "deleted 1 fingerprint(s)" in capsys.readouterr().out
    assert main(["index", "compact", index]) == 0
    assert capsys.readouterr().out.startswith("3 -> 2 fingerprints; disk")
    main(["dedup", str(pages_file), "--index", index, "--no-progress"])
    again = read_records(capsys.readouterr().out)
    assert [r["duplicate_of"] for r in again] == [
        "https://b.example/garden-copy",
        "https://a.example/library",
        "https://b.example/garden-copy",
    ]


def test_index_errors_are_one_line(tmp_path: Path) -> None:
    """A missing, foreign or busy index is a one-line error with exit status 1 (as a real subprocess)."""
    missing = run_cli("index", "stats", str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and missing.stderr.strip().endswith(f"no index at {tmp_path / 'nowhere'}")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("not an index")
    foreign = run_cli("index", "export", str(tmp_path / "junk"))
    assert foreign.returncode == 1 and "not a simhash-filter index" in foreign.stderr
    assert "Traceback" not in missing.stderr + foreign.stderr


def test_index_commands_refuse_a_regular_file_in_one_line(tmp_path: Path, pages_file: Path) -> None:
    """A file given as the index (a path or a file:// URI) is said to be a file, not an index directory, with
    the usage error's exit status 2, not as ``FILE/CURRENT`` that is not a directory."""
    for index in (str(pages_file), pages_file.as_uri()):
        for command in ("stats", "export"):
            result = run_cli("index", command, index)
            assert result.returncode == 2, result.stderr
            assert result.stderr.count("\n") == 1 and "Not a directory" not in result.stderr
            assert f"{pages_file} is a file, not an index directory" in result.stderr


def test_index_compact_max_age_needs_a_unit(tmp_path: Path, pages_file: Path, capsys) -> None:
    """``--max-age 1`` (a bare number) is a usage error naming the accepted forms, and expires nothing; with a
    unit (``1d``) compaction runs and keeps today's entries (as a real subprocess too)."""
    index = str(tmp_path / "idx")
    main(["dedup", str(pages_file), "--index", index, "--no-progress"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["index", "compact", index, "--max-age", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --max-age: an age must be a number and a unit: s, m, h, d or w" in err and "30d" in err
    bare = run_cli("index", "compact", index, "--max-age", "90")
    assert bare.returncode == 2 and "got '90'" in bare.stderr
    assert main(["index", "stats", index, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 3
    assert main(["index", "compact", index, "--max-age", "1d"]) == 0
    assert capsys.readouterr().out.startswith("3 -> 3 fingerprints")


def test_parse_age_requires_a_unit_only_when_asked() -> None:
    """``parse_age`` keeps a bare number as seconds (the SIMHASH_MAX_AGE setting, the max_age URI option) and
    refuses it only with ``require_unit`` (the command line)."""
    assert parse_age("90") == parse_age(90) == parse_age("90s", require_unit=True) == 90
    assert parse_age("2w", require_unit=True) == 1209600
    for bare in ("1", "0", 1, 2.5):
        with pytest.raises(ValueError, match="a number and a unit: s, m, h, d or w"):
            parse_age(bare, require_unit=True)


def test_index_stats_sizes_are_tqdms(tmp_path: Path, pages_file: Path, capsys) -> None:
    """``stats`` gives the disk sizes as tqdm formats them (``4.10kB``), not by a hand-written formatter."""
    index = str(tmp_path / "idx")
    main(["dedup", str(pages_file), "--index", index, "--no-progress"])
    capsys.readouterr()
    assert main(["index", "stats", index, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert main(["index", "stats", index]) == 0
    disk, keys = (tqdm.format_sizeof(info[name], "B") for name in ("disk_bytes", "key_bytes"))
    assert f"disk     {disk} (keys {keys})\n" in capsys.readouterr().out


def test_index_query_names_both_readings_of_a_bad_argument(tmp_path: Path, pages_file: Path, capsys) -> None:
    """A query that is neither a file nor a 16-hex-digit fingerprint says so in one line; exit status 1."""
    index = str(tmp_path / "idx")
    main(["dedup", str(pages_file), "--index", index, "--no-progress"])
    capsys.readouterr()
    assert main(["index", "query", index, "dfdc1edaff36"]) == 1
    assert capsys.readouterr().err == "simhash-filter: dfdc1edaff36: no such file, and not a 16-hex-digit fingerprint\n"


def test_index_rules_prints_what_crawls_learned(tmp_path: Path, pages_file: Path, capsys) -> None:
    """``index rules`` prints the active URL rules and mirrors of an index's notes with their evidence; ``--all``
    adds those still learning and the withdrawn ones; ``--json`` gives one object per rule."""
    from simhash_filter.index.backends.file import FileBackend
    from simhash_filter.index.tables import resolve_design

    index = tmp_path / "idx"
    main(["dedup", str(pages_file), "--index", str(index), "--no-progress"])
    assert main(["index", "rules", str(index)]) == 0
    assert "no URL rules active" in capsys.readouterr().out
    k = 10
    with FileBackend(index, k=k, design=resolve_design("auto", 1000)) as backend:
        backend.add_notes({"rule|a.example|param:sid|+": 40, "rule|a.example|param:page|+": 9,
                           "rule|a.example|param:page|-": 1, "mirror|a.example|b.example|+": 3})  # fmt: skip
    assert main(["index", "rules", str(index)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "a.example: param:sid (active: 40 examples, 0 against, precision > 93.7% at 95 %)"
    ]
    assert main(["index", "rules", str(index), "--all", "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["kind"], r["rule"], r["active"], r["against"]) for r in records] == [
        ("rule", "param:sid", True, 0),
        ("mirror", "b.example", False, 0),
        ("rule", "param:page", False, 1),
    ]


def test_index_rebuild_swaps_a_directory_in_place(tmp_path: Path, pages_file: Path, capsys) -> None:
    """rebuild stores every page again (with its URL, fingerprint, sketch and age) in the tables built for
    --expected-pages, and swaps the new directory in; nothing is left beside it."""
    index = tmp_path / "idx"
    main(["dedup", str(pages_file), "--index", str(index), "--no-progress"])
    capsys.readouterr()
    main(["index", "export", str(index)])
    before = capsys.readouterr().out
    assert main(["index", "rebuild", str(index), "--expected-pages", "50000000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("3 pages -> 3 stored in ") and "tables 11+11+11+11+10+10/k4, built for 1,073,741,824" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "pages.jsonl"]
    main(["index", "export", str(index)])
    assert capsys.readouterr().out == before
    main(["index", "stats", str(index), "--json"])
    assert json.loads(capsys.readouterr().out)["design"] == "11+11+11+11+10+10/k4"
    main(["dedup", str(pages_file), "--index", str(index), "--expected-pages", "50000000", "--no-progress"])
    assert [r["distance"] for r in read_records(capsys.readouterr().out)] == [0, 0, 0]


def test_index_rebuild_into_a_redis_prefix_with_more_tables(
    redis_server, redis_prefix: str, pages_file: Path, capsys
) -> None:
    """A Redis index is rebuilt into another prefix (--into; without it, a usage error): there in 15 tables for
    50 million pages, which a crawl or dedup built for that many opens and finds its pages in."""
    old = f"{redis_server.url}?prefix={redis_prefix}"
    new = f"{redis_server.url}?prefix={redis_prefix}-big"
    main(["dedup", str(pages_file), "--index", old, "--no-progress"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["index", "rebuild", old, "--expected-pages", "50000000"])
    assert exited.value.code == 2 and "--into" in capsys.readouterr().err
    assert main(["index", "rebuild", old, "--expected-pages", "50000000", "--into", new]) == 0
    assert "tables 11+11+11+11+10+10/k4, built for 1,073,741,824 pages" in capsys.readouterr().out
    assert main(["index", "stats", new, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["entries"], info["design"]) == (3, "11+11+11+11+10+10/k4")
    main(["dedup", str(pages_file), "--index", new, "--expected-pages", "50000000", "--no-progress"])
    assert [r["distance"] for r in read_records(capsys.readouterr().out)] == [0, 0, 0]
    assert main(["dedup", str(pages_file), "--index", new, "--no-progress"]) == 1  # built for another size
    assert "table design 11+11+11+11+10+10/k4" in capsys.readouterr().err


def test_index_rebuild_in_place_keeps_the_tables_on_disk(tmp_path: Path, capsys) -> None:
    """An index with its tables on disk (run files) is rebuilt in place with its tables on disk, and the same
    pages."""
    import random

    from simhash_filter.config import DEFAULTS
    from simhash_filter.index.backends.file import FileBackend
    from simhash_filter.index.tables import resolve_design

    index = tmp_path / "idx"
    k = DEFAULTS.max_distance
    design = resolve_design("auto", 1000)
    rng = random.Random(4)
    with FileBackend(
        index, k=k, design=design, metadata=DEFAULTS.index_metadata(), tables="disk", spill_rows=8, buffer_size=4
    ) as backend:
        for i in range(40):
            backend.add_and_candidates(
                rng.getrandbits(64), f"https://a.example/{i}", rng.randbytes(DEFAULTS.fingerprint.sketch_bytes), k
            )
        assert backend.info()["run_files"]
    main(["index", "export", str(index)])
    before = capsys.readouterr().out
    assert main(["index", "rebuild", str(index), "--expected-pages", "50000000"]) == 0
    assert "40 pages -> 40 stored" in capsys.readouterr().out
    assert (index / "TABLES").read_text() == "disk\n"  # what the next open reads (run files come with more rows)
    main(["index", "stats", str(index), "--json"])
    info = json.loads(capsys.readouterr().out)
    assert (info["tables"], info["design"], info["entries"]) == ("disk", "11+11+11+11+10+10/k4", 40)
    main(["index", "export", str(index)])
    assert capsys.readouterr().out == before


def test_index_query_of_an_index_whose_run_file_is_damaged_answers_with_a_warning(tmp_path: Path) -> None:
    """`index query` of an index with its tables on disk, a row number in a run file damaged (a high byte: a row far
    past the index's): exit status 0, the stored page found, a warning naming the run file (never a traceback)."""
    import numpy as np

    from simhash_filter.config import DEFAULTS
    from simhash_filter.index.backends.file import FileBackend
    from simhash_filter.index.backends.file.records import HEADER_SIZE
    from simhash_filter.index.tables import TableDesign

    index = tmp_path / "idx"
    rng = np.random.default_rng(8)
    fps = rng.integers(0, 2**64, 3000, dtype=np.uint64)
    design = TableDesign.parse(DEFAULTS.tables)
    with FileBackend(index, k=DEFAULTS.max_distance, design=design, metadata=DEFAULTS.index_metadata(),
                     tables="disk", spill_rows=1000) as backend:  # fmt: skip
        backend.add_many(
            fps,
            [f"https://a.example/{i}" for i in range(len(fps))],
            [rng.bytes(DEFAULTS.fingerprint.sketch_bytes) for _ in fps],
        )
        backend.disk.wait_for_merges()
    run = max(index.glob("tables.*"), key=lambda p: p.stat().st_size)
    data = bytearray(run.read_bytes())
    table = json.loads(data[:HEADER_SIZE].split(b"\n", 1)[1])["tables"][0]
    at = table[3] + 4 * (table[4] // 2)
    row = int.from_bytes(data[at : at + 4], "little")
    data[at + 3] ^= 0x40
    run.write_bytes(bytes(data))
    proc = run_cli("index", "query", str(index), f"{int(fps[row]):016x}")
    assert proc.returncode == 0, proc.stderr
    assert f"https://a.example/{row}" in proc.stdout
    assert run.name in proc.stderr and "failed its check" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("k", [0, 3, 6])
def test_index_query_of_an_index_with_tables_on_disk_answers_at_every_k(tmp_path: Path, k: int) -> None:
    """`index query -k K` of an index with its tables on disk finds a stored fingerprint at every k, through the
    two-stage tables."""
    import numpy as np

    from simhash_filter.config import DEFAULTS
    from simhash_filter.index.backends.file import FileBackend
    from simhash_filter.index.tables import TableDesign

    index = tmp_path / "idx"
    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**64, 300, dtype=np.uint64)
    design = TableDesign.parse(DEFAULTS.tables)
    with FileBackend(index, k=DEFAULTS.max_distance, design=design, metadata=DEFAULTS.index_metadata(),
                     tables="disk", spill_rows=100) as backend:  # fmt: skip
        backend.add_many(
            fps,
            [f"https://a.example/{i}" for i in range(len(fps))],
            [rng.bytes(DEFAULTS.fingerprint.sketch_bytes) for _ in fps],
        )
        backend.disk.wait_for_merges()
    proc = run_cli("index", "query", str(index), "-k", str(k), f"{int(fps[7]):016x}")
    assert proc.returncode == 0, proc.stderr
    assert "https://a.example/7\n" in proc.stdout
