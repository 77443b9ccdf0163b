"""Tests of the ``simhash-filter`` command line, in process (``main``) and as a real subprocess."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import worker_helpers

from simhash_filter import DEFAULTS, fingerprint, hamming
from simhash_filter.batch import dedup as dedup_module
from simhash_filter.cli.main import build_parser, main

LINE = re.compile(r"^[0-9a-f]{16}  (.+)$")
DECISION = re.compile(r"^distance (\d+)(?:, similarity ([\d.]+))?: (near-duplicate|distinct|candidate) \(k=(\d+)[,;) ]")


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m simhash_filter`` with ``args``; text output."""
    proc = subprocess.run(
        [sys.executable, "-m", "simhash_filter", *args],
        input=stdin,
        capture_output=True,
        timeout=300,
        check=False,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
    )


def write_jsonl(path: Path, lines: list[str]) -> Path:
    """Write raw lines (already JSON or deliberately not) to ``path``, gzip-compressed if it ends in .gz."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def page_line(url: str, html: str) -> str:
    return json.dumps({"url": url, "html": html})


def read_records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


# --- fingerprint ---------------------------------------------------------------------------------


def test_fingerprint_prints_hex_two_spaces_path(page_files, capsys):
    """Each file gives one line: 16 lowercase hex digits, two spaces, the path as given."""
    paths = [str(page_files[n]) for n in ("en_article", "zh_article", "en_other")]
    assert main(["fingerprint", *paths]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [LINE.fullmatch(line).group(1) for line in lines] == paths
    assert lines[0].split()[0] == fingerprint(page_files["en_article"].read_bytes()).hex


def test_fingerprint_subprocess_and_stdin(page_files):
    """``python -m simhash_filter fingerprint`` works on files and on '-' (standard input)."""
    path = page_files["zh_article"]
    from_file = run_cli("fingerprint", str(path))
    from_stdin = run_cli("fingerprint", "-", stdin=path.read_bytes())
    assert from_file.returncode == from_stdin.returncode == 0
    assert from_file.stdout == f"{from_file.stdout[:16]}  {path}\n"
    assert from_stdin.stdout == f"{from_file.stdout[:16]}  -\n"


def test_fingerprint_sniffs_encoding(pages, tmp_path, capsys):
    """A GB18030-encoded file with a meta charset gets the same fingerprint as its UTF-8 twin."""
    utf8 = tmp_path / "utf8.html"
    gbk = tmp_path / "gbk.html"
    utf8.write_bytes(pages["zh_article"].encode("utf-8"))
    gbk.write_bytes(pages["zh_article"].replace('charset="utf-8"', 'charset="gbk"').encode("gb18030"))
    assert main(["fingerprint", str(utf8), str(gbk)]) == 0
    a, b = (line.split()[0] for line in capsys.readouterr().out.splitlines())
    assert a == b


def test_fingerprint_json_lines(page_files, tmp_path, capsys):
    """``fingerprint --json`` prints one JSON object per file, in order (JSON Lines): file and fingerprint, and
    a status (and the error of an unreadable file) when there is no fingerprint; exit status 1 if any."""
    good, image, missing = str(page_files["en_article"]), str(page_files["image_only"]), str(tmp_path / "gone.html")
    hex_value = fingerprint(Path(good).read_bytes()).hex
    assert main(["fingerprint", "--json", good]) == 0
    assert capsys.readouterr().out == json.dumps({"file": good, "fingerprint": hex_value}) + "\n"
    assert main(["fingerprint", "--json", image, good, missing]) == 1
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [
        {"file": image, "fingerprint": None, "status": "too_few_features"},
        {"file": good, "fingerprint": hex_value},
        {"file": missing, "fingerprint": None, "status": "unreadable", "error": "No such file or directory"},
    ]
    assert f"{image}: cannot fingerprint: too_few_features" in err and f"{missing}: cannot read" in err


def test_fingerprint_failures_are_reported_and_the_rest_printed(page_files, tmp_path, capsys):
    """Unfingerprintable or missing files are named on stderr with the reason; exit status 1."""
    missing = tmp_path / "missing.html"
    args = [str(page_files["image_only"]), str(page_files["en_article"]), str(page_files["blank"]), str(missing)]
    assert main(["fingerprint", *args]) == 1
    out, err = capsys.readouterr()
    assert [LINE.fullmatch(line).group(1) for line in out.splitlines()] == [str(page_files["en_article"])]
    assert f"{page_files['image_only']}: cannot fingerprint: too_few_features" in err
    assert f"{page_files['blank']}: cannot fingerprint: empty" in err
    assert f"{missing}: cannot read" in err


def test_a_page_nested_deep_is_fingerprinted(pages, tmp_path, capsys):
    """An article under 300 nested elements (past libxml2's depth cap, the parser before model v6) is read and
    fingerprinted as the same article without them."""
    deep, flat = tmp_path / "deep.html", tmp_path / "flat.html"
    deep.write_text("<html><body>" + "<div>" * 300 + pages["en_article"] + "</div>" * 300, encoding="utf-8")
    flat.write_text("<html><body>" + pages["en_article"], encoding="utf-8")
    assert main(["fingerprint", str(deep), str(flat)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and len(out.splitlines()) == 2


# --- compare -------------------------------------------------------------------------------------


def test_compare_near_duplicate(page_files, capsys):
    """A page and its lightly edited copy: distance <= k, the sketches' similarity >= t: 'near-duplicate',
    exit status 0."""
    assert main(["compare", str(page_files["en_article"]), str(page_files["en_edited"])]) == 0
    out = capsys.readouterr().out.strip()
    m = DECISION.match(out)
    assert m is not None, out
    assert int(m.group(1)) <= DEFAULTS.max_distance and float(m.group(2)) >= DEFAULTS.min_similarity
    assert m.group(3) == "near-duplicate" and int(m.group(4)) == DEFAULTS.max_distance
    assert out.endswith(f"(k={DEFAULTS.max_distance}, t={DEFAULTS.min_similarity:g})")


def test_compare_distinct(page_files):
    """Two articles in the same template are 'distinct' (subprocess, exit status 1, as cmp's for different)."""
    proc = run_cli("compare", str(page_files["en_article"]), str(page_files["en_other"]))
    assert proc.returncode == 1 and proc.stderr == ""
    m = DECISION.match(proc.stdout.strip())
    assert m is not None and m.group(3) == "distinct"
    assert int(m.group(1)) > DEFAULTS.max_distance or float(m.group(2)) < DEFAULTS.min_similarity


def test_compare_accepts_hex_fingerprints(pages, page_files, capsys):
    """Fingerprints given as 16 hex digits (alone or with a file) give the same distance."""
    a, b = fingerprint(pages["en_article"]), fingerprint(pages["zh_other"])
    d = hamming(a.value, b.value)
    assert main(["compare", a.hex, b.hex.upper()]) == 1
    assert main(["compare", str(page_files["en_article"]), b.hex]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"distance {d}: distinct (k={DEFAULTS.max_distance})"] * 2


def test_compare_max_distance_changes_the_decision(capsys):
    """``--max-distance`` sets k: distance 3 is distinct under k=2 (exit status 1); under k=3 two bare
    fingerprints are a candidate (only the pages' sketches can verify it; exit status 0, the one-stage
    decision); within k but with no table in common: distinct."""
    a, b = "0000000000000000", "0000000000000007"
    assert main(["compare", a, b, "--max-distance", "2"]) == 1
    assert main(["compare", a, b, "-k", "3"]) == 0
    spread = f"{(1 << 63) | (1 << 50) | (1 << 37) | (1 << 24) | (1 << 11):016x}"  # one bit in each of the 5 tables
    assert main(["compare", a, spread]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "distance 3: distinct (k=2)",
        "distance 3: candidate (k=3; compare the pages themselves to verify)",
        "distance 5: distinct (within k=10 but no table in common)",
    ]


def test_compare_explain_lists_differing_features(pages, page_files, capsys):
    """``--explain`` prints the share of text vs structure and the top differing features of each kind."""
    from simhash_filter.model.explain import explain

    a, b = page_files["en_article"], page_files["en_copy"]
    e = explain(pages["en_article"], pages["en_copy"], top=5)
    verdict = "near-duplicate" if e.similarity >= DEFAULTS.min_similarity else "distinct"
    assert main(["compare", str(a), str(b), "--explain", "--top", "5"]) == (0 if verdict == "near-duplicate" else 1)
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        f"distance {e.distance}, similarity {e.similarity:.2f}: {verdict} (k=10, t={DEFAULTS.min_similarity:g})"
    )
    assert re.search(r"weight difference: \d+% text, \d+% structure", out)
    assert "text features that differ most" in out and "structure features that differ most" in out
    for d in (*e.text, *e.structure):
        assert d.name in out
    assert "only A" in out and "only B" in out


def test_compare_explain_needs_files(pages, page_files, capsys):
    """``--explain`` with a hex fingerprint is a usage error (exit status 2)."""
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(page_files["en_article"]), fingerprint(pages["en_other"]).hex, "--explain"])
    assert exc.value.code == 2
    assert "--explain needs two HTML files" in capsys.readouterr().err


def test_compare_unfingerprintable_page(page_files, capsys):
    """Comparing with an image-only page names the file and status on stderr; exit status 2 (trouble: no
    answer, neither near-duplicate nor distinct)."""
    assert main(["compare", str(page_files["image_only"]), str(page_files["en_article"])]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{page_files['image_only']}: cannot fingerprint: too_few_features" in err


def test_compare_missing_file(tmp_path, capsys):
    """A path that is neither a file nor a fingerprint is reported as both; exit status 2."""
    missing = tmp_path / "nope.html"
    assert main(["compare", str(missing), "0123456789abcdef"]) == 2
    assert capsys.readouterr().err == f"simhash-filter: {missing}: no such file, and not a 16-hex-digit fingerprint\n"


def test_compare_fetches_urls_with_the_charset_their_header_names(pages, page_files, capsys):
    """An http(s) URL on either side is fetched (one GET) and its bytes fingerprinted in the charset of its
    Content-Type: a GB18030 page whose <meta> wrongly says UTF-8 is the same page as its UTF-8 file."""
    from devsites.localsite import LocalSite, Page

    zh = pages["zh_article"]
    site = {"/zh": Page(zh.encode("gb18030"), "text/html; charset=gb18030"), "/en": Page(pages["en_article"].encode())}
    with LocalSite(site, hosts=("127.0.0.1",)) as server:
        assert main(["compare", server.url("/zh"), str(page_files["zh_article"])]) == 0
        assert capsys.readouterr().out.startswith("distance 0, similarity 1.00: near-duplicate")
        assert main(["compare", server.url("/en"), server.url("/zh"), "--json"]) == 1
        record = json.loads(capsys.readouterr().out)
        assert record["fingerprint_b"] == fingerprint(zh).hex and record["a"] == server.url("/en")
        assert main(["compare", server.url("/zh"), str(page_files["zh_article"]), "--explain"]) == 0
        assert capsys.readouterr().out.startswith("distance 0, similarity 1.00")


def test_compare_says_in_one_line_why_a_url_could_not_be_fetched(page_files, capsys):
    """A 404 or a refused connection: one line naming the URL and why, exit status 2 (trouble), no decision."""
    from devsites.localsite import LocalSite

    with LocalSite({}, hosts=("127.0.0.1",)) as server:
        port = server.port
    refused = f"http://127.0.0.1:{port}/page"  # the server is closed
    with LocalSite({}, hosts=("127.0.0.1",)) as server:
        missing = server.url("/gone")
        assert main(["compare", missing, str(page_files["en_article"])]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err == f"simhash-filter: {missing}: cannot fetch: HTTP 404 Not Found\n"
    assert main(["compare", str(page_files["en_article"]), refused]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"simhash-filter: {refused}: cannot fetch: ") and err.count("\n") == 1


def test_fetch_reads_no_more_than_the_cap_and_names_itself():
    """A fetch reads at most the cap (a huge page costs no memory) and sends the tool's User-Agent."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from simhash_filter.cli.fetch import USER_AGENT, fetch

    agents: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            agents.append(self.headers.get("User-Agent"))
            body = b"<p>" + b"x" * 100_000 + b"</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=ISO-8859-1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            page = fetch(f"http://127.0.0.1:{server.server_address[1]}/big", 1000)
        finally:
            server.shutdown()
            thread.join()
    assert len(page.body) == 1000 and page.charset == "iso-8859-1"
    assert agents == [USER_AGENT] and USER_AGENT.startswith("simhash-filter/")


def test_compare_short_hex_names_both_possibilities(page_files):
    """``compare a.html dfdc1edaff36`` (12 hex digits, no such file) is one line naming both readings of the
    argument, exit status 2 (subprocess)."""
    proc = run_cli("compare", str(page_files["en_article"]), "dfdc1edaff36")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "simhash-filter: dfdc1edaff36: no such file, and not a 16-hex-digit fingerprint\n"


def test_compare_unreadable_path_names_the_reason_and_the_fingerprint_reading(tmp_path, page_files, capsys):
    """A path that exists but cannot be read (a directory) gives its reason and says it is no fingerprint."""
    assert main(["compare", str(page_files["en_article"]), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"simhash-filter: {tmp_path}: cannot read (Is a directory), and not a 16-hex-digit fingerprint\n"


class _ClosedPipe(io.StringIO):
    """Standard output whose reader went away: writing raises BrokenPipeError."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        return self._fd


def test_a_closed_pipe_is_trouble_for_compare_and_a_failure_for_the_others(page_files, tmp_path, monkeypatch):
    """Output into a closed pipe ends quietly: exit status 2 for ``compare`` (1 would read as "distinct"), 1 for
    the other commands."""
    with open(tmp_path / "stdout", "w") as sink:
        monkeypatch.setattr(sys, "stdout", _ClosedPipe(sink.fileno()))
        a, b = str(page_files["en_article"]), str(page_files["en_edited"])
        assert main(["compare", a, b]) == 2
        assert main(["fingerprint", a]) == 1


def test_compare_exit_status_is_like_cmp(page_files, tmp_path):
    """As real subprocesses: 0 near-duplicate, 1 distinct, 2 trouble (a missing file, a usage error)."""
    a, edited, other = (str(page_files[n]) for n in ("en_article", "en_edited", "en_other"))
    assert run_cli("compare", a, edited).returncode == 0
    assert run_cli("compare", a, other).returncode == 1
    assert run_cli("compare", a, str(tmp_path / "gone.html")).returncode == 2
    usage = run_cli("compare", a, edited, "--top", "-1")
    assert usage.returncode == 2 and "--top must be >= 0" in usage.stderr


def test_compare_json(pages, page_files, capsys):
    """``--json`` prints one object: the arguments, both fingerprints, distance, table_in_common, similarity,
    the decision, k and threshold; the exit status is the decision's."""
    a, b = str(page_files["en_article"]), str(page_files["en_edited"])
    fa, fb = fingerprint(pages["en_article"]), fingerprint(pages["en_edited"])
    assert main(["compare", a, b, "--json", "-t", "0.5"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert list(record) == ["a", "b", "fingerprint_a", "fingerprint_b", "distance", "table_in_common",
                            "similarity", "decision", "k", "threshold"]  # fmt: skip
    assert (record["a"], record["b"], record["fingerprint_a"], record["fingerprint_b"]) == (a, b, fa.hex, fb.hex)
    assert record["distance"] == hamming(fa.value, fb.value) and record["table_in_common"] is True
    assert record["decision"] == "near-duplicate" and 0.5 <= record["similarity"] <= 1.0
    assert (record["k"], record["threshold"]) == (DEFAULTS.max_distance, 0.5)
    assert main(["compare", a, str(page_files["en_other"]), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["decision"] == "distinct"


def test_compare_json_with_a_fingerprint_and_with_explain(pages, page_files, capsys):
    """With a bare fingerprint on a side, ``--json`` says 'candidate' with similarity null; with ``--explain``
    the object holds the explanation."""
    a = str(page_files["en_article"])
    assert main(["compare", a, fingerprint(pages["en_edited"]).hex, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["decision"] == "candidate" and record["similarity"] is None
    assert main(["compare", a, str(page_files["en_copy"]), "--json", "--explain", "--top", "2"]) in (0, 1)
    explanation = json.loads(capsys.readouterr().out)["explanation"]
    assert set(explanation) == {"text_share", "structure_share", "weighted_jaccard", "text", "structure"}
    assert 0 < len(explanation["text"]) <= 2
    assert set(explanation["text"][0]) == {"name", "weight_a", "weight_b", "only_in"}


def test_json_keys_are_documented(pages, page_files, capsys):
    """Every key that ``fingerprint --json`` and ``compare --json`` print is in docs/cli.md's table of its
    command."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    sections = {name: docs.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0] for name in ("fingerprint", "compare")}
    a = str(page_files["en_article"])
    main(["fingerprint", "--json", a, str(page_files["image_only"]), a + ".missing"])
    fingerprint_keys = {key for line in capsys.readouterr().out.splitlines() for key in json.loads(line)}
    main(["compare", a, str(page_files["en_copy"]), "--json", "--explain"])
    record = json.loads(capsys.readouterr().out)
    compare_keys = set(record) | set(record["explanation"]) | set(record["explanation"]["text"][0])
    for name, keys in (("fingerprint", fingerprint_keys), ("compare", compare_keys)):
        assert {key for key in keys if f"`{key}`" not in sections[name]} == set(), name


# --- dedup ---------------------------------------------------------------------------------------


def test_dedup_defaults_come_from_config():
    """Option defaults of ``dedup`` are read from simhash_filter.config.DEFAULTS."""
    args = build_parser().parse_args(["dedup", "in.jsonl"])
    assert args.max_distance == DEFAULTS.max_distance
    assert args.workers is None and args.index == "memory://"  # None: dedup.auto_workers(input size)
    assert args.structure_weight is None and args.dom_decay is None  # None = FingerprintConfig's own default


def test_dedup_one_line_per_input_line_in_order(corpus, tmp_path, capsys):
    """The output has one line per input line, same order, and the four contract keys."""
    src = write_jsonl(tmp_path / "in.jsonl", [page_line(u, h) for u, h in corpus])
    assert main(["dedup", str(src)]) == 0
    records = read_records(capsys.readouterr().out)
    assert [r["url"] for r in records] == [u for u, _ in corpus]
    for r, (_, html) in zip(records, corpus, strict=True):
        assert list(r) == ["url", "fingerprint", "duplicate_of", "distance"]
        assert r["fingerprint"] == fingerprint(html).hex


def test_dedup_flags_near_duplicates_of_earlier_pages(corpus, tmp_path, capsys):
    """Edited copies point to the earlier page with distance <= k; originals and distinct pages are kept."""
    src = write_jsonl(tmp_path / "in.jsonl", [page_line(u, h) for u, h in corpus])
    assert main(["dedup", str(src)]) == 0
    by_url = {r["url"]: r for r in read_records(capsys.readouterr().out)}
    for copy, original in [
        ("https://b.example/garden-copy", "https://a.example/garden"),
        ("https://c.example/library", "https://a.example/library"),
    ]:
        assert by_url[copy]["duplicate_of"] == original
        assert 0 <= by_url[copy]["distance"] <= DEFAULTS.max_distance
    for kept in (
        "https://a.example/garden",
        "https://a.example/rail",
        "https://a.example/library",
        "https://a.example/tea",
    ):
        assert by_url[kept]["duplicate_of"] is None and by_url[kept]["distance"] is None


def test_dedup_max_distance_zero_flags_only_exact_matches(corpus, pages, tmp_path, capsys):
    """With ``--max-distance 0`` only identical fingerprints are flagged (an exact copy is)."""
    rows = [*corpus, ("https://d.example/garden-mirror", pages["en_article"])]
    src = write_jsonl(tmp_path / "in.jsonl", [page_line(u, h) for u, h in rows])
    assert main(["dedup", str(src), "--max-distance", "0"]) == 0
    records = read_records(capsys.readouterr().out)
    assert {r["distance"] for r in records} <= {None, 0}
    assert records[-1]["duplicate_of"] == "https://a.example/garden" and records[-1]["distance"] == 0


def test_dedup_bound_options_reach_the_index_and_the_summary_names_the_bound(corpus, pages, tmp_path, capsys):
    """``--candidates-per-table``/``--block-duplicates`` bound the candidates a page verifies, and the summary
    line says the most one page had; a bound that cannot work is a one-line usage error."""
    rows = [*corpus, *((f"https://copy.example/{i}", pages["en_article"]) for i in range(12))]
    src = write_jsonl(tmp_path / "in.jsonl", [page_line(u, h) for u, h in rows])
    assert main(["dedup", str(src), "--candidates-per-table", "2", "--block-duplicates", "1"]) == 0
    out, err = capsys.readouterr()
    assert all(r["duplicate_of"] for r in read_records(out)[-12:])
    most = int(re.search(r"at most (\d+) candidates verified per page", err)[1])  # type: ignore[index]
    assert 1 <= most <= 5 * 2
    with pytest.raises(SystemExit) as exit_info:
        main(["dedup", str(src), "--block-duplicates", "9"])
    assert exit_info.value.code == 2
    assert "block_duplicates (9) must not exceed candidates_per_table (8)" in capsys.readouterr().err


def test_dedup_fingerprint_options_change_fingerprints(corpus, tmp_path, capsys):
    """``--structure-weight`` and ``--dom-decay`` reach the fingerprinter."""
    src = write_jsonl(tmp_path / "in.jsonl", [page_line(u, h) for u, h in corpus[:1]])
    assert main(["dedup", str(src)]) == 0
    default = read_records(capsys.readouterr().out)[0]["fingerprint"]
    assert main(["dedup", str(src), "--structure-weight", "0.6", "--dom-decay", "0.9"]) == 0
    assert read_records(capsys.readouterr().out)[0]["fingerprint"] != default


@pytest.mark.parametrize(
    "option", [["--structure-weight", "1.5"], ["--dom-decay", "0"], ["--max-distance", "99"], ["--workers", "0"]]
)
def test_dedup_invalid_option_is_a_usage_error(tmp_path, capsys, option):
    """Out-of-range settings exit with status 2 and the config's message."""
    src = write_jsonl(tmp_path / "in.jsonl", [])
    with pytest.raises(SystemExit) as exc:
        main(["dedup", str(src), *option])
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_dedup_gzip_input_and_output(corpus, tmp_path, capsys):
    """``.gz`` input is decompressed and ``.gz`` output is compressed, with the same records."""
    lines = [page_line(u, h) for u, h in corpus]
    plain = write_jsonl(tmp_path / "in.jsonl", lines)
    packed = write_jsonl(tmp_path / "in.jsonl.gz", lines)
    out = tmp_path / "out.jsonl.gz"
    assert main(["dedup", str(plain)]) == 0
    expected = capsys.readouterr().out
    assert main(["dedup", str(packed), "--output", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert gzip.decompress(out.read_bytes()).decode("utf-8") == expected


def test_dedup_malformed_lines_are_reported_not_dropped(pages, tmp_path, capsys):
    """Bad lines get an output line with status 'malformed' and their line number, a stderr message; exit 2."""
    lines = [
        page_line("https://a.example/garden", pages["en_article"]),
        "{not json",
        json.dumps({"url": "https://a.example/no-html"}),
        json.dumps(["https://a.example/list", "<p>x</p>"]),
        json.dumps({"url": 42, "html": "<p>x</p>"}),
        json.dumps({"url": "https://a.example/bytes", "html": None}),
        "",
        page_line("https://a.example/rail", pages["en_other"]),
    ]
    src = write_jsonl(tmp_path / "in.jsonl", lines)
    assert main(["dedup", str(src)]) == 2
    out, err = capsys.readouterr()
    records = read_records(out)
    assert len(records) == len(lines)
    assert [r.get("status") for r in records] == [None, *["malformed"] * 6, None]
    bad = records[1:7]
    assert [r["line"] for r in bad] == [2, 3, 4, 5, 6, 7]
    assert [r["url"] for r in bad] == [None, "https://a.example/no-html", None, None, "https://a.example/bytes", None]
    for r in bad:
        assert (r["fingerprint"], r["duplicate_of"], r["distance"]) == (None, None, None)
    for n, reason in [
        (2, "not JSON"),
        (3, 'missing "html"'),
        (4, "not a JSON object"),
        (5, '"url" is not a string'),
        (6, '"html" is not a string'),
        (7, "empty line"),
    ]:
        assert re.search(rf"in\.jsonl:{n}: malformed line: {re.escape(reason)}", err), (n, err)
    assert "6 malformed lines" in err


def test_dedup_output_bytes_of_non_ascii_and_lone_surrogates(pages, tmp_path, capsys):
    """Output lines are json.dumps's (", " and ": ", non-ASCII escaped); a lone surrogate is a page, invalid UTF-8
    a malformed line with its number."""
    lines = [
        page_line("https://a.example/caf\u00e9/\u4e2d", pages["en_article"]).encode(),
        page_line("https://b.example/\ud800", pages["en_article"]).encode(),
        b'{"url": "https://c.example/\xff", "html": "<p>x</p>"}',
    ]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out.jsonl"
    assert main(["dedup", str(src), "--output", str(out)]) == 2
    first, second, third = out.read_bytes().decode("ascii").splitlines()
    assert first.startswith('{"url": "https://a.example/caf\\u00e9/\\u4e2d", "fingerprint": "')
    assert first.endswith('", "duplicate_of": null, "distance": null}')
    assert second.startswith('{"url": "https://b.example/\\ud800", "fingerprint": "')
    assert second.endswith('", "duplicate_of": "https://a.example/caf\\u00e9/\\u4e2d", "distance": 0}')
    assert third == ('{"url": null, "fingerprint": null, "duplicate_of": null, "distance": null, '
                     '"status": "malformed", "line": 3}')  # fmt: skip
    assert "in.jsonl:3: malformed line: not JSON ('utf-8' codec can't decode byte 0xff" in capsys.readouterr().err


def test_dedup_unfingerprintable_pages_get_a_status(pages, tmp_path, capsys):
    """Image-only and empty pages are written with fingerprint null and the reason in 'status'."""
    lines = [
        page_line("https://a.example/img", pages["image_only"]),
        page_line("https://a.example/empty", ""),
        page_line("https://a.example/img2", pages["image_only"]),
    ]
    src = write_jsonl(tmp_path / "in.jsonl", lines)
    assert main(["dedup", str(src)]) == 0
    out, err = capsys.readouterr()
    records = read_records(out)
    assert [r["status"] for r in records] == ["too_few_features", "empty", "too_few_features"]
    assert all(r["fingerprint"] is None and r["duplicate_of"] is None for r in records)
    assert "3 skipped (empty 1, too_few_features 2)" in err


def test_dedup_summary_on_stderr(corpus, tmp_path, capsys):
    """The summary counts pages, kept, near-duplicates, skipped and malformed, with a rate."""
    src = write_jsonl(tmp_path / "in.jsonl", [page_line(u, h) for u, h in corpus])
    assert main(["dedup", str(src)]) == 0
    err = capsys.readouterr().err
    assert re.search(
        r"6 pages and 0 malformed lines in [\d.]+ s \([\d.]+ pages/s\): 4 kept, 2 near-duplicates, "
        r"0 skipped",
        err,
    ), err


def test_dedup_progress_bar_only_on_a_terminal(corpus, tmp_path, capsys, monkeypatch):
    """No progress bar when stderr is not a terminal; a bar when it is, unless --no-progress."""
    src = write_jsonl(tmp_path / "in.jsonl", [page_line(u, h) for u, h in corpus])
    assert main(["dedup", str(src)]) == 0
    assert "pages/s]" not in capsys.readouterr().err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["dedup", str(src)]) == 0
    assert "6 pages" in capsys.readouterr().err.split("dedup:")[0]  # tqdm's counter, before the summary
    assert main(["dedup", str(src), "--no-progress"]) == 0
    assert capsys.readouterr().err.startswith("dedup:")


@pytest.mark.parametrize("name", ["in.jsonl", "in.jsonl.gz"])
def test_dedup_progress_bar_of_a_file_shows_bytes_of_its_size(corpus, tmp_path, capsys, monkeypatch, name):
    """Of an input file the bar counts the bytes read of the file's size (of a .gz, the compressed file's),
    with a percentage, the time left and the pages done."""
    from tqdm import tqdm

    src = write_jsonl(tmp_path / name, [page_line(u, h) for u, h in corpus])
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["dedup", str(src), "--output", str(tmp_path / "out.jsonl")]) == 0
    bar = capsys.readouterr().err.split("dedup:")[0].split("\r")[-1]  # the bar's last state
    size = tqdm.format_sizeof(src.stat().st_size)
    assert re.search(rf"100%\|.*\| {re.escape(size)}/{re.escape(size)} \[[\d:]+<[\d:]+, .*B/s, 6 pages\]", bar), bar


def test_dedup_progress_bar_of_standard_input_counts_pages(corpus, tmp_path, capsys, monkeypatch):
    """Of standard input (size unknown) the bar counts the pages, with no percentage."""
    data = "".join(page_line(u, h) + "\n" for u, h in corpus).encode("utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["dedup", "-", "--output", str(tmp_path / "out.jsonl")]) == 0
    bar = capsys.readouterr().err.split("dedup:")[0]
    assert "6 pages [" in bar and "%" not in bar


def test_dedup_workers_give_identical_output(pages, make_page, tmp_path, capsys):
    """``--workers 2`` writes exactly what ``--workers 1`` writes, over several chunks."""
    lines = []
    for i in range(90):
        name = ("en_article", "en_other", "zh_article", "zh_other", "image_only")[i % 5]
        html = pages[name] if i % 3 else pages[name].replace("</article>", f"<p>Update {i}: corrected.</p></article>")
        lines.append(page_line(f"https://x.example/{i}", html))
    lines.insert(40, "oops")
    src = write_jsonl(tmp_path / "in.jsonl", lines)
    assert main(["dedup", str(src), "--workers", "1"]) == 2
    one = capsys.readouterr().out
    assert main(["dedup", str(src), "--workers", "2"]) == 2
    two = capsys.readouterr().out
    assert len(one.splitlines()) == len(lines)
    assert one == two


def test_dedup_subprocess_stdin_to_stdout(corpus):
    """``python -m simhash_filter dedup -`` reads standard input and writes standard output."""
    data = "".join(page_line(u, h) + "\n" for u, h in corpus).encode("utf-8")
    proc = run_cli("dedup", "-", stdin=data)
    assert proc.returncode == 0, proc.stderr
    records = read_records(proc.stdout)
    assert [r["url"] for r in records] == [u for u, _ in corpus]
    assert sum(r["duplicate_of"] is not None for r in records) == 2
    assert "dedup:" in proc.stderr and "\r" not in proc.stderr


def test_dedup_missing_input(tmp_path, capsys):
    """A missing input file is reported; exit status 1."""
    assert main(["dedup", str(tmp_path / "none.jsonl")]) == 1
    assert "cannot open" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["fingerprint"],
        ["compare"],
        ["dedup"],
        ["index"],
        *[["index", c] for c in ("stats", "query", "export", "delete", "compact")],
    ],
)
def test_help_ends_with_examples(command, capsys):
    """Each command's ``--help`` ends with examples of that command, one per line as written (not rewrapped);
    the top-level commands' also with their exit statuses."""
    with pytest.raises(SystemExit) as exc:
        main([*command, "--help"])
    assert exc.value.code == 0
    epilog = capsys.readouterr().out.split("\nexample", 1)[1]
    examples = [line for line in epilog.splitlines() if line.startswith(f"  simhash-filter {' '.join(command)} ")]
    assert examples, epilog
    if len(command) == 1:
        assert "exit status" in epilog and "usage error" in epilog


def test_compare_help_gives_the_exit_statuses(capsys):
    """``compare --help`` says 0 near-duplicate, 1 distinct, 2 trouble."""
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    out = capsys.readouterr().out
    assert "  0  near-duplicate" in out and "  1  distinct" in out and "  2  trouble" in out


def test_version(capsys):
    """``--version`` prints the package version."""
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("simhash-filter ")


def test_dedup_unknown_index_backend(tmp_path, capsys):
    """An unknown ``--index`` scheme is reported with the known ones; exit status 1."""
    src = write_jsonl(tmp_path / "in.jsonl", [])
    assert main(["dedup", str(src), "--index", "bogus://x"]) == 1
    assert "cannot open index 'bogus://x'" in capsys.readouterr().err


def test_dedup_empty_input(tmp_path, capsys):
    """An empty input gives an empty output and a zero summary; exit status 0."""
    src = write_jsonl(tmp_path / "in.jsonl", [])
    assert main(["dedup", str(src)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert "0 pages and 0 malformed lines" in err


def test_dedup_truncated_gzip_keeps_what_was_read(corpus, tmp_path, capsys):
    """A .gz cut short: the lines read so far are written, the error is reported; exit status 1."""
    data = gzip.compress("".join(page_line(u, h) + "\n" for u, h in corpus).encode("utf-8"))
    src = tmp_path / "cut.jsonl.gz"
    src.write_bytes(data[: len(data) * 2 // 3])
    assert main(["dedup", str(src)]) == 1
    out, err = capsys.readouterr()
    assert 0 < len(out.splitlines()) < len(corpus)
    assert "read error after" in err


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
def test_dedup_refuses_to_write_over_its_input(corpus, tmp_path, capsys, link):
    """``dedup X --output X`` (also through a link) is a usage error and leaves X as it was."""
    src = write_jsonl(tmp_path / "in.jsonl", [page_line(u, h) for u, h in corpus])
    before = src.read_bytes()
    out = tmp_path / "out.jsonl"
    if link == "symlink":
        out.symlink_to(src)
    elif link == "hardlink":
        out.hardlink_to(src)
    else:
        out = src
    with pytest.raises(SystemExit) as exit_info:
        main(["dedup", str(src), "--output", str(out)])
    assert exit_info.value.code == 2
    assert "is the input file" in capsys.readouterr().err
    assert src.read_bytes() == before


@pytest.mark.parametrize("name", ["out.jsonl", "out.jsonl.gz"])
def test_dedup_failed_run_leaves_the_output_as_it_was(corpus, tmp_path, capsys, name):
    """A run that fails midway (a truncated .gz input) writes no output file and leaves an existing one
    untouched, with no partial file beside it; a run that succeeds replaces it."""
    data = gzip.compress("".join(page_line(u, h) + "\n" for u, h in corpus).encode("utf-8"))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    out = tmp_path / name
    assert main(["dedup", str(cut), "--output", str(out)]) == 1
    assert f"{out} not written" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.jsonl.gz"]
    out.write_text("an earlier run's output\n")
    assert main(["dedup", str(cut), "--output", str(out)]) == 1
    assert out.read_text() == "an earlier run's output\n"
    good = tmp_path / "good.jsonl.gz"
    good.write_bytes(data)
    assert main(["dedup", str(good), "--output", str(out)]) == 0
    text = gzip.decompress(out.read_bytes()).decode() if name.endswith(".gz") else out.read_text()
    assert len(read_records(text)) == len(corpus)
    umask = os.umask(0)
    os.umask(umask)
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~umask)  # as open() would have made it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.jsonl.gz", "good.jsonl.gz", name]


def test_dedup_full_output_disk_is_one_line_naming_the_output(corpus, tmp_path, capsys):
    """Writing to a full device fails with one line that names the output (not the input); exit status 1."""
    src = write_jsonl(tmp_path / "in.jsonl", [page_line(u, h) for u, h in corpus] * 200)
    assert main(["dedup", str(src), "--output", "/dev/full"]) == 1
    err = capsys.readouterr().err
    assert "simhash-filter: /dev/full: cannot write: No space left on device" in err
    assert "Traceback" not in err and "read error" not in err


def test_dedup_workers_that_cannot_start_end_the_run_with_one_line(corpus, tmp_path, capsys, monkeypatch):
    """When the worker processes die as they start, the run stops (no hang) with one line and exit status 1."""
    monkeypatch.setattr(dedup_module, "_init_worker", worker_helpers.fail_to_start)
    src = write_jsonl(tmp_path / "in.jsonl", [page_line(u, h) for u, h in corpus])
    assert main(["dedup", str(src), "--workers", "2", "--output", str(tmp_path / "out.jsonl")]) == 1
    err = capsys.readouterr().err
    assert "worker processes died 5 times in a row" in err and "try --workers 1" in err
    assert "Traceback" not in err and not (tmp_path / "out.jsonl").exists()


def test_fingerprint_and_compare_read_at_most_the_work_cap(tmp_path, capsys):
    """A file larger than the work cap (or endless, /dev/zero) is read up to the cap only: no MemoryError."""
    assert main(["fingerprint", "/dev/zero"]) == 1
    assert "cannot fingerprint: not_html" in capsys.readouterr().err
    assert main(["compare", "/dev/zero", "/dev/zero"]) == 2


def test_dedup_closed_stdin_is_one_line():
    """``dedup - <&-`` (standard input closed) is one line on stderr, exit status 1."""
    proc = subprocess.run([sys.executable, "-m", "simhash_filter", "dedup", "-"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=False,
                          preexec_fn=lambda: os.close(0))  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().startswith("simhash-filter: cannot open -: standard input is closed")
    assert "Traceback" not in proc.stderr


def test_dedup_of_a_binary_file_names_a_few_lines_and_counts_all(tmp_path, capsys):
    """A binary input makes thousands of malformed "lines": 20 are named, one line says more were counted, the
    summary counts every one; exit status 2."""
    src = tmp_path / "binary.jsonl"
    src.write_bytes(bytes(range(256)) * 400)  # 400 newlines among the bytes
    assert main(["dedup", str(src), "--output", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len([line for line in err if ": malformed line: " in line]) == 20
    assert any("more malformed lines" in line for line in err)
    assert len(err) == 22 and "401 malformed lines" in err[-1]


def test_dedup_huge_url_is_a_malformed_line(pages, tmp_path, capsys):
    """A line whose url is longer than 65,536 characters is malformed (reported, kept in the output), and the
    run goes on, also with an on-disk index."""
    huge = "https://a.example/" + "x" * 1_100_000
    lines = [page_line(huge, pages["en_article"]), page_line("https://b.example/", pages["en_other"])]
    src = write_jsonl(tmp_path / "in.jsonl", lines)
    assert main(["dedup", str(src), "--index", str(tmp_path / "idx"), "--output", str(tmp_path / "o.jsonl")]) == 2
    records = read_records((tmp_path / "o.jsonl").read_text())
    assert records[0]["status"] == "malformed" and records[1]["fingerprint"] is not None
    assert "longer than 65536 characters" in capsys.readouterr().err
