"""The process supervisor: a part that dies, or stays down past the bound, fails the process."""

from __future__ import annotations

import asyncio

import pytest

from app.supervision import Supervisor


class Clock:
    """Time that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_task_that_raises_fails_the_process_naming_the_part_and_the_error() -> None:
    supervisor = Supervisor(recovery_seconds=60.0)

    async def broken() -> None:
        raise RuntimeError("listen socket closed")

    supervisor.watch_task("the HTTP server", asyncio.create_task(broken()))

    failure = await asyncio.wait_for(supervisor.wait_failed(), 5)

    assert failure == "the HTTP server failed: RuntimeError('listen socket closed')"
    assert supervisor.liveness() == failure
    await supervisor.stop()


@pytest.mark.parametrize(
    ("end", "expected"),
    [
        pytest.param("return", "the retention purge ended", id="a task that returns"),
        pytest.param("cancel", "the retention purge was cancelled", id="a cancelled task"),
    ],
)
async def test_a_task_that_ends_without_an_error_fails_too(end: str, expected: str) -> None:
    supervisor = Supervisor(recovery_seconds=60.0)
    release = asyncio.Event()

    async def loop() -> None:
        await release.wait()

    task = asyncio.create_task(loop())
    supervisor.watch_task("the retention purge", task)
    if end == "return":
        release.set()
    else:
        task.cancel()

    assert await asyncio.wait_for(supervisor.wait_failed(), 5) == expected
    await supervisor.stop()


async def test_an_explanation_is_added_to_a_task_that_ends_quietly() -> None:
    supervisor = Supervisor(recovery_seconds=60.0)
    closed = asyncio.Event()
    closed.set()

    supervisor.watch_until("the reconcile engine", closed.wait(), lambda: "ValueError('step')")

    failure = await asyncio.wait_for(supervisor.wait_failed(), 5)

    assert failure == "the reconcile engine ended (ValueError('step'))"
    await supervisor.stop()


async def test_only_the_first_failure_is_kept() -> None:
    supervisor = Supervisor(recovery_seconds=60.0)

    supervisor.fail("the Job informer failed: OSError()")
    supervisor.fail("the HTTP server ended")

    assert await supervisor.wait_failed() == "the Job informer failed: OSError()"
    await supervisor.stop()


async def test_nothing_that_ends_after_stop_is_a_failure() -> None:
    supervisor = Supervisor(recovery_seconds=60.0)
    release = asyncio.Event()

    async def loop() -> None:
        await release.wait()

    task = asyncio.create_task(loop())
    supervisor.watch_task("the reconcile engine", task)
    await supervisor.stop()
    release.set()
    await task

    assert supervisor.liveness() is None


async def test_a_part_down_for_less_than_the_bound_is_not_a_failure_and_recovering_resets_it() -> (
    None
):
    clock = Clock()
    supervisor = Supervisor(recovery_seconds=30, clock=clock)
    reason: list[str | None] = ["not listening"]
    supervisor.watch_recovery("the doorbell", lambda: reason[0])

    supervisor.check_recoveries()  # down from now
    clock.now += 29
    supervisor.check_recoveries()
    assert supervisor.liveness() is None

    reason[0] = None  # it came back
    supervisor.check_recoveries()
    reason[0] = "not listening"  # and went again
    clock.now += 10
    supervisor.check_recoveries()
    clock.now += 29
    supervisor.check_recoveries()

    assert supervisor.liveness() is None
    await supervisor.stop()


async def test_a_part_down_for_the_whole_bound_fails_the_process_saying_for_how_long_and_why() -> (
    None
):
    clock = Clock()
    supervisor = Supervisor(recovery_seconds=30, clock=clock)
    supervisor.watch_recovery("the Node informer", lambda: "list/watch failed (500): boom")
    supervisor.watch_recovery("the doorbell", lambda: None)

    supervisor.check_recoveries()
    clock.now += 30
    supervisor.check_recoveries()

    assert supervisor.liveness() == (
        "the Node informer has been down for 30s: list/watch failed (500): boom"
    )
    await supervisor.stop()


async def test_the_recovery_loop_checks_on_its_own_until_stopped() -> None:
    supervisor = Supervisor(recovery_seconds=0.0, check_interval=0.01)
    supervisor.watch_recovery("the doorbell", lambda: "not listening")

    failure = await asyncio.wait_for(supervisor.wait_failed(), 5)

    assert failure.startswith("the doorbell has been down for 0s")
    await supervisor.stop()
