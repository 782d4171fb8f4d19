"""Fixtures of the fault scenarios: a kubesim process, replicas as processes, a database proxy.

`make test` runs the scenarios not marked `full_only`, at CI burst sizes (a few minutes in
all); `make test-faults` sets `AICP_FAULTS_FULL=1` and runs every scenario at the sizes the
reliability document reports (bursts of 500). Deselected scenarios are reported as such, not
skipped.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.faults.history import JobHistory
from tests.faults.processes import Kubesim, PgProxy, Replica, server_address
from tests.faults.workloads import Database

FULL = os.environ.get("AICP_FAULTS_FULL") == "1"
#: Submissions in a burst: the full suite uses the issue's size, CI a representative one.
BURST = 500 if FULL else 60


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL:
        return
    kept = [item for item in items if item.get_closest_marker("full_only") is None]
    deselected = [item for item in items if item.get_closest_marker("full_only") is not None]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "full_only: a fault scenario only `make test-faults` runs")
    config.addinivalue_line("markers", "kubesim(nodes, gpus_per_node): the simulated cluster size")


@pytest.fixture
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Kubesim]:
    """A kubesim process; `@pytest.mark.kubesim(nodes=..., gpus_per_node=...)` sizes it."""
    marker = request.node.get_closest_marker("kubesim")
    sim = await Kubesim.start(tmp_path, **(marker.kwargs if marker else {}))
    try:
        yield sim
    finally:
        await sim.stop()


@pytest.fixture
async def history(cluster: Kubesim) -> AsyncIterator[JobHistory]:
    watched = JobHistory(cluster.url)
    await watched.start()
    try:
        yield watched
    finally:
        await watched.stop()


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    reader = Database(database_url)
    try:
        yield reader
    finally:
        await reader.close()


@pytest.fixture
async def proxy(database_url: str) -> AsyncIterator[PgProxy]:
    front = PgProxy(*server_address(database_url))
    await front.start()
    try:
        yield front
    finally:
        await front.stop()


ReplicaFactory = Callable[..., Replica]


@pytest.fixture
async def replica(
    database_url: str, cluster: Kubesim, tmp_path: Path
) -> AsyncIterator[ReplicaFactory]:
    """`replica("a", lease_ttl=3.0, database_url=...)` → a Replica (not started); every one
    made is stopped at the end, and its log stays in the test's temporary directory."""
    made: list[Replica] = []

    def make(name: str, *, url: str | None = None, **options: Any) -> Replica:
        one = Replica(
            name,
            database_url=url or database_url,
            kubeconfig=cluster.kubeconfig,
            log_dir=tmp_path,
            **options,
        )
        made.append(one)
        return one

    try:
        yield make
    finally:
        for one in made:
            await one.stop()
