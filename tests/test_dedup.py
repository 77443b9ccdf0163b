"""Tests of simhash_filter.batch.dedup: line parsing, order, streaming and the output record."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time

import pytest
import worker_helpers

from simhash_filter.batch.dedup import MALFORMED, Outcome, Page, Summary, WorkersFailed, dedup, parse_line
from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.errors import FINGERPRINT_ERROR


@pytest.mark.parametrize(
    ("line", "url", "reason"),
    [
        (b"", None, "empty line"),
        (b"   \n", None, "empty line"),
        (b"{oops", None, "not JSON"),
        (b"\xff\xfe{}", None, "not JSON"),
        (b"[" * 100_000, None, "not JSON"),
        (b'"just a string"', None, "not a JSON object (got str)"),
        (b'{"html": "<p>x</p>"}', None, 'missing "url"'),
        (b'{"url": null, "html": "<p>x</p>"}', None, '"url" is not a string'),
        (b'{"url": "u"}', "u", 'missing "html"'),
        (b'{"url": "u", "html": 5}', "u", '"html" is not a string'),
    ],
)
def test_parse_line_reasons(line, url, reason):
    """Malformed lines give the url when known and a reason that says what is wrong."""
    got_url, html, got_reason = parse_line(line)
    assert html is None and got_url == url
    assert got_reason is not None and got_reason.startswith(reason)


def test_parse_line_accepts_extra_fields():
    """A good line returns url and html; other fields are ignored."""
    assert parse_line(b'{"url": "u", "html": "<p>x</p>", "status": 200}\r\n') == ("u", "<p>x</p>", None)


@pytest.mark.parametrize(
    ("line", "url", "html"),
    [
        (b'\xef\xbb\xbf{"url": "u", "html": "<p>x</p>"}\n', "u", "<p>x</p>"),  # a UTF-8 byte order mark
        (b'{"url": "u\\ud800", "html": "<p>x\\udc00</p>"}', "u\ud800", "<p>x\udc00</p>"),  # lone surrogates
        (b'{"url": "u", "html": "<p>x\xed\xa0\x80</p>"}', "u", "<p>x\ud800</p>"),  # one encoded in the bytes
        (b'{"url": "u", "html": "<p>x</p>", "n": NaN, "m": 1e999}', "u", "<p>x</p>"),
        ('{"url": "caf\u00e9", "html": "<p>\u4e2d\u6587</p>"}'.encode(), "caf\u00e9", "<p>\u4e2d\u6587</p>"),
        ('{"url": "caf\u00e9", "html": "<p>x\\ud800</p>"}', "caf\u00e9", "<p>x\ud800</p>"),  # a str line
    ],
)
def test_parse_line_reads_what_the_standard_library_reads(line, url, html):
    """Lines are read as the standard json reads them, also those orjson refuses (BOM, lone surrogates, NaN)."""
    assert parse_line(line) == (url, html, None)


@pytest.mark.parametrize(
    "line",
    [b"{oops", b'{"url": "u", "html": "x",}', b'{"url": "u", "html": "a\x00b"}', b'{"url": "u\xff", "html": "x"}',
     b'{"url": "u", "html": "x"} {}', "\ufeff{}"],
)
def test_parse_line_reason_is_the_standard_librarys_message(line):
    """A malformed line's reason is the standard json's message (orjson's own is never shown)."""
    with pytest.raises(ValueError) as raised:
        json.loads(line)
    assert parse_line(line) == (None, None, f"not JSON ({raised.value})")


def test_outcome_record_shapes():
    """Records have the four contract keys; status only without a fingerprint; line only when malformed."""
    assert Outcome(1, "u", 0xAB).record() == {"url": "u", "fingerprint": "00000000000000ab", "duplicate_of": None,
                                              "distance": None}  # fmt: skip
    assert Outcome(2, "u", status="empty").record()["status"] == "empty"
    assert "line" not in Outcome(2, "u", status="empty").record()
    assert Outcome(3, None, status=MALFORMED).record()["line"] == 3


def test_dedup_streams_its_input(pages):
    """Outcomes come out before the whole input is read (lines are pulled one at a time)."""
    pulled = []

    def lines():
        for i in range(1000):
            pulled.append(i)
            yield json.dumps({"url": f"u{i}", "html": pages["en_article"]}).encode()

    outcomes = dedup(lines(), config=DEFAULTS)
    first = next(outcomes)
    assert first.duplicate_of is None and first.line == 1
    second = next(outcomes)
    assert second.duplicate_of == "u0" and second.distance == 0
    assert len(pulled) <= 2
    outcomes.close()


def test_dedup_rejects_bad_workers(pages):
    """workers < 1 is an error raised at the call (not at the first line), naming the argument."""
    with pytest.raises(ValueError, match="workers"):
        dedup([], config=DEFAULTS, workers=0)


def test_summary_counts_each_outcome_once():
    """The summary separates kept, near-duplicates, skipped by status and malformed lines."""
    s = Summary()
    for o in [Outcome(1, "a", 1), Outcome(2, "b", 1, "a", 0), Outcome(3, "c", status="empty"),
              Outcome(4, None, status=MALFORMED)]:  # fmt: skip
        s.count(o)
    assert (s.lines, s.pages, s.kept, s.duplicates, dict(s.skipped), s.malformed) == (4, 3, 1, 1, {"empty": 1}, 1)


def test_unexpected_fingerprint_error_is_an_outcome(pages, monkeypatch):
    """A page whose fingerprinting raises gets status 'error' with the exception; the run goes on."""
    from simhash_filter.model.fingerprint import Fingerprinter

    real = Fingerprinter.fingerprint

    def flaky(self, html, encoding=None):
        if "boom" in html:
            raise RuntimeError("boom")
        return real(self, html, encoding)

    monkeypatch.setattr(Fingerprinter, "fingerprint", flaky)
    lines = [json.dumps({"url": u, "html": h}).encode() for u, h in [("a", "<p>boom</p>"), ("b", pages["en_article"])]]
    first, second = dedup(lines, config=DEFAULTS)
    assert (first.url, first.fingerprint, first.status, first.reason) == ("a", None, "error", "RuntimeError: boom")
    assert second.status is None and second.fingerprint is not None


def test_available_cpus_prefers_what_this_process_may_use(monkeypatch):
    """available_cpus() uses os.process_cpu_count (3.13+), else the affinity mask, else os.cpu_count."""
    import os

    from simhash_filter.batch import dedup as dedup_mod

    monkeypatch.setattr(os, "process_cpu_count", lambda: 3, raising=False)
    assert dedup_mod.available_cpus() == 3
    monkeypatch.delattr(os, "process_cpu_count")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert dedup_mod.available_cpus() == 2
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert dedup_mod.available_cpus() == 1


@pytest.mark.parametrize(
    ("size", "cpus", "expected"),
    [(None, 8, 1), (1_000_000, 8, 1), (50_000_000, 1, 1), (50_000_000, 2, 2), (50_000_000, 64, 8)],
)
def test_auto_workers(monkeypatch, size, cpus, expected):
    """One process for small or unknown inputs and single CPUs; else a worker per CPU, at most 8."""
    from simhash_filter.batch import dedup as dedup_mod

    monkeypatch.setattr(dedup_mod, "available_cpus", lambda: cpus)
    assert dedup_mod.auto_workers(size) == expected


def _lines(pages, n: int) -> list[bytes]:
    names = ("en_article", "en_other", "zh_article", "zh_other")
    return [json.dumps({"url": f"https://x.example/{i}", "html": pages[names[i % 4]]}).encode() for i in range(n)]


def test_a_killed_worker_is_replaced_and_no_page_is_lost(pages):
    """A worker killed mid-run (kill -9, the OOM killer) is replaced, the pages it held are redone: the
    outcomes are those of a run in one process."""
    lines = _lines(pages, 400)
    expected = list(dedup(lines, config=DEFAULTS, workers=1))
    outcomes = dedup(lines, config=DEFAULTS, workers=2)
    got = [next(outcomes) for _ in range(50)]
    victims = multiprocessing.active_children()
    assert victims
    os.kill(victims[0].pid, signal.SIGKILL)
    time.sleep(1)  # the pool is found broken before the next chunks are handed to it
    got.extend(outcomes)
    assert got == expected


def test_a_page_that_kills_its_worker_is_reported_and_the_run_goes_on(pages):
    """A page whose worker dies each time it is sent one gets status error; every other line keeps its place and
    its outcome."""
    lines: list[bytes | Page] = list(_lines(pages, 200))
    lines[70] = worker_helpers.PoisonPage("https://x.example/poison", "<p>never fingerprinted</p>")
    outcomes = list(dedup(lines, config=DEFAULTS, workers=2))
    assert len(outcomes) == len(lines)
    assert (outcomes[70].url, outcomes[70].fingerprint, outcomes[70].status) == (
        "https://x.example/poison", None, FINGERPRINT_ERROR)  # fmt: skip
    assert "worker process died" in (outcomes[70].reason or "")
    expected = [o.record() for o in dedup(lines[:70] + lines[71:], config=DEFAULTS, workers=1)]
    assert [o.record() for o in outcomes[:70] + outcomes[71:]] == expected


def test_workers_that_cannot_start_fail_the_run_within_seconds(pages):
    """Workers that die as they start end the run with WorkersFailed, not a hang."""
    start = time.monotonic()
    config = FilterConfig(fingerprint=worker_helpers.DyingConfig())
    with pytest.raises(WorkersFailed, match="died 5 times in a row"):
        list(dedup(_lines(pages, 10), config=config, workers=2))
    assert time.monotonic() - start < 30
