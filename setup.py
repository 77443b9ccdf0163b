"""The compiled core: a Cython extension over Lexbor (the model's HTML parser), built when Cython and a C compiler
are at hand (``pyproject.toml`` asks for the first at build time).  Where the compiler is missing the build goes on
without it (``optional=True``) and the package runs its pure-Python core.

Lexbor's C sources are not in this repository: they come from the sdist of selectolax on the package index, pinned
by version and sha256 (the same Lexbor that the pure-Python core reads through selectolax's wheel), fetched once with
pip into a cache (``SIMHASH_FILTER_LEXBOR_CACHE``, else ``$XDG_CACHE_HOME/simhash-filter`` or
``~/.cache/simhash-filter``), and the modules the HTML parser needs are compiled into the extension (static, their
symbols hidden).  Offline with an empty cache the build stops with a one-line error: put the sdist in the cache (or
name it in ``SIMHASH_FILTER_LEXBOR_SDIST``) to build without a network.
"""

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from setuptools import Extension, setup

#: The sdist that carries Lexbor's sources; its version must equal the selectolax that pyproject.toml pins.
LEXBOR_SDIST = "selectolax-1.0.2.tar.gz"
LEXBOR_SDIST_SHA256 = "f0508ad927aa426425d4aa7a2bb2f8b21c01412534465bd227e241d4d0a6a418"
#: Lexbor's modules that its HTML parser needs (and the POSIX port of its memory functions).
LEXBOR_MODULES = ("core", "dom", "html", "ns", "tag", "ports/posix/lexbor/core")
HERE = Path(__file__).resolve().parent


def _cache_dir() -> Path:
    if os.environ.get("SIMHASH_FILTER_LEXBOR_CACHE"):
        return Path(os.environ["SIMHASH_FILTER_LEXBOR_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "simhash-filter"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _lexbor_sdist() -> Path:
    """The pinned sdist: named by SIMHASH_FILTER_LEXBOR_SDIST, else from the cache, else fetched with pip."""
    named = os.environ.get("SIMHASH_FILTER_LEXBOR_SDIST")
    path = Path(named) if named else _cache_dir() / LEXBOR_SDIST
    if not path.exists() and not named:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            name, version = LEXBOR_SDIST.removesuffix(".tar.gz").rsplit("-", 1)
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", "-d", tmp,
                   f"{name}=={version}"]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True)
            got = Path(tmp) / LEXBOR_SDIST
            if done.returncode != 0 or not got.exists():
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                sys.exit(f"error: cannot fetch {LEXBOR_SDIST} (Lexbor's sources for the compiled core) with pip: "
                         f"{last}; put it in {path.parent} or name it in SIMHASH_FILTER_LEXBOR_SDIST")  # fmt: skip
            shutil.move(str(got), path)
    if not path.exists():
        sys.exit(f"error: SIMHASH_FILTER_LEXBOR_SDIST names {path}, which does not exist")
    if _sha256(path) != LEXBOR_SDIST_SHA256:
        sys.exit(f"error: {path} is not the pinned {LEXBOR_SDIST} (sha256 differs); delete it and build again")
    return path


def lexbor_tree() -> Path:
    """Lexbor's ``source`` directory, unpacked from the pinned sdist under ``build/`` (once)."""
    out = HERE / "build" / f"lexbor-{LEXBOR_SDIST_SHA256[:12]}"
    if (out / ".complete").exists():
        return out / "source"
    sdist = _lexbor_sdist()
    shutil.rmtree(out, ignore_errors=True)
    top = LEXBOR_SDIST.removesuffix(".tar.gz") + "/lexbor/"
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(top) and (m.isfile() or m.isdir())]
        for member in members:
            member.name = member.name[len(top) :]
        archive.extractall(out, members=members, filter="data")
    (out / ".complete").touch()
    return out / "source"


def lexbor_notices(source: Path) -> None:
    """Lexbor's licence and notice beside the compiled core (package data: the wheel carries them, Apache-2.0)."""
    for name in ("LICENSE", "NOTICE"):
        shutil.copyfile(source.parent / name, HERE / "simhash_filter" / "model" / f"lexbor-{name}.txt")


def extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:  # a build without the build requirements (pip always installs them)
        return []
    source = lexbor_tree()
    lexbor_notices(source)
    lexbor_c = sorted(
        str(path.relative_to(HERE)) if path.is_relative_to(HERE) else str(path)
        for module in LEXBOR_MODULES
        for path in (source / "lexbor" / module).rglob("*.c")
    )
    core = Extension(
        "simhash_filter.model._core",
        ["simhash_filter/model/_core.pyx", *lexbor_c],
        depends=sorted(glob.glob("simhash_filter/model/_core_*.pxi")),  # its parts by stage (Cython includes)
        include_dirs=[str(source)],
        define_macros=[("LEXBOR_STATIC", None)],
        extra_compile_args=["-fvisibility=hidden", "-Wno-unused-function", "-Wno-unused-variable"],
        optional=True,
    )
    return cythonize([core], compiler_directives={"language_level": "3"}, quiet=True)


setup(ext_modules=extensions())
