"""Where a crawl's on-disk index lives when ``SIMHASH_BACKEND`` is unset: ``JOBDIR/simhash`` with ``JOBDIR``,
else ``.scrapy/simhash/<project>/<spider>`` in the project's data directory (the project in the path: under
Scrapyd, projects share one data directory and may share spider names).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.utils.project import data_path

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["default_index_path", "project_name"]

#: Scrapy's own default ``BOT_NAME``, and the name of a project that names none.
DEFAULT_PROJECT = "scrapybot"


def project_name(settings: BaseSettings) -> str:
    """The crawl's project, as a directory name: Scrapyd's ``SCRAPY_PROJECT`` (unless ``default``), else
    ``BOT_NAME``."""
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
    """The crawl's on-disk index when ``SIMHASH_BACKEND`` is unset."""
    jobdir = settings.get("JOBDIR")
    if jobdir:
        return Path(jobdir, "simhash")
    return _data_dir("simhash") / project_name(settings) / (spider_name or "default")
