"""Pages made to exhaust the fingerprinter (hundreds of thousands of distinct words, Chinese characters,
elements or paragraphs, each up to the 4 MB work cap) are fingerprinted within a bounded memory budget:
each in a fresh process whose peak resident memory is read from the kernel."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: The documented budget of one fingerprinting process, any page (docs/reliability.md).
MAX_RSS_MB = 300

SCRIPT = r"""
import json, random, sys
from simhash_filter import Fingerprinter
rng = random.Random(7)
kind = sys.argv[1]
if kind == "latin-words":
    body = " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(5, 14)))
                    for _ in range(420_000))
elif kind == "cjk-characters":
    body = "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(1_400_000))
elif kind == "elements":
    body = "".join(f"<span class=c{i}>w{i}</span>" for i in range(300_000))
else:
    body = "".join(f"<p>{rng.random():.12f} para {i}</p>" for i in range(200_000))
html = ("<html><body><article><p>" + body + "</p></article></body></html>").encode()
fp = Fingerprinter().fingerprint(html)
# the peak of this process's own memory (ru_maxrss would include the pytest process it was forked from)
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"mb": len(html) / 1e6, "status": str(fp.status), "features": fp.features,
                  "rss_mb": peak_kb / 1024}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["latin-words", "cjk-characters", "elements", "paragraphs"])
def test_hostile_page_stays_within_the_memory_budget(kind):
    """A hostile page of at least 4 MB is fingerprinted (status ok) by a process that never holds more
    than MAX_RSS_MB of memory."""
    proc = subprocess.run([sys.executable, "-c", SCRIPT, kind], capture_output=True, text=True, timeout=300,
                          check=True)  # fmt: skip
    result = json.loads(proc.stdout)
    assert result["mb"] >= 4.0
    assert result["status"] == "ok"
    assert result["rss_mb"] <= MAX_RSS_MB, result
