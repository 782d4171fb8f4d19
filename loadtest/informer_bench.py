"""Informer latency: how long from a write to the API server until the informer's handler runs.

    .venv/bin/python loadtest/informer_bench.py --writes 1000 --concurrency 1

kubesim runs as its own process (`python -m kubesim`), as an API server would; this process
runs aicp's Job informer (label selector `app.kubernetes.io/managed-by=aicp`) and writes Jobs
through aicp's server-side apply, alternating creates and label updates. For each write it
records the time the request was sent, the time its response arrived, and the time the
handler saw the object at the resourceVersion the write produced. Prints percentiles in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.kube.apply import apply
from app.kube.client import KubeClient, KubeSettings
from app.kube.resources import JOBS
from app.kube.watching import Informer
from kubesim.command import command as kubesim_command
from loadtest.latency import report

NAMESPACE = "aicp-bench"


def job(name: str, revision: int) -> dict[str, Any]:
    labels = {"app.kubernetes.io/managed-by": "aicp", "aicp.dev/uid": name, "rev": str(revision)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36"}],
                },
            },
        },
    }


def start_kubesim(kubeconfig: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        kubesim_command(kubeconfig),
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 30
    while not kubeconfig.exists() or not process.stdout.readline():
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise SystemExit("kubesim did not start")
    return process


async def run(writes: int, concurrency: int, kubeconfig: Path) -> None:
    kube = await KubeClient.connect(
        KubeSettings(
            kubeconfig=str(kubeconfig),
            write_qps=10_000,
            write_burst=10_000,
            log_connection_pool_size=4,
        )
    )
    waiting: dict[tuple[str, str], asyncio.Future[float]] = {}

    def handler(_kind: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        future = waiting.pop((meta["name"], meta["labels"].get("rev", "")), None)
        if future is not None and not future.done():
            future.set_result(time.perf_counter())

    informer = Informer(kube, JOBS, label_selector="app.kubernetes.io/managed-by=aicp")
    informer.add_handler(handler)  # type: ignore[arg-type]
    await apply(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    informer.start()
    await informer.wait_synced()

    from_send: list[float] = []
    from_response: list[float] = []
    names = max(1, writes // 2)

    async def one(i: int) -> None:
        name, revision = f"bench-{i % names}", i // names
        seen = asyncio.get_running_loop().create_future()
        waiting[(name, str(revision))] = seen
        sent = time.perf_counter()
        await apply(kube, job(name, revision))
        answered = time.perf_counter()
        handled = await asyncio.wait_for(seen, 10)
        from_send.append((handled - sent) * 1000)
        from_response.append((handled - answered) * 1000)

    started, cpu_started = time.perf_counter(), time.process_time()
    queue = list(range(writes))

    async def worker() -> None:
        while queue:
            await one(queue.pop(0))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    cpu_ms = (time.process_time() - cpu_started) * 1000 / writes
    await informer.stop()

    # What a start (or a relist after 410) costs: a fresh informer's first paged list.
    fresh = Informer(kube, JOBS, label_selector="app.kubernetes.io/managed-by=aicp")
    list_started = time.perf_counter()
    fresh.start()
    await fresh.wait_synced()
    list_ms = (time.perf_counter() - list_started) * 1000
    cached = len(fresh.list())
    await fresh.stop()
    await kube.close()

    print(
        f"{writes} writes (creates then label updates), concurrency {concurrency}, "
        f"{writes / elapsed:.0f} writes/s, aicp-side CPU {cpu_ms:.2f} ms per write "
        "(apply + watch event + handler)"
    )
    print(f"first list of {cached} Jobs into a fresh informer: {list_ms:.0f} ms (pages of 500)")
    report("write sent -> handler (ms)", from_send, width=28)
    report("response -> handler (ms)", from_response, width=28)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    os.environ.pop("KUBECONFIG", None)
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        process = start_kubesim(kubeconfig)
        try:
            asyncio.run(run(args.writes, args.concurrency, kubeconfig))
        finally:
            process.terminate()
            process.wait(10)


if __name__ == "__main__":
    main()
