"""Record every Kubernetes call aicp makes on the golden path, as RBAC attributes.

    .venv/bin/python loadtest/record_kube_calls.py [--out tests/chart/observed_kube_calls.json]

Starts kubesim and `python -m app serve` (see `e2e_stack.py`), drives aicp through its API
only — binding, project, pool (created, quota changed), a workload to SUCCEEDED (its logs and
manifest read), one that fails, a two-node one (its headless Service) to SUCCEEDED, one
replaced by a new spec while running, one deleted while running, then the pool, the project
and the binding deleted — and turns kubesim's request counters (`/_sim/stats`; aicp is
kubesim's only client: this process reads nothing but the counters) into the (group,
resource, verb) triples `tests/chart/test_rbac_matches_reconciler.py` compares with the
chart's ClusterRole.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.e2e_stack import (
    CLASS,
    POOL,
    PROJECT,
    WORKLOADS,
    e2e_stack,
    scenario,
)
from tests.chart.kube_calls import attributes_from_sim_stats, write_observed

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests/chart/observed_kube_calls.json"


async def golden_path(client: httpx.AsyncClient) -> None:
    bench = scenario(client)
    await bench.setup_pool()
    pool_path = f"{bench.pools}/{POOL}"
    quota = {"quota": {"accelerators": 8, "cpu": "128", "memory": "1Ti"}}
    (await client.patch(pool_path, json=quota)).raise_for_status()

    submissions = {
        "ok": bench.workload_body("ok", env={"KUBESIM_RUN_SECONDS": "0.3", "KUBESIM_LOG": "done"}),
        "fails": bench.workload_body("fails", env={"KUBESIM_EXIT_CODE": "3"}),
        "ranks": bench.workload_body("ranks", nodes=2, env={"KUBESIM_RUN_SECONDS": "0.3"}),
        "replaced": bench.workload_body("replaced", env={"KUBESIM_RUN_SECONDS": "600"}),
        "deleted": bench.workload_body("deleted", env={"KUBESIM_RUN_SECONDS": "600"}),
    }
    for body in submissions.values():
        (await client.post(WORKLOADS, json=body)).raise_for_status()
    await bench.wait_state("ok", "SUCCEEDED")
    (await client.get(f"{WORKLOADS}/ok/logs")).raise_for_status()
    (await client.get(f"{WORKLOADS}/ok/manifest")).raise_for_status()
    await bench.wait_state("fails", "FAILED")
    await bench.wait_state("ranks", "SUCCEEDED")

    await bench.wait_state("replaced", "RUNNING")
    new_spec = bench.workload_body("replaced", env={"KUBESIM_RUN_SECONDS": "0.2"})
    (await client.put(f"{WORKLOADS}/replaced", json=new_spec)).raise_for_status()
    replaced = await bench.wait_state("replaced", "SUCCEEDED")
    assert replaced["status"]["observed_generation"] == 2, replaced

    await bench.wait_state("deleted", "RUNNING")
    for name in submissions:
        (await client.delete(f"{WORKLOADS}/{name}")).raise_for_status()
    for name in submissions:
        await bench.wait_gone(name)

    (await client.delete(pool_path)).raise_for_status()
    await bench.wait_absent(pool_path)
    (await client.delete(f"/api/v1/projects/{PROJECT}")).raise_for_status()
    await bench.wait_absent(f"/api/v1/projects/{PROJECT}")
    (await client.delete(f"/api/v1/accelerator-bindings/{CLASS}")).raise_for_status()


async def main(args: argparse.Namespace) -> None:
    async with e2e_stack(args.admin_url) as stack:
        async with httpx.AsyncClient(
            base_url=stack.aicp_url, headers=stack.headers, timeout=30
        ) as client:
            await golden_path(client)
        async with httpx.AsyncClient(base_url=stack.kubesim_url) as sim:
            stats = (await sim.get("/_sim/stats")).json()
    attributes = attributes_from_sim_stats(stats)
    write_observed(args.out, attributes, source="loadtest/record_kube_calls.py (golden path)")
    for attribute in sorted(attributes):
        print(f"{attribute.group or 'core':<22} {attribute.resource:<28} {attribute.verb}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    asyncio.run(main(parser.parse_args()))
