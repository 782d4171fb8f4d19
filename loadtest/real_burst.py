"""A burst of submissions on the real cluster: is aicp ever the bottleneck?

    .venv/bin/python loadtest/real_burst.py --burst 1000 --concurrency 32

Starts the real cluster (`realcluster/`: kube-apiserver, etcd, the controller manager with its
Job controller, the scheduler, Kueue, KWOK's fake GPU nodes), then `python -m app serve` on a
scratch database with the cluster's least-privilege kubeconfig and its Kubernetes write limit
raised (`AICP_KUBE_WRITE_QPS` = `AICP_KUBE_WRITE_BURST` = 1000), sets up the binding, project
and pool through aicp's API, and sends `--burst` workload POSTs, `--concurrency` in flight.

The workloads ask for no GPU, `--cpu` (100m) and 64Mi each, and run `--run-seconds` (KWOK
ends a pod as kubesim's kubelet does, after `KUBESIM_RUN_SECONDS`). The pool's CPU quota holds
the whole burst, and there is a node (110 pods each) for every 100 workloads unless `--nodes`,
so nothing but the components' own pace limits the run. Watches on the apiserver (as the
cluster's admin) time each step as it arrives here:

- aicp: POST → 202, and 202 → the Job's ADDED event (matched by its `aicp.dev/uid` label);
- Kueue: its Workload for the Job created, then admitted (condition `Admitted`), later
  `Finished`;
- the scheduler and KWOK: the pod `Running`, then `Succeeded`;
- the Job controller: the Job's `Complete` (or `Failed`) condition;
- aicp again: every workload `SUCCEEDED` in its API (polled, with a deadline, once every Job
  has finished on the cluster, so the polling adds nothing to the burst).

Prints, for each step, how many, the first and the last (seconds after the first POST) and
the rate between them; the hand-off latencies (ms); whether aicp kept its goal (POST → Job
p99 ≤ 1 s) and how its Job rate compares with Kueue's admission rate; the CPU each process
spent per workload; aicp's reconcile steps. `AICP_REAL_CLUSTER_KEEP=1` keeps the cluster's
directory, with every component's log and aicp's (`aicp.log`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import ssl
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.databases import scratch_database
from loadtest.e2e_stack import WORKLOADS, _wait_ready, scenario, watch_managed
from loadtest.latency import percentile, report
from loadtest.reconcile_latency import Seen, _step_totals, watch
from realcluster import build as building
from realcluster.cluster import ClusterOptions, RealCluster
from realcluster.pki import PkiError
from realcluster.processes import ComponentError
from tests.support.api_client import ADMIN_TOKEN, bearer
from tests.support.scenario import quota
from tests.support.service import serve_env, serve_process

#: The Kueue API the pinned Kueue stores its Workloads in.
KUEUE_WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads"
#: Pods a KWOK node holds (`realcluster/gpu_nodes.py`); one node per this many workloads.
WORKLOADS_PER_NODE = 100
#: What each step is called in `Seen` (jobs: by the workload's uid; Kueue: by the Job's uid).
JOB, JOB_FINISHED, JOB_FAILED = "job", "job:finished", "job:failed"
WL_CREATED, WL_ADMITTED, WL_FINISHED = "kueue:created", "kueue:admitted", "kueue:finished"
KUEUE_STEPS = (WL_CREATED, WL_ADMITTED, WL_FINISHED)
POD_RUNNING, POD_SUCCEEDED = "pod:Running", "pod:Succeeded"


def _conditions(obj: dict[str, Any]) -> set[str]:
    """The types of the object's conditions that are True."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {c["type"] for c in conditions if c.get("status") == "True"}


async def watch_jobs(
    kube: httpx.AsyncClient, seen: Seen, owners: dict[str, str], opened: asyncio.Event
) -> None:
    """aicp's Jobs: ADDED, then Complete or Failed; `owners` maps a Job's uid to its
    workload's (Kueue's Workloads name the Job, not the workload)."""
    async for now, event in watch_managed(kube, "/apis/batch/v1/jobs", opened):
        obj = event.get("object") or {}
        metadata = obj.get("metadata") or {}
        uid = (metadata.get("labels") or {}).get("aicp.dev/uid")
        if uid is None:
            continue
        owners[metadata["uid"]] = uid
        if event["type"] == "ADDED":
            seen.record(uid, JOB, now)
        done = _conditions(obj) & {"Complete", "Failed"}
        if done:
            seen.record(uid, JOB_FINISHED, now)
        if "Failed" in done:
            seen.record(uid, JOB_FAILED, now)


async def watch_workloads(
    kube: httpx.AsyncClient, namespace: str, seen: Seen, opened: asyncio.Event
) -> None:
    """Kueue's Workloads in `namespace`, by their Job's uid: created, Admitted, Finished."""
    path = KUEUE_WORKLOADS.format(namespace=namespace)
    params = {"watch": "true", "timeoutSeconds": "3600"}
    async with kube.stream("GET", path, params=params, timeout=None) as response:
        response.raise_for_status()
        opened.set()
        async for line in response.aiter_lines():
            now = time.perf_counter()
            obj = (json.loads(line) if line else {}).get("object") or {}
            owners = (obj.get("metadata") or {}).get("ownerReferences") or []
            job = next((o["uid"] for o in owners if o.get("kind") == "Job"), None)
            if job is None:
                continue
            seen.record(job, WL_CREATED, now)
            conditions = _conditions(obj)
            if "Admitted" in conditions:
                seen.record(job, WL_ADMITTED, now)
            if "Finished" in conditions:
                seen.record(job, WL_FINISHED, now)


async def burst(
    session: aiohttp.ClientSession, bodies: list[dict[str, Any]], concurrency: int
) -> tuple[dict[str, float], list[float], dict[int, int]]:
    """Every body POSTed, `concurrency` at a time: each accepted workload's uid → when its
    202 arrived, the POST → 202 times (ms), and the count of any other answer by status."""
    accepted: dict[str, float] = {}
    post_ms: list[float] = []
    refused: dict[int, int] = {}
    pending = iter(bodies)

    async def caller() -> None:
        for body in pending:
            sent = time.perf_counter()
            async with session.post(WORKLOADS, json=body) as response:
                answered = time.perf_counter()
                if response.status != 202:
                    refused[response.status] = refused.get(response.status, 0) + 1
                    continue
                accepted[(await response.json())["uid"]] = answered
            post_ms.append((answered - sent) * 1000)

    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return accepted, post_ms, refused


async def _all(waits: list[Awaitable[float]]) -> int:
    """How many of `waits` timed out."""
    results = await asyncio.gather(*waits, return_exceptions=True)
    return sum(isinstance(result, TimeoutError) for result in results)


async def succeeded_count(client: httpx.AsyncClient) -> int:
    """How many workloads aicp's API shows SUCCEEDED (every page)."""
    count, cursor = 0, None
    while True:
        params = {"state": "SUCCEEDED", "limit": "500", **({"cursor": cursor} if cursor else {})}
        page = (await client.get(WORKLOADS, params=params)).raise_for_status().json()
        count += len(page["items"])
        cursor = page["next_cursor"]
        if not cursor:
            return count


def stage(title: str, times: list[float], start: float) -> float:
    """One line: how many, first and last (s after `start`), the rate between; the rate."""
    if not times:
        print(f"{title:<34} n=    0")
        return 0.0
    first, last = min(times) - start, max(times) - start
    rate = (len(times) - 1) / (last - first) if last > first else math.inf
    print(
        f"{title:<34} n={len(times):>5}  first={first:7.2f} s  last={last:7.2f} s  "
        f"rate={rate:7.1f}/s",
        flush=True,
    )
    return rate


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """User + system CPU each process has used so far."""
    times = {name: psutil.Process(pid).cpu_times() for name, pid in pids.items()}
    return {name: t.user + t.system for name, t in times.items()}


@dataclass
class Outcome:
    """What one burst measured; times are `time.perf_counter()` values."""

    start: float  # the first POST sent
    posted: float  # the last POST answered
    accepted: dict[str, float]  # workload uid -> its 202
    post_ms: list[float]
    refused: dict[int, int]
    times: dict[tuple[str, str], float]  # (workload uid, step) -> first seen
    all_succeeded: float | None
    cpu: dict[str, float]  # process -> CPU seconds during the burst
    steps: dict[str, tuple[float, float]]
    no_job: int
    unfinished: int

    def at(self, what: str) -> list[float]:
        return [self.times[(uid, what)] for uid in self.accepted if (uid, what) in self.times]

    def between(self, first: str, then: str) -> list[float]:
        """ms from step `first` to step `then`, per workload that has both."""
        pairs = [
            (self.times.get((uid, first)), self.times.get((uid, then))) for uid in self.accepted
        ]
        return [(b - a) * 1000 for a, b in pairs if a is not None and b is not None]

    @property
    def failed(self) -> int:
        return len(self.at(JOB_FAILED))


async def run(args: argparse.Namespace, cluster: RealCluster) -> int:
    """The burst against `cluster` (started); the number of failures (0: all SUCCEEDED)."""
    extra = {
        "KUBECONFIG": str(cluster.aicp_kubeconfig),
        "AICP_KUBE_WRITE_QPS": "1000",
        "AICP_KUBE_WRITE_BURST": "1000",
        "AICP_INSTANCE_ID": "burst",
    }
    async with (
        scratch_database(args.admin_url, "aicp_real_burst") as database_url,
        serve_process(serve_env(database_url, **extra)) as (aicp, aicp_url),
    ):
        assert aicp.stderr is not None
        drain = asyncio.create_task(_drain(aicp.stderr, cluster.directory / "aicp.log"))
        try:
            outcome = await _measure(args, cluster, aicp.pid, aicp_url)
        finally:
            aicp.terminate()  # SIGTERM: aicp releases its leases while the cluster answers
            await asyncio.wait_for(aicp.wait(), 30)
            await drain
    return _report(args, cluster, outcome)


async def _drain(stream: asyncio.StreamReader, log: Path) -> None:
    """aicp's log into `log`, so its pipe never fills."""
    with log.open("ab") as out:
        while chunk := await stream.read(65536):
            out.write(chunk)


async def _measure(
    args: argparse.Namespace, cluster: RealCluster, aicp_pid: int, url: str
) -> Outcome:
    """The pool set up, the watches open, the burst, then its end awaited (by the deadline)."""
    seen, owners = Seen(), dict[str, str]()
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    async with (
        httpx.AsyncClient(
            base_url=cluster.url, verify=context, headers=bearer(cluster.tokens["admin"])
        ) as kube,
        httpx.AsyncClient(base_url=url, headers=bearer(ADMIN_TOKEN), timeout=60) as client,
    ):
        await _wait_ready(url)
        bench = scenario(client)
        await bench.setup_pool(quota={**quota(16), "cpu": str(_cores(args))}, timeout=120)
        opened = [asyncio.Event() for _ in range(3)]
        watches = [
            asyncio.create_task(watch_jobs(kube, seen, owners, opened[0])),
            asyncio.create_task(watch(kube, "/api/v1/pods", seen, opened[1])),
            asyncio.create_task(watch_workloads(kube, bench.namespace, seen, opened[2])),
        ]
        await asyncio.gather(*(event.wait() for event in opened))
        env = {"KUBESIM_RUN_SECONDS": f"{args.run_seconds:g}"}
        bodies = [
            bench.workload_body(f"burst-{i}", accelerators=0, cpu=args.cpu, memory="64Mi", env=env)
            for i in range(args.burst)
        ]
        pids = {"aicp": aicp_pid} | {c.name: c.process.pid for c in cluster.supervisor.components}
        cpu_before = cpu_seconds(pids)
        session = aiohttp.ClientSession(
            base_url=url,
            headers=bearer(ADMIN_TOKEN),
            connector=aiohttp.TCPConnector(limit=args.concurrency),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=60),
        )
        start = time.perf_counter()
        try:
            accepted, post_ms, refused = await burst(session, bodies, args.concurrency)
        finally:
            await session.close()
        posted = time.perf_counter()
        deadline = start + float(args.timeout)

        def left() -> float:
            return max(1.0, deadline - time.perf_counter())

        no_job = await _all([seen.wait(uid, JOB, left()) for uid in accepted])
        unfinished = await _all([seen.wait(uid, JOB_FINISHED, left()) for uid in accepted])
        failed = any((uid, JOB_FAILED) in seen.at for uid in accepted)
        all_succeeded: float | None = None
        if not (no_job or unfinished or failed or refused):
            # polled from here on only: while the cluster ran the Jobs, aicp was left alone
            while await succeeded_count(client) < len(accepted):
                if time.perf_counter() > deadline:
                    print("not all SUCCEEDED in aicp's API by the deadline", file=sys.stderr)
                    break
                await asyncio.sleep(0.05)
            else:
                all_succeeded = time.perf_counter()
        cpu_after = cpu_seconds(pids)
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        steps = _step_totals((await client.get("/metrics")).text)
    # Kueue's steps by workload too (recorded by Job: a Workload names its Job)
    times = dict(seen.at)
    for (key, what), now in seen.at.items():
        if what in KUEUE_STEPS and key in owners:
            times[(owners[key], what)] = now
    cpu = {name: cpu_after[name] - cpu_before[name] for name in pids}
    return Outcome(
        start,
        posted,
        accepted,
        post_ms,
        refused,
        times,
        all_succeeded,
        cpu,
        steps,
        no_job,
        unfinished,
    )


def _report(args: argparse.Namespace, cluster: RealCluster, outcome: Outcome) -> int:
    """Prints what `outcome` measured; returns the number of submissions that went wrong."""
    start, accepted = outcome.start, outcome.accepted
    print(
        f"\nburst of {args.burst} POSTs, {args.concurrency} in flight: {len(accepted)} accepted "
        f"in {outcome.posted - start:.2f} s; real cluster of {cluster.options.nodes} nodes; "
        f"workloads of {args.cpu} CPU running {args.run_seconds:g} s; "
        f"pool quota {_cores(args)} CPU",
        flush=True,
    )
    print("\nstep (s after the first POST)")
    stage("POST answered 202 (aicp)", list(accepted.values()), start)
    aicp_rate = stage("Job ADDED (aicp)", outcome.at(JOB), start)
    stage("Workload created (Kueue)", outcome.at(WL_CREATED), start)
    kueue_rate = stage("Workload admitted (Kueue)", outcome.at(WL_ADMITTED), start)
    stage("pod Running (scheduler, KWOK)", outcome.at(POD_RUNNING), start)
    stage("pod Succeeded (KWOK)", outcome.at(POD_SUCCEEDED), start)
    done_rate = stage("Job Complete (Job controller)", outcome.at(JOB_FINISHED), start)
    stage("Workload Finished (Kueue)", outcome.at(WL_FINISHED), start)
    if outcome.all_succeeded is not None:
        print(f"{'all SUCCEEDED in aicp API':<34} at {outcome.all_succeeded - start:.2f} s")

    print("\nhand-offs (ms)")
    if outcome.post_ms:
        report("POST sent -> 202", outcome.post_ms, number="8.1f")
    job_ms = [
        (t - accepted[uid]) * 1000 for uid in accepted if (t := outcome.times.get((uid, JOB)))
    ]
    for title, values in (
        ("POST 202 -> Job ADDED", job_ms),
        ("Job ADDED -> Workload admitted", outcome.between(JOB, WL_ADMITTED)),
        ("Workload admitted -> pod Running", outcome.between(WL_ADMITTED, POD_RUNNING)),
        ("pod Succeeded -> Job Complete", outcome.between(POD_SUCCEEDED, JOB_FINISHED)),
    ):
        if values:
            report(title, values, number="8.1f")
    if job_ms:
        p99 = percentile(job_ms, 99)
        print(
            f"\ngoal POST -> Job p99 <= 1 s: {'kept' if p99 <= 1000 else 'MISSED'} "
            f"({p99:.0f} ms); aicp created Jobs at {aicp_rate:.1f}/s, Kueue admitted "
            f"Workloads at {kueue_rate:.1f}/s, the Job controller completed Jobs at "
            f"{done_rate:.1f}/s"
        )
    workloads = max(len(accepted), 1)
    print(
        "CPU per workload (ms): "
        + ", ".join(f"{name} {spent / workloads * 1000:.1f}" for name, spent in outcome.cpu.items())
    )
    for kind, (count, seconds) in sorted(outcome.steps.items()):
        print(
            f"aicp {kind} steps: {count:.0f} ({count / workloads:.1f} per workload), "
            f"mean {seconds / max(count, 1) * 1000:.1f} ms each, {seconds:.1f} s in all"
        )
    problems = {
        "were answered other than 202": sum(outcome.refused.values()),
        "had no Job by the deadline": outcome.no_job,
        "had a Job unfinished at the deadline": outcome.unfinished,
        "had a Job that Failed": outcome.failed,
    }
    if not any(problems.values()) and outcome.all_succeeded is None:
        problems["were not all SUCCEEDED in aicp's API by the deadline"] = len(accepted)
    for what, how_many in problems.items():
        if how_many:
            print(f"{how_many} of {args.burst} submissions {what}", file=sys.stderr)
    if outcome.refused:
        print(f"answers other than 202, by status: {outcome.refused}", file=sys.stderr)
    return sum(problems.values())


def _cores(args: argparse.Namespace) -> int:
    """The pool's CPU quota: the whole burst at once, and never below the usual 256."""
    millicores = float(args.cpu[:-1]) if args.cpu.endswith("m") else float(args.cpu) * 1000
    return max(256, math.ceil(int(args.burst) * millicores / 1000) + 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--admin-url", default="postgresql://postgres:postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--burst", type=int, default=1000, help="workloads POSTed (1000)")
    parser.add_argument("--concurrency", type=int, default=32, help="POSTs in flight (32)")
    parser.add_argument("--cpu", default="100m", help="each workload's CPU (100m)")
    parser.add_argument("--run-seconds", type=float, default=0.5, help="each pod's run (0.5)")
    parser.add_argument(
        "--nodes", type=int, default=None, help="GPU nodes (default: one per 100 workloads, >= 2)"
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="s from the first POST to all SUCCEEDED"
    )
    args = parser.parse_args()
    nodes = args.nodes or max(2, math.ceil(args.burst / WORKLOADS_PER_NODE))
    try:
        building.ensure_built()
        cluster = RealCluster(ClusterOptions(nodes=nodes, gpus_per_node=8))
        with cluster:
            print(f"real cluster up in {cluster.started_in:.1f} s", flush=True)
            return asyncio.run(run(args, cluster))
    except (building.BuildError, ComponentError, PkiError) as exc:
        print(f"the real cluster did not start: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
