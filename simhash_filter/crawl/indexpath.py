"""Where a crawl's on-disk index lives when ``SIMHASH_BACKEND`` is unset: ``JOBDIR/simhash`` with ``JOBDIR``,
else ``.scrapy/simhash/<project>/<spider>`` in the project's data directory.

The project is in the path because spiders of different projects may share a name and a data directory:
under Scrapyd every project runs in Scrapyd's working directory, where there is no ``scrapy.cfg``, so two
projects' ``site`` spiders met in one ``.scrapy/simhash/site`` and the second found the first's pages there
(and kept none).  The project is Scrapyd's (the ``SCRAPY_PROJECT`` variable it sets for each crawl), else the
``BOT_NAME`` setting.

Earlier versions kept the index at ``.scrapy/simhash/<spider>``.  Such an index is moved to the new path the
first time a crawl of that spider looks for it (one INFO line), so that the next crawl remembers it; the first
project to crawl a spider of that name after the upgrade takes it.  The move is two renames at most, done
while holding the index's own lock (``LOCK``, the ``flock`` every writer takes): an index that another crawl
has open is not moved, and this crawl uses it where it is (its open then fails as any second writer's does).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.utils.project import data_path

if TYPE_CHECKING:
    from collections.abc import Iterator

    from scrapy.settings import BaseSettings

__all__ = ["default_index_path", "move_old_index", "project_name"]

logger = logging.getLogger(__name__)

#: Scrapy's own default ``BOT_NAME``, and the name of a project that names none.
DEFAULT_PROJECT = "scrapybot"


def project_name(settings: BaseSettings) -> str:
    """The crawl's project, as a directory name: Scrapyd's ``SCRAPY_PROJECT`` (Scrapy itself reads it as the
    ``scrapy.cfg`` entry to use, ``default`` when unset), else ``BOT_NAME``."""
    name = os.environ.get("SCRAPY_PROJECT", "")
    if name in ("", "default"):
        name = str(settings.get("BOT_NAME") or DEFAULT_PROJECT)
    name = re.sub(r"[^\w.-]", "_", name)  # no separators: one directory level, whatever the name holds
    return "_" if name in (".", "..") else name


def _data_dir(name: str) -> Path:
    """``name`` in the project's data directory (``.scrapy`` beside ``scrapy.cfg``), else in ``./.scrapy``."""
    try:
        return Path(data_path(name))
    except NotConfigured:  # SCRAPY_SETTINGS_MODULE set, but no scrapy.cfg to find the project by (Scrapyd)
        return Path(".scrapy", name)


def default_index_path(settings: BaseSettings, spider_name: str | None = None) -> Path:
    """The crawl's on-disk index when ``SIMHASH_BACKEND`` is unset, an index left at the old path moved there.

    An old index named like the project (a spider named like its project) is where the project's directory
    goes: it is moved first, into that directory.  When it cannot be moved now, this crawl uses the old path
    of its own spider, as earlier versions did, and the next crawl moves both.
    """
    jobdir = settings.get("JOBDIR")
    if jobdir:
        return Path(jobdir, "simhash")
    project, spider = project_name(settings), spider_name or "default"
    root = _data_dir("simhash")
    if not move_old_index(root / project, root / project / project):
        logger.warning(
            "simhash: %s is an index of an earlier version that cannot be moved now; it is where project %r's "
            "indexes go, so this crawl keeps its index at %s, as earlier versions did",
            root / project,
            project,
            root / spider,
        )
        return root / spider
    new = root / project / spider
    if spider != project and not move_old_index(root / spider, new):
        return root / spider
    return new


def _is_index(path: Path) -> bool:
    return (path / "CURRENT").is_file()


def move_old_index(old: Path, new: Path) -> bool:
    """Move the index at ``old`` (if there is one) to ``new``: True when ``new`` is the index to use, False when
    ``old`` is, for another crawl holds it (or it could not be moved; a WARNING says why).  ``new`` may lie
    inside ``old`` (a spider named like its project).  An index already at ``new`` wins; ``old`` is left alone."""
    if not _is_index(old):
        return True
    if new.exists() and (not new.is_dir() or any(new.iterdir())):
        logger.warning(
            "simhash: an index of an earlier version is left at %s: the crawl uses %s (delete the old one, or point "
            "SIMHASH_BACKEND at it)",
            old,
            new,
        )
        return True
    with _locked(old) as held:
        if not held:  # another crawl has it open (or has just moved it: then it is at ``new``)
            return not _is_index(old)
        try:
            _rename(old, new)
        except OSError as exc:
            logger.warning("simhash: could not move the index at %s to %s (%s): it is used where it is", old, new, exc)
            return not _is_index(old)
    logger.info("simhash: moved the index at %s to %s (one index per project and spider)", old, new)
    return True


@contextlib.contextmanager
def _locked(index: Path) -> Iterator[bool]:
    """Hold the index's writer lock (``LOCK``) while the block runs; yields False when another process holds it,
    or when the index is gone by the time the lock is taken (another crawl moved it first)."""
    fd = os.open(index / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            still_there = os.fstat(fd).st_ino == os.stat(index / "LOCK").st_ino and _is_index(index)
        except FileNotFoundError:
            still_there = False
        yield still_there
    finally:
        os.close(fd)  # releases the flock


def _rename(old: Path, new: Path) -> None:
    """Rename the directory ``old`` to ``new`` (which does not exist, or is empty), through a sibling of ``old``
    when ``new`` lies inside it.  Each rename is atomic: a crawl killed in between leaves the index whole."""
    if old in new.parents:
        step = old.with_name(f".{old.name}.moving-{os.getpid()}")
        os.rename(old, step)
        try:
            new.parent.mkdir(parents=True, exist_ok=True)
            os.rename(step, new)
        except OSError:
            logger.error("simhash: the index moved from %s is left at %s", old, step)
            raise
        return
    new.parent.mkdir(parents=True, exist_ok=True)
    if new.exists():
        new.rmdir()  # empty (checked by the caller): rename(2) would replace it, but says so nowhere portable
    os.rename(old, new)
