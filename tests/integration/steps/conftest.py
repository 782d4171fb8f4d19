"""Fixtures for the reconcile-step tests: `stack`, aicp plus kubesim in one process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubesim import Cluster
from tests.integration.steps.stack import Stack, running_stack


@pytest.fixture
async def stack(
    database_url: str, kube_cluster_with_controllers: Cluster, tmp_path: Path
) -> AsyncIterator[Stack]:
    cluster = kube_cluster_with_controllers
    async for running in running_stack(database_url, cluster, tmp_path / "kubeconfig"):
        yield running
