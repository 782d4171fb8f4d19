"""`python -m kubesim.benchmark [--jobs 10000] [--watchers 20] [--updates 5000]`: how fast the
API server is on one core. Fills the store with Jobs, their Pods and Workloads (in-process,
validated), then measures HTTP list latency and watch fan-out to many HTTP watchers while
writing. Prints one JSON document of numbers (docs/KUBESIM.md quotes them)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import aiohttp

from kubesim.cluster import Cluster
from kubesim.controllers.podspec import owned_by_job
from kubesim.patching import MERGE


def _job(i: int) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "trainer:1",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    return {
        "metadata": {
            "name": f"job-{i}",
            "namespace": f"team-{i % 10}",
            "labels": {"kueue.x-k8s.io/queue-name": "q", "shard": str(i % 100)},
        },
        "spec": {
            "suspend": True,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def _pod(i: int, job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "metadata": {
            "name": f"job-{i}-abcde",
            "namespace": meta["namespace"],
            "labels": {"batch.kubernetes.io/job-name": meta["name"]},
            "ownerReferences": owned_by_job(meta, block=False),
        },
        "spec": {"containers": [{"name": "main", "image": "trainer:1"}]},
    }


def _workload(i: int, job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "metadata": {"name": f"job-job-{i}-00000", "namespace": meta["namespace"]},
        "spec": {
            "queueName": "q",
            "podSets": [{"name": "main", "count": 1, "template": job["spec"]["template"]}],
        },
    }


async def _read_stream(
    url: str, expected: int, ready: asyncio.Event, done: asyncio.Event, counts: list[int], slot: int
) -> None:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        # The server registers the watcher before it sends the response headers.
        ready.set()
        async for _ in resp.content:
            counts[slot] += 1
            if counts[slot] >= expected:
                break
    done.set()


async def run(jobs: int, watchers: int, updates: int) -> dict[str, Any]:
    out: dict[str, Any] = {"jobs": jobs, "watchers": watchers, "updates": updates}
    async with Cluster(controllers=False, watch_history=max(20_000, updates * 2)) as cluster:
        store = cluster.store
        rt_job, rt_pod = store.resource("batch", "jobs"), store.resource("", "pods")
        rt_wl, rt_ns = (
            store.resource("kueue.x-k8s.io", "workloads"),
            store.resource("", "namespaces"),
        )
        for t in range(10):
            store.create(rt_ns, {"metadata": {"name": f"team-{t}"}}, manager="bench")
        started = time.perf_counter()
        created = [store.create(rt_job, _job(i), manager="bench") for i in range(jobs)]
        for i, job in enumerate(created):
            store.create(rt_pod, _pod(i, job), manager="bench")
            store.create(rt_wl, _workload(i, job), manager="bench")
        elapsed = time.perf_counter() - started
        out["creates_per_second"] = round(3 * jobs / elapsed)
        async with aiohttp.ClientSession() as session:
            started = time.perf_counter()
            async with session.get(f"{cluster.url}/apis/batch/v1/jobs") as resp:
                body = await resp.read()
            out["list_all_jobs_ms"] = round((time.perf_counter() - started) * 1000, 1)
            out["list_all_jobs_mb"] = round(len(body) / 1e6, 1)
            started = time.perf_counter()
            async with session.get(
                f"{cluster.url}/apis/batch/v1/namespaces/team-3/jobs?labelSelector=shard%3D13"
            ) as resp:
                await resp.read()
            out["list_by_label_ms"] = round((time.perf_counter() - started) * 1000, 2)
        rv = store.resource_version
        counts = [0] * watchers
        dones = [asyncio.Event() for _ in range(watchers)]
        readies = [asyncio.Event() for _ in range(watchers)]
        url = f"{cluster.url}/apis/batch/v1/jobs?watch=1&resourceVersion={rv}&timeoutSeconds=600"
        tasks = [
            asyncio.create_task(_read_stream(url, updates, readies[w], dones[w], counts, w))
            for w in range(watchers)
        ]
        await asyncio.gather(*(r.wait() for r in readies))
        started = time.perf_counter()
        for n in range(updates):
            i = n % jobs
            store.patch(
                rt_job,
                f"team-{i % 10}",
                f"job-{i}",
                {"metadata": {"annotations": {"n": str(n)}}},
                content_type=MERGE,
                manager="bench",
            )
            if n % 200 == 0:
                await asyncio.sleep(0)
        write_elapsed = time.perf_counter() - started
        await asyncio.wait_for(asyncio.gather(*(d.wait() for d in dones)), 300)
        elapsed = time.perf_counter() - started
        await asyncio.gather(*tasks)
        out["updates_per_second"] = round(updates / write_elapsed)
        out["watch_events_delivered_per_second"] = round(sum(counts) / elapsed)
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m kubesim.benchmark")
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--watchers", type=int, default=20)
    p.add_argument("--updates", type=int, default=5_000)
    args = p.parse_args()
    print(json.dumps(asyncio.run(run(args.jobs, args.watchers, args.updates)), indent=1))


if __name__ == "__main__":
    main()
