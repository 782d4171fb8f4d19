"""Latency of `GET .../workloads/{name}` of a QUEUED workload in a deep pool (docs/BENCHMARKS.md
"Reading a queued workload in a deep pool").

    .venv/bin/python loadtest/standing_read_bench.py --live 1000 --requests 300

Runs kubesim and `python -m app serve` as separate processes (`e2e_stack.py`), one pool of
`--gpus` accelerators, 3 short workloads run to the end first (so the estimates have history),
then `--live` one-GPU workloads that run an hour: `--gpus` of them hold the quota and the rest
wait in the queue. Once the deepest one's status carries the standing the controller recorded,
`--requests` GETs of it, one after another, are timed (the controller keeps reconciling the pool
meanwhile, as in production). `--repo` runs aicp from another checkout, to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.e2e_stack import REPO, e2e_stack, scenario

#: Submits in flight at once while the pool fills.
SUBMIT_CONCURRENCY = 16


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


async def _queued_standings(client: httpx.AsyncClient, path: str) -> dict[str, int]:
    """Every QUEUED workload's name and queue position (0 while it has no standing yet)."""
    standings: dict[str, int] = {}
    cursor: str | None = None
    while True:
        params = {"state": "QUEUED", "limit": "500"} | ({"cursor": cursor} if cursor else {})
        page = (await client.get(path, params=params)).raise_for_status().json()
        for item in page["items"]:
            queue = item["status"].get("queue")
            standings[item["name"]] = queue["position"] if queue else 0
        cursor = page["next_cursor"]
        if cursor is None:
            return standings


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with (
        e2e_stack(args.pg, aicp_repo=args.repo) as stack,
        httpx.AsyncClient(base_url=stack.aicp_url, headers=stack.headers, timeout=60) as client,
    ):
        bench = scenario(client)
        await bench.setup_pool(quota={"accelerators": args.gpus, "cpu": "2000", "memory": "8Ti"})
        for index in range(3):
            name = f"warm-{index}"
            await bench.submit(name, env={"KUBESIM_RUN_SECONDS": "1"})
            await bench.wait_state(name, "SUCCEEDED", timeout=120)
        names = [f"deep-{index:04d}" for index in range(args.live)]
        gate = asyncio.Semaphore(SUBMIT_CONCURRENCY)

        async def submit(name: str) -> None:
            async with gate:
                await bench.submit(name, env={"KUBESIM_RUN_SECONDS": "3600"})

        filled = time.monotonic()
        await asyncio.gather(*(submit(name) for name in names))
        # Kueue orders the queue by creation second, then uid: the deepest is found, not assumed.
        waiting = args.live - args.gpus
        deadline = time.monotonic() + args.settle_seconds
        last: str | None = None
        while time.monotonic() < deadline:
            standings = await _queued_standings(client, bench.workloads)
            if len(standings) == waiting and all(standings.values()):
                last = max(standings, key=lambda name: standings[name])
                break
            await asyncio.sleep(0.5)
        if last is None:
            raise SystemExit(
                f"{waiting} queued workloads have no recorded standing after "
                f"{args.settle_seconds} s"
            )
        settled = time.monotonic() - filled
        seconds: list[float] = []
        for _ in range(args.requests):
            began = time.perf_counter()
            answer = await client.get(f"{bench.workloads}/{last}")
            seconds.append(time.perf_counter() - began)
            answer.raise_for_status()
        queue = answer.json()["status"]["queue"]
    return {
        "live": args.live,
        "gpus": args.gpus,
        "requests": args.requests,
        "repo": str(args.repo),
        "seconds_to_standing": round(settled, 1),
        "position": queue["position"],
        "computed_at": queue.get("computed_at"),
        "p50_ms": round(statistics.median(seconds) * 1000, 1),
        "p90_ms": round(_percentile(seconds, 0.9) * 1000, 1),
        "p99_ms": round(_percentile(seconds, 0.99) * 1000, 1),
        "max_ms": round(max(seconds) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default="postgresql://postgres:postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--live", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--settle-seconds", type=float, default=600.0)
    parser.add_argument("--repo", type=Path, default=REPO, help="the aicp checkout to run")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=1))
    print(
        f"GET of a queued workload (position {result['position']} of {args.live} live): "
        f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms over {args.requests} requests"
    )


if __name__ == "__main__":
    main()
