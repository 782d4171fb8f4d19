"""aicp's memory with 10,000 live workloads: its resident set before and after.

    .venv/bin/python loadtest/live_workloads_rss.py --workloads 10000

Runs kubesim and `python -m app serve` as separate processes (`e2e_stack.py`), a pool whose
quota (`--quota` accelerators) is far below what the workloads ask for together, then submits
`--workloads` workloads of one accelerator each that run for an hour: Kueue admits `--quota` of
them (RUNNING) and queues the rest (QUEUED). Every one is live, leased by aicp, with its Job and
Kueue Workload in aicp's informer caches. Prints aicp's resident set (VmRSS, and its peak VmHWM,
from /proc) when it is ready, when every workload is submitted, and once every workload is
RUNNING or QUEUED (counted in the database), then again after `--settle` seconds of steady state
(renewals, sweeps, resyncs), the numbers the 400 MB target is about.

With large specs (docs/RELIABILITY.md, "Memory"):

    .venv/bin/python loadtest/live_workloads_rss.py --workloads 500 --spec-bytes 224000 \
        --lists 8 --replay 1000 --restart

`--spec-bytes` pads each workload's environment to that many bytes (the body limit is 256 KiB);
`--lists` then sends that many `limit=500` lists at once, `--replay` opens a list watch whose
`Last-Event-ID` replays that many changes and reads them all, and `--restart` restarts aicp and
measures it idle once ready. For each, the highest resident set sampled (every 20 ms) meanwhile.
`--aicp-repo` runs another checkout's aicp (e.g. an older commit, to compare).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.e2e_stack import REPO, WORKLOADS, Stack, e2e_stack, scenario
from loadtest.lease_cadence import in_background

LIVE = ("RUNNING", "QUEUED")


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of `pid` in MB, from /proc/<pid>/status."""
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024  # kB
    return fields["VmRSS"], fields["VmHWM"]


def show(stack: Stack, moment: str) -> float:
    rss, peak = memory_mb(stack.aicp_pid)
    kubesim_rss, _ = memory_mb(stack.kubesim_pid)
    print(
        f"{moment:<44} aicp RSS {rss:7.1f} MB (peak {peak:7.1f} MB)   "
        f"kubesim RSS {kubesim_rss:7.1f} MB",
        flush=True,
    )
    return rss


def padded_env(spec_bytes: int) -> dict[str, str]:
    """The environment of a workload whose body is about `spec_bytes` long (values of at most
    32,000 characters each, the spec's limit per value)."""
    env = {"KUBESIM_RUN_SECONDS": "3600"}
    for i in range(spec_bytes // 32_000):
        env[f"PAD_{i}"] = "x" * 32_000
    if spec_bytes % 32_000:
        env["PAD_REST"] = "x" * (spec_bytes % 32_000)
    return env


@contextlib.asynccontextmanager
async def peak_rss(pid: int) -> AsyncIterator[list[float]]:
    """The highest VmRSS (MB) sampled every 20 ms while the block runs, in a one-item list."""
    peak = [0.0]

    async def sample() -> None:
        while True:
            peak[0] = max(peak[0], memory_mb(pid)[0])
            await asyncio.sleep(0.02)

    try:
        async with in_background(sample()):
            yield peak
    finally:
        peak[0] = max(peak[0], memory_mb(pid)[0])


async def lists_at_once(stack: Stack, client: httpx.AsyncClient, count: int) -> None:
    """`count` concurrent `limit=500` lists (the first page each)."""
    async with peak_rss(stack.aicp_pid) as peak:
        responses = await asyncio.gather(
            *(client.get(WORKLOADS, params={"limit": 500}) for _ in range(count))
        )
    items = [len(r.json()["items"]) for r in responses if r.status_code == 200]
    print(
        f"{count} limit=500 lists at once: peak aicp RSS {peak[0]:7.1f} MB; statuses "
        f"{sorted({r.status_code for r in responses})}, items per page {sorted(set(items))}",
        flush=True,
    )


async def replay(stack: Stack, client: httpx.AsyncClient, conn: asyncpg.Connection, n: int) -> None:
    """A list watch resumed about `n` changes back, read to its `n`th event (a margin of 100
    under the 1,000-change limit leaves room for changes committed meanwhile)."""
    n -= 100
    resume = await conn.fetchval(
        "SELECT change_id FROM workload_changes ORDER BY change_id DESC OFFSET $1 LIMIT 1", n
    )
    seen = 0
    started = time.perf_counter()
    headers = {"Last-Event-ID": str(resume)}
    async with (
        peak_rss(stack.aicp_pid) as peak,
        client.stream("GET", WORKLOADS, params={"watch": "true"}, headers=headers) as response,
    ):
        if response.status_code != 200:  # e.g. 410: too many changes committed meanwhile
            print(f"replay: {response.status_code} {await response.aread()!r}", flush=True)
            return
        async for line in response.aiter_lines():
            seen += line.startswith("event:")
            if seen >= n:
                break
    print(
        f"replay of {seen} changes: peak aicp RSS {peak[0]:7.1f} MB, "
        f"read in {time.perf_counter() - started:.1f} s",
        flush=True,
    )


async def submit(
    client: httpx.AsyncClient, count: int, concurrency: int, spec_bytes: int = 0
) -> None:
    names = iter(range(count))
    body_env = padded_env(spec_bytes)
    bench = scenario(client)

    async def caller() -> None:
        for i in names:
            for attempt in range(20):
                response = await client.post(
                    WORKLOADS, json=bench.workload_body(f"live-{i}", env=body_env)
                )
                # 503 says "retry shortly" (no database connection free in time): a client does.
                if response.status_code != 503:
                    break
                await asyncio.sleep(0.05 * (attempt + 1))
            if response.status_code != 202:
                raise SystemExit(f"POST live-{i}: {response.status_code} {response.text}")

    await asyncio.gather(*(caller() for _ in range(concurrency)))


async def live_counts(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch("SELECT state, count(*) AS n FROM workloads GROUP BY state")
    return {r["state"]: int(r["n"]) for r in rows}


async def main(args: argparse.Namespace) -> None:
    env = {"AICP_KUBE_WRITE_QPS": str(args.write_qps), "AICP_KUBE_WRITE_BURST": str(args.write_qps)}
    async with e2e_stack(args.admin_url, aicp_repo=args.aicp_repo, **env) as stack:
        limits = httpx.Limits(max_connections=args.concurrency)
        async with httpx.AsyncClient(
            base_url=stack.aicp_url, headers=stack.headers, limits=limits, timeout=60
        ) as client:
            await scenario(client).setup_pool(args.quota)
            show(stack, "ready, pool READY, no workloads")
            started = time.perf_counter()
            await submit(client, args.workloads, args.concurrency, args.spec_bytes)
            print(
                f"submitted {args.workloads} in {time.perf_counter() - started:.1f} s", flush=True
            )
            show(stack, f"{args.workloads} submitted")
            conn = await asyncpg.connect(stack.database_url)
            try:
                deadline = time.monotonic() + args.timeout
                while True:
                    counts = await live_counts(conn)
                    live = sum(counts.get(state, 0) for state in LIVE)
                    if live == args.workloads:
                        break
                    if time.monotonic() > deadline:
                        raise SystemExit(f"only {live} live after {args.timeout} s: {counts}")
                    await asyncio.sleep(0.5)
                print(
                    f"all live after {time.perf_counter() - started:.1f} s: "
                    + ", ".join(f"{state} {counts.get(state, 0)}" for state in LIVE),
                    flush=True,
                )
                show(stack, f"{args.workloads} live (RUNNING or QUEUED)")
                await asyncio.sleep(args.settle)  # steady state: renewals, sweeps, gauges
                counts = await live_counts(conn)
                show(stack, f"after {args.settle:g} s more of steady state")
                held = await conn.fetchval(
                    "SELECT count(*) FROM leases WHERE owner = 'bench' AND expires_at > now()"
                )
                print(f"leases held by aicp: {held}; states: {dict(sorted(counts.items()))}")
                if args.lists:
                    await lists_at_once(stack, client, args.lists)
                if args.replay:
                    await replay(stack, client, conn, args.replay)
                if args.restart:
                    assert stack.restart_aicp is not None
                    await stack.restart_aicp()
                    show(stack, "restarted, ready")
                    await asyncio.sleep(args.settle)
                    show(stack, f"restarted, after {args.settle:g} s idle")
            finally:
                await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--admin-url", default="postgresql://postgres:postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--quota", type=int, default=16, help="the pool's accelerators")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--write-qps", type=int, default=500, help="aicp's Kubernetes write limit for the run"
    )
    parser.add_argument("--settle", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--spec-bytes", type=int, default=0, help="pad each spec to this")
    parser.add_argument("--lists", type=int, default=0, help="concurrent limit=500 lists")
    parser.add_argument("--replay", type=int, default=0, help="changes a resumed watch replays")
    parser.add_argument("--restart", action="store_true", help="restart aicp, measure it idle")
    parser.add_argument("--aicp-repo", type=Path, default=REPO, help="the checkout to run")
    asyncio.run(main(parser.parse_args()))
