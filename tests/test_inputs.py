"""One input discovery for ``simhash-filter dedup`` and the Spark job (``simhash_filter.batch.inputs``): several
inputs, a directory's JSON Lines and WARC files (not hidden, not the output), gzip and WARC told by their bytes on
standard input."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import page_line, read_records, write_jsonl
from test_warc import page_responses, write_warc

from simhash_filter.batch.inputs import input_files, is_input_name
from simhash_filter.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


def _mixed(tmp_path: Path, corpus: list[tuple[str, str]]) -> Path:
    """A directory: a WARC file, a gzipped JSON Lines file in a subdirectory, and files no run reads."""
    crawl = tmp_path / "crawl"
    (crawl / "sub").mkdir(parents=True)
    (crawl / ".cache").mkdir()
    (crawl / "_temporary").mkdir()
    write_warc(crawl / "a.warc.gz", page_responses(corpus[:3]))
    write_jsonl(crawl / "sub" / "b.jsonl.gz", [page_line(url, html) for url, html in corpus[3:]])
    (crawl / "notes.txt").write_text("not an input\n")
    (crawl / ".cache" / "old.jsonl").write_text("{not json\n")
    (crawl / "_temporary" / "part.jsonl").write_text("{not json\n")
    (crawl / ".result.jsonl.x1.partial").write_text("{not json\n")
    return crawl


def test_a_directory_gives_its_jsonl_and_warc_files_not_hidden_ones(corpus, tmp_path):
    """A directory gives its .jsonl(.gz) and .warc(.gz) files at any depth, sorted; names under '.' or '_' and
    other suffixes are left alone."""
    crawl = _mixed(tmp_path, corpus)
    assert input_files([str(crawl)]) == [str(crawl / "a.warc.gz"), str(crawl / "sub" / "b.jsonl.gz")]
    assert is_input_name("x/Y.WARC.GZ") and is_input_name("p.ndjson")
    assert not is_input_name("_SUCCESS") and not is_input_name(".a/b.jsonl") and not is_input_name("part-00000")


def test_dedup_reads_several_inputs_in_path_order_once_each(corpus, tmp_path, capsys):
    """``dedup b.warc a.warc.gz a.warc.gz`` reads each file once, in path order (the Spark job's order), and
    decides across them as over one file."""
    write_warc(tmp_path / "a.warc.gz", page_responses(corpus[:3]))
    write_warc(tmp_path / "b.warc", page_responses(corpus[3:]), compress=False)
    inputs = [str(tmp_path / "b.warc"), str(tmp_path / "a.warc.gz"), str(tmp_path / "a.warc.gz")]
    assert main(["dedup", *inputs, "--no-progress"]) == 0
    out, err = capsys.readouterr()
    records = read_records(out)
    assert [r["url"] for r in records] == [url for url, _ in corpus]
    assert [r["duplicate_of"] for r in records if r["duplicate_of"]] == [corpus[0][0], corpus[3][0]]
    assert "6 pages of 6 WARC records in 2 files" in err, err


def test_dedup_reads_json_lines_and_warc_of_a_directory_together(corpus, tmp_path, capsys):
    """A directory of WARC and JSON Lines files: all of them read, near-duplicates found across the kinds; a
    malformed line is named by its own file and line."""
    crawl = _mixed(tmp_path, corpus)
    with gzip.open(crawl / "sub" / "b.jsonl.gz", "at", encoding="utf-8") as f:
        f.write("{not json\n")
    assert main(["dedup", str(crawl), "--no-progress"]) == 2
    out, err = capsys.readouterr()
    records = read_records(out)
    assert [r.get("url") for r in records] == [url for url, _ in corpus] + [None]
    assert records[5]["duplicate_of"] == corpus[3][0]
    assert f"{crawl / 'sub' / 'b.jsonl.gz'}:4: malformed line" in err, err
    assert "6 pages and 1 malformed lines (and 3 WARC records in 1 files)" in err, err


def test_an_output_left_in_the_input_directory_is_not_read(corpus, tmp_path, capsys):
    """``dedup crawl/ -o crawl/result.jsonl`` run twice: the second run does not read the first one's output
    (the output path is left out of the directory's files): the same output, exit status 0."""
    crawl = _mixed(tmp_path, corpus)
    output = crawl / "result.jsonl"
    assert main(["dedup", str(crawl), "-o", str(output), "--no-progress"]) == 0
    first = output.read_text(encoding="utf-8")
    capsys.readouterr()
    assert main(["dedup", str(crawl), "-o", str(output), "--no-progress"]) == 0
    assert output.read_text(encoding="utf-8") == first
    assert "malformed" not in capsys.readouterr().err.replace("0 malformed", "")


def test_an_input_file_named_as_the_output_is_a_usage_error(corpus, tmp_path, capsys):
    """A file named both as an input and as the output: a usage error (exit 2), the file untouched."""
    src = write_jsonl(tmp_path / "pages.jsonl", [page_line(url, html) for url, html in corpus])
    before = src.read_bytes()
    with pytest.raises(SystemExit) as exit_status:
        main(["dedup", str(tmp_path / "other.jsonl"), str(src), "-o", str(src)])
    assert exit_status.value.code == 2
    assert "is the input file" in capsys.readouterr().err and src.read_bytes() == before


def _dedup_stdin(data: bytes) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "simhash_filter", "dedup", "-", "--no-progress"]
    return subprocess.run(cmd, input=data, capture_output=True, cwd=ROOT, timeout=120)


def test_a_gzipped_file_on_standard_input_is_read_as_gzip(corpus, tmp_path):
    """``dedup - < pages.jsonl.gz``: the gzip magic bytes tell, the pages are read (not malformed lines)."""
    src = write_jsonl(tmp_path / "pages.jsonl.gz", [page_line(url, html) for url, html in corpus])
    proc = _dedup_stdin(src.read_bytes())
    assert proc.returncode == 0, proc.stderr
    assert [r["url"] for r in read_records(proc.stdout.decode())] == [url for url, _ in corpus]
    assert b"6 pages and 0 malformed lines" in proc.stderr


def test_a_warc_file_on_standard_input_is_read_as_warc(corpus, tmp_path):
    """``dedup - < crawl.warc.gz``: WARC (gzipped or not) is told by its first bytes, its pages read."""
    for compress in (True, False):
        write_warc(tmp_path / "crawl.warc", page_responses(corpus), compress=compress)
        proc = _dedup_stdin((tmp_path / "crawl.warc").read_bytes())
        assert proc.returncode == 0, proc.stderr
        records = read_records(proc.stdout.decode())
        assert [r["url"] for r in records] == [url for url, _ in corpus]
        assert all(r["warc_record_id"] for r in records)


def test_standard_input_with_other_inputs_is_a_usage_error(tmp_path, capsys):
    """'-' with another input: a usage error, exit status 2."""
    with pytest.raises(SystemExit) as exit_status:
        main(["dedup", "-", str(tmp_path)])
    assert exit_status.value.code == 2
    assert "standard input ('-') cannot be read with other inputs" in capsys.readouterr().err
