"""docs/service.md's examples work as written: each shell block of its "The API" section, run in order with bash
in an empty directory against ``simhash-filter serve --index crawl.idx`` (on a free port where the page says 8750),
exits 0 without an error answer, and the decisions the page shows are the ones the service gives."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devsites.serve_server import REPO, Server

pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")

PAGE = REPO / "docs" / "service.md"


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_api_examples_work_as_written(tmp_path):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (make system installs it)")
    section = _section(PAGE.read_text(encoding="utf-8"), "## The API")
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    shown = [json.loads(line) for block in re.findall(r"```json\n(.*?)```", section, re.S)
             for line in block.splitlines() if line.strip()]  # fmt: skip
    assert len(blocks) >= 6 and shown
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    with Server("--index", "crawl.idx", log=tmp_path / "serve.log", cwd=tmp_path) as server:
        outputs = []
        for block in blocks:
            script = block.replace("127.0.0.1:8750", f"127.0.0.1:{server.port}")
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=120)  # fmt: skip
            assert done.returncode == 0, (block, done.stderr)
            assert '"error"' not in done.stdout, (block, done.stdout)
            outputs.append(done.stdout)
    decided = [json.loads(line) for out in outputs for line in out.splitlines() if line.startswith('{"url"')]
    assert decided[: len(shown)] == shown
    assert [d["status"] for d in decided[len(shown) :]] == ["ok", "ok", "ok", "malformed"]
