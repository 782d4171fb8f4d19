"""kubesim at scale: N queued GPU Jobs created over HTTP and run to completion by the simulated
Kueue, Job controller, scheduler and kubelet, with HTTP watchers attached.

    .venv/bin/python loadtest/kubesim_scale.py --jobs 10000 --nodes 50 --time-scale 20

Everything runs in this one process and event loop (one core): the cluster, the client that
POSTs the Jobs (raw aiohttp, `--concurrency` in flight) and three cluster-wide HTTP watches
(jobs, pods, workloads) that decode every event. Each Job asks for one GPU through a
LocalQueue whose ClusterQueue holds every GPU of the cluster, and runs `--run-seconds` of
simulated time.

Watch delivery latency is measured per event from the moment the store committed the write
(the benchmark wraps the store's watch hub `publish` to note the time per resourceVersion) to
the moment the HTTP watcher decoded that event. Printed: wall time, events delivered per
second, p50/p99/max latency, peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubesim.cluster import Cluster

NS = "default"
KUEUE = "kueue.x-k8s.io/v1beta2"
_decoder = msgspec.json.Decoder()


def job(index: int, run_seconds: float) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"bench-{index:05d}", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "env": [{"name": "KUBESIM_RUN_SECONDS", "value": str(run_seconds)}],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                }
            },
        },
    }


def kueue_objects(gpus: int) -> list[tuple[str, dict[str, Any]]]:
    base = "/apis/kueue.x-k8s.io/v1beta2"
    return [
        (
            f"{base}/resourceflavors",
            {
                "apiVersion": KUEUE,
                "kind": "ResourceFlavor",
                "metadata": {"name": "h100"},
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            },
        ),
        (
            f"{base}/clusterqueues",
            {
                "apiVersion": KUEUE,
                "kind": "ClusterQueue",
                "metadata": {"name": "cq"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["nvidia.com/gpu"],
                            "flavors": [
                                {
                                    "name": "h100",
                                    "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}],
                                }
                            ],
                        }
                    ],
                },
            },
        ),
        (
            f"{base}/namespaces/{NS}/localqueues",
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": NS},
                "spec": {"clusterQueue": "cq"},
            },
        ),
    ]


class Watch:
    """One HTTP watch stream: counts events and their delivery latency."""

    def __init__(self, url: str, path: str, committed: dict[int, float]) -> None:
        self.url, self.path, self.committed = url, path, committed
        self.events = 0
        self.latencies: list[float] = []
        self.completed: set[str] = set()
        self.expired = 0

    async def run(self, session: aiohttp.ClientSession, since: int) -> None:
        rv = since
        while True:
            url = f"{self.url}{self.path}?watch=1&resourceVersion={rv}"
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as resp:
                async for line in resp.content:
                    if not line.strip():
                        continue
                    event = _decoder.decode(line)
                    received = time.perf_counter()
                    if event["type"] == "ERROR":
                        self.expired += 1
                        break
                    rv = int(event["object"]["metadata"]["resourceVersion"])
                    self.events += 1
                    committed = self.committed.get(rv)
                    if committed is not None:
                        self.latencies.append(received - committed)
                    self._note(event["object"])

    def _note(self, obj: dict[str, Any]) -> None:
        if obj.get("kind") != "Job":
            return
        for condition in (obj.get("status") or {}).get("conditions") or []:
            if condition["type"] in ("Complete", "Failed") and condition["status"] == "True":
                self.completed.add(obj["metadata"]["name"])


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_mib() -> tuple[float, float]:
    """(current, peak) resident set size in MiB."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    current = pages * resource.getpagesize() / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return current, peak


async def create_all(
    session: aiohttp.ClientSession, url: str, jobs: int, run_seconds: float, concurrency: int
) -> None:
    pending = iter(range(jobs))

    async def worker() -> None:
        for index in pending:
            async with session.post(
                f"{url}/apis/batch/v1/namespaces/{NS}/jobs", json=job(index, run_seconds)
            ) as resp:
                if resp.status != 201:
                    raise RuntimeError(f"create failed: {resp.status} {await resp.text()}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def main(args: argparse.Namespace) -> None:
    cluster = Cluster(nodes=args.nodes, time_scale=args.time_scale)
    committed: dict[int, float] = {}
    publish = cluster.store.hub.publish

    def timed_publish(change: Any) -> None:
        committed[change.rv] = time.perf_counter()
        publish(change)

    cluster.store.hub.publish = timed_publish  # type: ignore[method-assign]
    async with cluster, aiohttp.ClientSession() as session:
        for path, body in kueue_objects(args.nodes * 8):
            async with session.post(f"{cluster.url}{path}", json=body) as resp:
                assert resp.status == 201, await resp.text()
        since = cluster.store.resource_version
        watches = [
            Watch(cluster.url, "/apis/batch/v1/jobs", committed),
            Watch(cluster.url, "/api/v1/pods", committed),
            Watch(cluster.url, "/apis/kueue.x-k8s.io/v1beta2/workloads", committed),
        ]
        tasks = [asyncio.create_task(w.run(session, since)) for w in watches]
        started = time.perf_counter()
        await create_all(session, cluster.url, args.jobs, args.run_seconds, args.concurrency)
        created = time.perf_counter() - started
        print(f"created {args.jobs} jobs in {created:.1f}s", flush=True)
        peak_current = 0.0
        while len(watches[0].completed) < args.jobs:
            await asyncio.sleep(1)
            peak_current = max(peak_current, rss_mib()[0])
            if time.perf_counter() - started > args.timeout:
                raise SystemExit(f"timeout: {len(watches[0].completed)} of {args.jobs} finished")
        elapsed = time.perf_counter() - started
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    latencies = [x for w in watches for x in w.latencies]
    events = sum(w.events for w in watches)
    _, peak = rss_mib()
    report = {
        "cpu_seconds": round(time.process_time(), 1),
        "jobs": args.jobs,
        "nodes": args.nodes,
        "time_scale": args.time_scale,
        "run_seconds": args.run_seconds,
        "wall_seconds": round(elapsed, 1),
        "jobs_per_second": round(args.jobs / elapsed, 1),
        "events_delivered": events,
        "events_per_second": round(events / elapsed),
        "events_per_cpu_second": round(events / time.process_time()),
        "store_writes": cluster.store.resource_version,
        "latency_ms_p50": round(percentile(latencies, 0.50) * 1000, 2),
        "latency_ms_p99": round(percentile(latencies, 0.99) * 1000, 2),
        "latency_ms_max": round(max(latencies) * 1000, 2),
        "latency_ms_mean": round(statistics.fmean(latencies) * 1000, 2),
        "watch_410s": sum(w.expired for w in watches),
        "rss_mib_peak": round(max(peak, peak_current), 1),
    }
    print(json.dumps(report, indent=2))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--nodes", type=int, default=50, help="8 GPUs each; the quota is all of them")
    p.add_argument("--run-seconds", type=float, default=1.0, help="simulated run time per pod")
    p.add_argument("--time-scale", type=float, default=20.0)
    p.add_argument("--concurrency", type=int, default=16, help="creates in flight")
    p.add_argument("--timeout", type=float, default=1800.0)
    return p.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
