"""Scrapy's inspection commands (``parse``, ``fetch``, ``shell``, ``check``, ``view``, ``bench``) leave the crawl's
index alone: the filter reads it without a lock, never writes it, and flags near-duplicates instead of dropping them
(docs/usage.md, "Inspection commands").

Scrapy names the running command in no setting, and ``scrapy.cmdline.execute`` pops it out of ``sys.argv``: the
command object is a local of ``execute`` on the main thread's stack for the whole run (:func:`running_command`;
tests/test_inspection.py fails if Scrapy changes this).  ``SIMHASH_INSPECT`` says it explicitly.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand

from simhash_filter.crawl.settings import SIMHASH_INSPECT
from simhash_filter.index.backends import uri_scheme, with_uri_option

if TYPE_CHECKING:
    from types import FrameType

    from scrapy.settings import BaseSettings

__all__ = ["INSPECTION_COMMANDS", "INSPECT_MODES", "Inspection", "inspection", "readonly_uri", "running_command"]

#: Scrapy's commands that look at pages rather than crawl a site.
INSPECTION_COMMANDS = frozenset({"bench", "check", "fetch", "parse", "shell", "view"})
#: The values of ``SIMHASH_INSPECT``.
INSPECT_MODES = ("auto", "read", "skip", "crawl")


@dataclass(frozen=True)
class Inspection:
    """A run that inspects pages: ``mode`` is ``read`` (the index read, never written; near-duplicates flagged)
    or ``skip`` (pages not checked); ``command`` the Scrapy command running (None: not run by ``scrapy``)."""

    mode: str
    command: str | None

    @property
    def label(self) -> str:
        """How the log line names the run: ``scrapy parse``, else the setting that made it an inspection."""
        return f"scrapy {self.command}" if self.command else f"SIMHASH_INSPECT={self.mode!r}"

    def message(self, why_not_read: str | None = None) -> str:
        """The one INFO line that says what the filter does in this run."""
        if self.mode == "read" and why_not_read is None:
            return f"simhash: {self.label}: the index is read, never written; responses are flagged, not dropped"
        why = f" ({why_not_read})" if why_not_read else ""
        return f"simhash: {self.label}: the index is neither read nor written; responses are not checked{why}"


def _command_name(command: ScrapyCommand) -> str:
    """The name of Scrapy's command that *command* is or extends, else the last part of its module's name."""
    for cls in type(command).__mro__:
        if cls.__module__.startswith("scrapy.commands."):
            return cls.__module__.rpartition(".")[2]
    return type(command).__module__.rpartition(".")[2]


def _main_frame() -> FrameType | None:
    """The innermost frame of the main thread (the shell's crawler may run in a thread of its own)."""
    return sys._current_frames().get(threading.main_thread().ident or 0)


def running_command() -> str | None:
    """The Scrapy command this process runs (``parse``, ``crawl``...), None outside ``scrapy.cmdline.execute``."""
    frame = _main_frame()
    while frame is not None:
        if frame.f_code.co_name == "execute":
            command = frame.f_locals.get("cmd")
            if isinstance(command, ScrapyCommand):
                return _command_name(command)
        frame = frame.f_back
    return None


def inspection(settings: BaseSettings) -> Inspection | None:
    """The inspection this run is (``SIMHASH_INSPECT``, by default read under an inspection command), or None
    for a crawl.  A wrong value raises ``ValueError`` naming the setting."""
    value = settings.get("SIMHASH_INSPECT", SIMHASH_INSPECT)
    mode = str(value).strip().lower()
    if mode not in INSPECT_MODES:
        raise ValueError(f"SIMHASH_INSPECT must be one of {', '.join(map(repr, INSPECT_MODES))}, got {value!r}")
    if mode == "crawl":
        return None
    command = running_command()
    if mode == "auto":
        return Inspection("read", command) if command in INSPECTION_COMMANDS else None
    return Inspection(mode, command)


def readonly_uri(uri: str) -> str | None:
    """*uri* opened so that nothing is written and no lock taken (``readonly=1`` on disk; memory as it is); None
    for a store that has no such mode (Redis)."""
    scheme = uri_scheme(uri)
    if scheme == "memory":
        return uri
    if scheme == "file":
        return with_uri_option(uri, "readonly", "1")
    return None
