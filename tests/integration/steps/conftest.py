"""Fixtures for the reconcile-step tests: `stack`, aicp plus kubesim in one process."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kubesim import Cluster
from tests.integration.steps.stack import Stack, running_stack


@pytest.fixture
async def stack(database_url: str, kube_cluster_with_controllers: Cluster) -> AsyncIterator[Stack]:
    async for running in running_stack(database_url, kube_cluster_with_controllers):
        yield running
