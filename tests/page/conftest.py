"""The page (``examples/page``) in a real browser: Debian's Chromium, headless, driven by
Playwright (issue 17, "The page, in a real browser"). ``./dev sync`` installs both; Playwright's
own browser downloads are never used.

Chromium starts once for the module; each test opens a context of its own. The module's tests
share a database and a NATS namespace (each its own calls) and run in the module's event loop.
Screenshots go to ``test-artifacts/page/`` at the repository's root (git ignores it).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright

from pinecall_runtime.up.page import create_page_app
from pinecall_testkit.call_log import Keys, listening, make_keys

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium (``apt-get install chromium``; ``./dev sync`` installs it as root)."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run ./dev sync as root, or apt-get install chromium")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield launched
        finally:
            await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A tab of a fresh context; what the page logs to its console is printed (pytest shows it
    when the test fails)."""
    context = await browser.new_context(viewport={"width": 900, "height": 700})
    opened = await context.new_page()
    opened.on("console", lambda message: print(f"page console: {message.text}"))
    opened.on("pageerror", lambda error: print(f"page error: {error}"))
    try:
        yield opened
    finally:
        await context.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def page_url() -> AsyncIterator[str]:
    """``http://127.0.0.1:<port>/``: the page served as ``up`` serves it."""
    async with listening(create_page_app()) as served:
        yield served.url.replace("ws://", "http://", 1) + "/"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def keys(module_database_url: str) -> Keys:
    return await make_keys(module_database_url)


@pytest.fixture(scope="module")
def artifacts(request: pytest.FixtureRequest) -> Path:
    """Where the module's screenshots are kept: ``test-artifacts/page/``."""
    folder = request.config.rootpath / "test-artifacts" / "page"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
