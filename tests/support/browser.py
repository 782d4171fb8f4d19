"""A real browser for the dashboard's tests: Debian's Chromium, headless, driven by Playwright.

Playwright's own browser download is not used: `CHROMIUM` (``/usr/bin/chromium``, the
``chromium`` package; `.ci/run` installs it) or ``AICP_CHROMIUM``. Without it the tests that
ask for ``browser`` skip with one line saying so.

- ``browser``: a launched Chromium for the test.
- `new_page(browser, width, height)`: a page in a fresh context (its own cookies).
- `sign_in(page, url, token)`: the sign-in form, as a user pastes a token.
- `axe_violations(page)`: axe-core's serious and critical violations on the page as it is.
- `record_states(page)`: every state badge the page ever showed, in order (a MutationObserver
  installed before the page's own script runs), read back with `states_seen`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

CHROMIUM = Path(os.environ.get("AICP_CHROMIUM", "/usr/bin/chromium"))
DESKTOP = (1280, 800)
PHONE = (390, 844)

#: Installed before any script of the page: keeps every state badge text the page showed.
_RECORD_STATES = """
window.__statesSeen = [];
new MutationObserver((records) => {
  for (const record of records) {
    for (const node of record.addedNodes) {
      if (node.nodeType === 1 && node.matches('span.state')) {
        const row = node.closest('tr');
        window.__statesSeen.push([row ? row.dataset.name : '', node.textContent]);
      } else if (node.nodeType === 1) {
        for (const badge of node.querySelectorAll('span.state')) {
          const row = badge.closest('tr');
          window.__statesSeen.push([row ? row.dataset.name : '', badge.textContent]);
        }
      }
    }
  }
}).observe(document, { childList: true, subtree: true });
"""


@pytest_asyncio.fixture
async def browser() -> AsyncIterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium): browser tests skipped")
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            await launched.close()


async def new_page(browser: Any, size: tuple[int, int] = DESKTOP) -> Any:
    context = await browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = await context.new_page()
    page.set_default_timeout(20_000)
    return page


async def sign_in(page: Any, url: str, token: str) -> None:
    await page.goto(f"{url}/")
    await page.get_by_label("API token").fill(token)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(lambda address: "/sign-in" not in address)


async def axe_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's violations of impact serious or critical on the page."""
    from axe_playwright_python.async_playwright import Axe

    results = await Axe().run(page)
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["html"] for n in v["nodes"][:3]]}
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


async def record_states(page: Any) -> None:
    await page.add_init_script(_RECORD_STATES)


async def states_seen(page: Any, name: str) -> list[str]:
    """The states the row of workload `name` showed, in order, repeats collapsed."""
    seen: list[list[str]] = await page.evaluate("window.__statesSeen")
    states: list[str] = []
    for row, state in seen:
        if row == name and (not states or states[-1] != state):
            states.append(state)
    return states
