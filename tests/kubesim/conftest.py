"""The controller tests' fixtures: `kube` (typed clients for `kube_cluster_with_controllers`) and
`clock` (that cluster's simulated clock). A module that advances the clock itself overrides
`kube_cluster_options` with `{"time_scale": 0}`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kubesim import Cluster
from kubesim.clock import Clock
from tests.kubesim.scenarios import Kube
from tests.support.kube_fixtures import api_client_for


@pytest.fixture
async def kube(kube_cluster_with_controllers: Cluster) -> AsyncIterator[Kube]:
    async with api_client_for(kube_cluster_with_controllers) as api:
        yield Kube(api)


@pytest.fixture
def clock(kube_cluster_with_controllers: Cluster) -> Clock:
    return kube_cluster_with_controllers.clock
