"""Test hygiene every test gets: a time limit by tier, and a clean event loop.

- **Time limits by tier** (unless a test sets its own `@pytest.mark.timeout`): unit tests are
  pure and get 15 s, integration tests (real PostgreSQL, kubesim in process) 60 s, end-to-end
  tests (processes, two replicas) 180 s; kubesim's own tests 60 s, the chart's 60 s, the
  single sign-on tier's (a real Keycloak) 900 s.
- **A clean event loop** for every async test: an exception the loop reports (a task whose
  exception nobody retrieved, a failing callback) fails the test that caused it, and so does
  a task the test started and left running. Leftover tasks are cancelled, so the next test
  starts clean either way.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: How long a task the test started may take to end by itself after the test's teardown.
LEFTOVER_GRACE_SECONDS = 1.0

TIER_TIMEOUTS = {
    "unit": 15,
    "integration": 60,
    "e2e": 180,
    "kubesim": 60,
    "chart": 60,
    # A real Keycloak: its session fixture starts it (a minute or more; far more on the first
    # start of a machine, which rebuilds its application) inside the first test's limit.
    "sso": 900,
}


def tier_of(item: pytest.Item) -> str | None:
    try:
        return item.path.relative_to(ROOT).parts[0]
    except ValueError:
        return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        limit = TIER_TIMEOUTS.get(tier_of(item) or "")
        if limit is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(limit))
        function = getattr(item, "function", None)
        fixturenames = getattr(item, "fixturenames", None)
        if inspect.iscoroutinefunction(function) and fixturenames is not None:
            fixturenames.insert(0, "clean_event_loop")


def describe(context: dict[str, Any]) -> str:
    exception = context.get("exception")
    return f"{context.get('message')}: {exception!r}" if exception else str(context.get("message"))


@pytest.fixture
async def clean_event_loop() -> AsyncIterator[None]:
    """Fail the test on an exception its loop reported, or on a task it left running."""
    loop = asyncio.get_running_loop()
    before = asyncio.all_tasks(loop)
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        yield
        await asyncio.sleep(0)  # callbacks the teardown scheduled
        gc.collect()  # a task's unretrieved exception is reported when the task is collected
        current = asyncio.current_task()
        started = [t for t in asyncio.all_tasks(loop) - before if t is not current]
        if pending := [t for t in started if not t.done()]:
            # A task ending on its own right after teardown (a closing stream) is no leak.
            await asyncio.wait(pending, timeout=LEFTOVER_GRACE_SECONDS)
        leftover = [task for task in started if not task.done()]
        for task in leftover:
            task.cancel()
        if leftover:
            await asyncio.wait(leftover, timeout=5)
    finally:
        loop.set_exception_handler(previous)
    problems = [f"the event loop reported: {describe(context)}" for context in reported]
    problems += [
        f"a task was left running: {task.get_name()} {task.get_coro()!r}" for task in leftover
    ]
    assert not problems, "\n".join(problems)
