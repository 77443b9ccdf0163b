"""Headless Chromium for the tests of the HTML report: Debian's ``/usr/bin/chromium`` driven by Playwright
(never a downloaded browser), a page that records console errors and uncaught exceptions, and screenshots kept
as test artefacts in ``out/artifacts/``.

``conftest.py`` registers the fixtures (``chromium`` once per test module, ``browser_page`` per test)::

    from browser import BrowserPage

    def test_something(browser_page: BrowserPage, tmp_path):
        browser_page.open(tmp_path / "report.html")
        ...

A missing chromium or Playwright fails the tests with a message saying what to install; ``SIMHASH_NO_BROWSER=1``
skips them instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Error, Page

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "out" / "artifacts"
VIEWPORT = {"width": 1280, "height": 900}
READY_TIMEOUT_MS = 20_000


class BrowserPage:
    """A Playwright page that keeps the console errors and page errors it saw, with helpers to open a file."""

    def __init__(self, page: Page) -> None:
        """Wraps ``page`` and starts recording its errors."""
        self.page = page
        self.errors: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", self._on_page_error)

    def _on_console(self, message: ConsoleMessage) -> None:
        """Records a console message of type error."""
        if message.type == "error":
            self.errors.append(f"console error: {message.text}")

    def _on_page_error(self, error: Error) -> None:
        """Records an uncaught exception or unhandled rejection of the page."""
        self.errors.append(f"page error: {error}")

    def open(
        self, path: Path, *, fragment: str = "", wait_ready: bool = True, timeout_ms: int = READY_TIMEOUT_MS
    ) -> Page:
        """Opens the local file ``path`` (``file://``, with ``#fragment``) and waits for ``body[data-ready]``."""
        url = path.resolve().as_uri() + (f"#{fragment}" if fragment else "")
        self.page.goto(url)
        if wait_ready:
            self.wait_ready(timeout_ms=timeout_ms)
        return self.page

    def wait_ready(self, *, timeout_ms: int = READY_TIMEOUT_MS) -> str:
        """Waits until the page sets ``body[data-ready]`` and returns its value (``"1"`` or ``"error"``)."""
        self.page.wait_for_selector("body[data-ready]", state="attached", timeout=timeout_ms)
        return str(self.page.get_attribute("body", "data-ready"))

    def screenshot(self, name: str, *, full_page: bool = False) -> Path:
        """Saves a PNG of the page as ``out/artifacts/<name>.png`` (kept after the test) and returns its path."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def assert_no_errors(self) -> None:
        """Fails when the page logged a console error or raised an uncaught error."""
        errors, self.errors = self.errors, []
        assert not errors, "the page reported errors:\n" + "\n".join(errors)


def _launch_failure(error: Exception | None = None) -> str:
    """The message of a failed start of the browser: what is missing and how to install it."""
    hint = (
        "The report's browser tests need Debian's chromium (apt-get install chromium) at "
        f"{CHROMIUM} and the Python package playwright (pip install -e '.[test]'); `make test` installs both. "
        "Set SIMHASH_NO_BROWSER=1 to skip these tests."
    )
    return f"{hint}\nCause: {error}" if error else hint


@pytest.fixture(scope="module", name="chromium")
def fixture_chromium() -> Iterator[Browser]:
    """Fixture ``chromium``: headless Debian chromium for a test module, started by Playwright (skipped with
    SIMHASH_NO_BROWSER=1).  Not for the session: Playwright's sync API holds an asyncio loop in the main thread
    while it runs, and the tests after it that call ``asyncio.run()`` would fail."""
    if os.environ.get("SIMHASH_NO_BROWSER") == "1":
        pytest.skip("SIMHASH_NO_BROWSER=1: browser tests skipped")
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(_launch_failure(FileNotFoundError(f"no executable {CHROMIUM}")), pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        pytest.fail(_launch_failure(error), pytrace=False)
    manager = sync_playwright()
    playwright = manager.start()
    try:
        try:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        except Exception as error:  # Playwright raises its own Error for a browser that does not start
            pytest.fail(_launch_failure(error), pytrace=False)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()


@pytest.fixture(name="browser_page")
def fixture_browser_page(chromium: Browser) -> Iterator[BrowserPage]:
    """Fixture ``browser_page``: a fresh page in its own browser context (own storage, downloads accepted);
    fails the test at teardown when the page reported console errors or page errors the test did not check."""
    context = chromium.new_context(viewport=VIEWPORT, accept_downloads=True)
    try:
        page = BrowserPage(context.new_page())
        page.page.set_default_timeout(READY_TIMEOUT_MS)
        yield page
        page.assert_no_errors()
    finally:
        context.close()
