"""A pool crowded so that a pod fits a node but finds none with room."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.support.scenario import Scenario


async def three_gpus_free_on_each_node(scenario: Scenario) -> None:
    """A 16-GPU pool on two 8-GPU nodes, each running one 5-GPU pod of `spread`. Two such pods
    cannot share a node, so each node keeps 3 free: a pod of 4, which a node could hold (the
    submit accepts it), finds no room."""
    await scenario.setup_pool(accelerators=16)
    await scenario.start_running("spread", replicas=2, accelerators=5)
    await scenario.wait_reason("spread", "2 of 2 pods running")
