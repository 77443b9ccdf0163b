"""Fingerprinting in worker processes (simhash_filter/workers.py): the same fingerprints as in the parent,
the worker's protocol, workers that import no Scrapy, and the work cap kept across the pipe."""

from __future__ import annotations

import asyncio
import io
import pickle
import re
import subprocess
import sys

import pytest

from devsites import pages as p
from simhash_filter.config import FingerprintConfig
from simhash_filter.crawl.workers import (
    FingerprintJob,
    WorkerError,
    WorkerPool,
    _frame,
    _read_frame,
    fingerprint_in_worker,
    from_worker,
    serve,
)
from simhash_filter.model.fingerprint import Fingerprinter

CONFIGS = {
    "defaults": FingerprintConfig(),
    "other-config": FingerprintConfig(structure_weight=0.2, dom_decay=0.6, max_bytes=3000),
}


def bodies() -> list[tuple[bytes | str, str | None]]:
    """Pages of every kind: the determinism set, a GBK page without and with a wrong declared charset,
    str input, a page past the work cap, an empty and an image-only page, binary bytes."""
    gbk = p.forum(p.TEA_GARDEN).replace('<meta charset="utf-8">', "").encode("gbk")
    out: list[tuple[bytes | str, str | None]] = [(page, None) for page in p.determinism_pages()]
    out += [
        (gbk, None),
        (gbk, "utf-8"),
        (p.gazette(p.RAINWATER), None),
        (p.gazette(p.LIGHTHOUSE).encode("utf-8") * 40, None),
        (b"", None),
        (b'<html><body><img src="/a.png"></body></html>', None),
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", None),
    ]
    return out


@pytest.mark.parametrize("name", CONFIGS)
def test_worker_fingerprints_equal_in_process_ones(name):
    """Every page fingerprinted in a worker process gets the same value, status, feature count, truncation,
    encoding and charset flag as in this process, under the defaults and another config."""
    config = CONFIGS[name]
    job = FingerprintJob(Fingerprinter(config))
    cases = bodies()

    async def in_workers() -> list[object]:
        pool = WorkerPool(config, 2)
        try:
            sent = [pool.pick(ready_only=False).fingerprint(job.for_worker(body), enc) for body, enc in cases]
            return await asyncio.gather(*sent)
        finally:
            pool.close()

    results = [from_worker(r) for r in asyncio.run(in_workers())]
    for (body, enc), (fp, seconds, charset_error) in zip(cases, results, strict=True):
        expected, _, expected_charset_error = job(body, enc)
        assert fp == expected and charset_error == expected_charset_error
        assert seconds >= 0
    assert {fp.status.value for fp, _, _ in results} == {"ok", "empty", "too_few_features", "not_html"}


def test_work_cap_survives_the_cut_before_the_pipe():
    """Only max_bytes + 1 of a page go to a worker: the fingerprint and its truncated flag are unchanged."""
    config = FingerprintConfig(max_bytes=2000)
    job = FingerprintJob(Fingerprinter(config))
    page = p.gazette(p.BACKUPS).encode("utf-8")
    for body in (page, page.decode("utf-8"), page[:2000], page[:2001]):
        cut = job.for_worker(body)
        assert len(cut) <= 2001
        assert job(cut, None)[0] == job(body, None)[0]
    assert job(page, None)[0].truncated and not job(page[:2000], None)[0].truncated


def test_serve_answers_in_order_and_reports_errors():
    """The worker's loop: ready once warmed up, then one answer per request in order, a traceback for a
    page the fingerprinter fails on, and the end at the end of its input."""
    config = FingerprintConfig()
    requests = [(p.gazette(p.RAINWATER).encode("utf-8"), None), (12345, None), (b"", "utf-8")]
    stdin = io.BytesIO(_frame(config) + b"".join(_frame(r) for r in requests))
    stdout = io.BytesIO()
    serve(stdin, stdout)
    stdout.seek(0)
    answers = []
    while (answer := _read_frame(stdout)) is not None:
        answers.append(answer)
    assert [kind for kind, _ in answers] == ["ready", "ok", "error", "ok"]
    job = FingerprintJob(Fingerprinter(config))
    assert from_worker(answers[1][1])[0] == job(*requests[0])[0]
    assert "Traceback" in answers[2][1] and isinstance(WorkerError(answers[2][1]), Exception)
    assert from_worker(answers[3][1])[0].status.value == "empty"


def test_worker_results_are_plain_values():
    """What a worker sends back pickles as builtins only (no dataclass or enum to rebuild in the parent)."""
    job = FingerprintJob(Fingerprinter())
    body = p.gazette(p.RAINWATER).encode("utf-8")
    result = fingerprint_in_worker(job, body, None)
    assert b"simhash_filter" not in pickle.dumps(result)
    assert from_worker(result)[0] == Fingerprinter().fingerprint(body)


def test_a_worker_imports_neither_scrapy_nor_twisted():
    """``python -m simhash_filter.crawl.workers`` loads the fingerprint model only (a light, quick start)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "simhash_filter.crawl.workers"],
        input=b"",
        capture_output=True,
        timeout=60,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines()}
    assert "simhash_filter.model.fingerprint" in imported
    assert not {m for m in imported if m.split(".")[0] in ("scrapy", "twisted")}


def test_a_worker_whose_parent_closed_its_pipes_exits_quietly():
    """A worker process whose parent is gone before it answers (a short crawl shutting down) exits with status 0
    and prints nothing: no BrokenPipeError traceback in the crawl's output."""
    proc = subprocess.Popen([sys.executable, "-m", "simhash_filter.crawl.workers"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_frame(FingerprintConfig()) + _frame((p.gazette(p.RAINWATER), None)))
    proc.stdin.flush()
    proc.stdout.close()  # gone before the worker has loaded its tables and answered "ready"
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and err == b""


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="worker processes are POSIX only")
def test_sigterm_to_the_process_group_stops_the_crawl_quietly(tmp_path, site_port):
    """SIGTERM to a crawl's process group (``timeout``, ``systemctl stop``): the crawl shuts down gracefully with
    no ERROR line; its worker process is neither reported dead nor replaced, and none is left running."""
    import os
    import signal
    import time

    from crawl_helpers import ROOT, env, start_urls

    log = tmp_path / "crawl.log"
    cmd = [sys.executable, "-m", "scrapy.cmdline", "crawl", "site", "-a", f"start_urls={start_urls(site_port)}",
           "-s", f"LOG_FILE={log}", "-s", "LOG_LEVEL=INFO", "-s", "SIMHASH_BACKEND=memory://",
           "-s", "SIMHASH_PROCESSES=1", "-s", "CONCURRENT_REQUESTS=1", "-s", "DOWNLOAD_DELAY=0.3",
           "-s", "DOWNLOADER_MIDDLEWARES={\"crawl_gate.WorkersFirst\": 950}",  # no page before the worker is ready
           "-O", f"{tmp_path / 'items.jsonl'}:jsonlines"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env(), start_new_session=True, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while "worker process(es) fingerprinting" not in (log.read_text("utf-8") if log.exists() else ""):
            assert proc.poll() is None and time.monotonic() < deadline, "the crawl ended before its worker was ready"
            time.sleep(0.1)
        time.sleep(0.5)  # a page or two fingerprinted in the worker
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text("utf-8") + err.decode()
    assert "Closing spider (shutdown)" in text, text[-3000:]
    assert " ERROR: " not in text and "starting another" not in text, text[-3000:]
    assert not re.search(r"simhash/worker_restarts\b(?!': 0\b)", text) and "Broken pipe" not in text  # 0 in the stats
    assert proc.returncode == 0
    with pytest.raises(ProcessLookupError):  # the group is empty: the worker exited with the crawl
        os.killpg(proc.pid, 0)
