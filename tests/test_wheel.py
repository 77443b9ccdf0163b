"""The package as a user installs it: the sdist and the wheel built with ``python -m build``, the wheel installed
into a fresh virtualenv (dependencies from the package index), then the command line and a new Scrapy project.

Nothing from the repository is on the path of those processes: what runs is what the wheel installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from crawl_helpers import ROOT, local_site, url_key
from test_startproject import SPIDER, documented_lines

from devsites.pages import near_duplicate_pairs
from devsites.site_server import GROUPS, SKIPPED

pytestmark = pytest.mark.slow

TIMEOUT = 900
#: The wheel holds the compiled core where a C compiler built it (always under CI: ``make test`` installs one).
COMPILED = bool(shutil.which("cc")) or os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kwargs)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return proc


def _clean_env(*, strict: bool = True) -> dict[str, str]:
    """The environment without anything that would put the repository's code on the path (*strict*: deprecation
    warnings fatal, as in the other crawl tests; not for pip, which warns about its own vendored code)."""
    env = {
        k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONWARNINGS"}
    }
    if strict:
        env["PYTHONWARNINGS"] = "error::DeprecationWarning,error::PendingDeprecationWarning"
    return env


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build``: the sdist, and the wheel built from it."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out)
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel installed (its dependencies from the package index); its bin/."""
    home = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", str(home)])
    (wheel,) = dist.glob("*.whl")
    _run(
        [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        cwd=home,
        env=_clean_env(strict=False),
    )
    return home / "bin"


def test_the_wheel_holds_the_package_only(dist: Path):
    """The wheel installs ``simhash_filter`` (with py.typed and the compiled core) and its metadata: no ``crawler``,
    no ``devsites``, no tests."""
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"simhash_filter", next(t for t in tops if t.endswith(".dist-info"))}
    assert "simhash_filter/py.typed" in names
    assert "simhash_filter/model/fingerprint.py" in names and "simhash_filter/index/backends/redis/__init__.py" in names
    compiled = any(n.startswith("simhash_filter/model/_core.") and n.endswith((".so", ".pyd")) for n in names)
    assert compiled == COMPILED
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "simhash-filter = simhash_filter.cli.main:main" in entry_points


def test_the_sdist_builds_the_same_package(dist: Path):
    """The sdist carries the sources, the README and the licence terms that its metadata points to."""
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {"pyproject.toml", "setup.py", "README.md", "simhash_filter/__init__.py", "simhash_filter/py.typed"} <= names
    assert "simhash_filter/model/_core.pyx" in names  # the compiled core is built from its source
    assert "simhash_filter/model/_core_walked.pxi" in names  # and its parts by stage


def test_installed_command_line_runs(venv: Path, tmp_path: Path):
    """``simhash-filter --help``, ``--version`` (with the compiled core) and a ``dedup`` of two near-duplicate pages
    work from the installed wheel."""
    env = _clean_env()
    where = _run([str(venv / "python"), "-c", "import simhash_filter; print(simhash_filter.__file__)"], env=env)
    assert "site-packages" in where.stdout and str(ROOT) not in where.stdout
    assert "dedup" in _run([str(venv / "simhash-filter"), "--help"], env=env).stdout
    version = " ".join(_run([str(venv / "simhash-filter"), "--version"], env=env).stdout.split())
    assert ("compiled core" in version) == COMPILED, version
    a, b = near_duplicate_pairs()["en-copy-other-template"]
    pages = tmp_path / "pages.jsonl"
    lines = [{"url": "https://a.example/1", "html": a}, {"url": "https://b.example/1", "html": b}]
    pages.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    _run([str(venv / "simhash-filter"), "dedup", str(pages), "--output", str(out)], env=env, cwd=tmp_path)
    verdicts = {page["url"]: page["duplicate_of"] for page in map(json.loads, out.read_text("utf-8").splitlines())}
    assert verdicts == {"https://a.example/1": None, "https://b.example/1": "https://a.example/1"}


def test_no_top_level_crawler_module(venv: Path, tmp_path: Path):
    """Installing the wheel adds no ``crawler`` module, so ``scrapy startproject crawler`` works."""
    env = _clean_env()
    proc = subprocess.run([str(venv / "python"), "-c", "import crawler"], capture_output=True, text=True, env=env)
    assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr
    _run([str(venv / "scrapy"), "startproject", "crawler"], cwd=tmp_path, env=env)
    assert (tmp_path / "crawler" / "crawler" / "settings.py").exists()


def test_new_project_with_the_addons_line_drops_near_duplicates(venv: Path, tmp_path: Path):
    """``scrapy startproject`` with the README's ``ADDONS`` line, crawled with the installed wheel, keeps one page
    of each near-duplicate group of the test site."""
    env = _clean_env()
    _run([str(venv / "scrapy"), "startproject", "newsbot"], cwd=tmp_path, env=env)
    project = tmp_path / "newsbot"
    settings = project / "newsbot" / "settings.py"
    settings.write_text(settings.read_text(encoding="utf-8") + "\n" + documented_lines(), encoding="utf-8")
    (project / "newsbot" / "spiders" / "pages.py").write_text(SPIDER, encoding="utf-8")
    items = tmp_path / "items.jsonl"
    with local_site() as port:
        crawl = _run(
            [str(venv / "scrapy"), "crawl", "pages", "-a", f"port={port}", "-O", f"{items}:jsonlines",
             "-s", "DOWNLOAD_DELAY=0", "-s", "LOG_LEVEL=INFO"],
            cwd=project,
            env=env,
        )  # fmt: skip
    stored = {url_key(json.loads(line)["url"]) for line in items.read_text(encoding="utf-8").splitlines()}
    groups = {**GROUPS, "lighthouse": [*GROUPS["lighthouse"], *SKIPPED["index_error"]]}
    for group, keys in groups.items():
        assert len([k for k in keys if k in stored]) == 1, group
    assert "simhash_filter.crawl.addon.SimhashAddon" in crawl.stderr and "simhash: " in crawl.stderr
