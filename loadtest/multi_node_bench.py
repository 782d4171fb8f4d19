"""Multi-node workloads: time from POST to every rank running, and aicp's CPU per workload.

    .venv/bin/python loadtest/multi_node_bench.py [--sizes 1,2,8,32] [--repeat 3]

Runs kubesim (`--sim-nodes`, 32 by default: 8 H100s each) and `python -m app serve` as
separate processes (`e2e_stack.py`). For each size N, `--repeat` workloads of N ranks with 8
GPUs each (one rank per node), one at a time: the time from `POST .../workloads` returning 202
until a pod watch on kubesim has seen N pods of that workload `Running`, and aicp's CPU time
(user + system, `/proc`) from the POST until the workload is `SUCCEEDED` with its evidence
recorded — everything aicp did for it: the API request, every reconcile step, the Service, the
status writes. N = 1 is a single-node workload (the baseline). Prints one line per size.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.e2e_stack import WORKLOADS, e2e_stack, scenario, watch_managed
from tests.support.scenario import Scenario


class Running:
    """Per workload uid, the pods seen `Running`, with waiters for a count."""

    def __init__(self) -> None:
        self.pods: dict[str, set[str]] = defaultdict(set)
        self._waiters: list[tuple[str, int, asyncio.Future[float]]] = []

    def saw(self, uid: str, pod: str, now: float) -> None:
        if pod:
            self.pods[uid].add(pod)
        for entry in list(self._waiters):
            want_uid, count, future = entry
            if want_uid == uid and len(self.pods[uid]) >= count and not future.done():
                future.set_result(now)
                self._waiters.remove(entry)

    async def wait(self, uid: str, count: int, timeout: float = 120.0) -> float:
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((uid, count, future))
        if len(self.pods[uid]) >= count:
            return time.perf_counter()
        return await asyncio.wait_for(future, timeout)


async def watch_pods(sim: httpx.AsyncClient, running: Running, opened: asyncio.Event) -> None:
    async for now, event in watch_managed(sim, "/api/v1/pods", opened):
        obj = event.get("object") or {}
        metadata = obj.get("metadata") or {}
        uid = (metadata.get("labels") or {}).get("aicp.dev/uid")
        if uid and (obj.get("status") or {}).get("phase") == "Running":
            running.saw(uid, str(metadata.get("name")), now)


async def main(args: argparse.Namespace) -> None:
    sizes = [int(part) for part in args.sizes.split(",")]
    async with (
        e2e_stack(args.admin_url, sim_nodes=args.sim_nodes) as stack,
        httpx.AsyncClient(base_url=stack.aicp_url, headers=stack.headers, timeout=60) as client,
        httpx.AsyncClient(base_url=stack.kubesim_url) as sim,
    ):
        bench = scenario(client)
        gpus = 8 * args.sim_nodes
        await bench.setup_pool(
            quota={"accelerators": gpus, "cpu": str(64 * gpus), "memory": f"{gpus}Ti"}
        )
        running = Running()
        opened = asyncio.Event()
        watcher = asyncio.create_task(watch_pods(sim, running, opened))
        await opened.wait()
        baseline: float | None = None
        for nodes in sizes:
            starts: list[float] = []
            cpus: list[float] = []
            for attempt in range(args.repeat):
                name = f"n{nodes}-{attempt}"
                body = bench.workload_body(
                    name,
                    accelerators=8,
                    cpu="8",
                    memory="64Gi",
                    nodes=nodes,
                    env={"KUBESIM_RUN_SECONDS": str(args.run_seconds)},
                )
                cpu_before = stack.cpu_seconds(stack.aicp_pid)
                response = await client.post(WORKLOADS, json=body)
                returned = time.perf_counter()
                response.raise_for_status()
                uid = response.json()["uid"]
                all_running = await running.wait(uid, nodes)
                starts.append((all_running - returned) * 1000)
                await bench.wait_state(name, "SUCCEEDED", timeout=120)
                await _settled(bench, name)
                cpus.append((stack.cpu_seconds(stack.aicp_pid) - cpu_before) * 1000)
            cpu = statistics.median(cpus)
            baseline = cpu if baseline is None else baseline
            print(
                f"nodes={nodes:<3} POST -> all {nodes} running: median "
                f"{statistics.median(starts):7.1f} ms (min {min(starts):7.1f}, max "
                f"{max(starts):7.1f})   aicp CPU per workload: median {cpu:6.1f} ms "
                f"({cpu / baseline:4.2f}x nodes={sizes[0]})",
                flush=True,
            )
        watcher.cancel()


async def _settled(bench: Scenario, name: str) -> None:
    """Until the workload's EvidenceRecorded event is in: its last reconcile step is done."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if "EvidenceRecorded" in await bench.event_types(name):
            await asyncio.sleep(0.5)  # the finalizer removal that follows the write
            return
        await asyncio.sleep(0.05)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--sizes", default="1,2,8,32")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sim-nodes", type=int, default=32)
    parser.add_argument("--run-seconds", type=float, default=1.0)
    asyncio.run(main(parser.parse_args()))
