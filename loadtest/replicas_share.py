"""Two aicp replicas on one database: does each reconcile half the workloads, at the same CPU per
workload as one replica alone (so that N replicas project to N times one's throughput)?

    .venv/bin/python loadtest/replicas_share.py
    .venv/bin/python loadtest/replicas_share.py --rate 50 --seconds 30 --compare-single

Runs kubesim and two `python -m app serve` processes, A and B, on one throwaway database
(`e2e_stack.py` starts kubesim and A; B is started here with A's very environment, under another
replica id and on another port). The pool is set up as in `reconcile_latency.py`; then
`--rate` workloads per second (no accelerator, 0.05 s of work) are submitted open loop for
`--seconds`, the POSTs alternating between A and B as a Kubernetes Service spreading connections
would. Once every Job exists, the list endpoint is polled (by state, each replica in turn)
until no workload is left short of SUCCEEDED, within `--deadline` s.

Printed per replica, from its /metrics and /proc: the workloads it reconciled (the Jobs it
created, `aicp_workload_accepted_to_job_created_seconds_count`: each workload counts once, for
the replica that held its lease then), the workload steps it ran
(`aicp_reconcile_duration_seconds_count{kind="workload"}`), its share of each, its CPU seconds
and CPU ms per workload it reconciled; then kubesim's CPU per workload and POST 202 -> Job
ADDED (Job watch on kubesim, as in `reconcile_latency.py`). A replica that accepts a workload
leases it to itself in the creating transaction (`app/api/creating.py`), so the shares follow how
the POSTs are spread; a lease moves only when its replica stops renewing it. The verdict is
whether each replica's share of the reconciled workloads is within ±20 % of half (40 % to 60 %).
With `--compare-single` the same load then runs against one replica alone (a fresh stack, after
the first is stopped), for its CPU per workload beside the two replicas'. `--aicp-repo` runs
both replicas from another checkout (one not being edited while the benchmark runs, or an older
commit's).

CPU is counted from the first submission to the moment every workload is SUCCEEDED, so it
includes each replica's idle work (lease renewals, sweeps) over that time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.children import stop
from loadtest.e2e_stack import (
    REPO,
    WORKLOADS,
    Stack,
    _start,
    _wait_for_line,
    _wait_ready,
    e2e_stack,
    scenario,
)
from loadtest.latency import report
from loadtest.reconcile_latency import Seen, _step_totals, watch
from tests.support.scenario import Scenario

JOBS_CREATED = "aicp_workload_accepted_to_job_created_seconds_count"
#: The states a workload passes through on its way to SUCCEEDED (DELETING: none is deleted).
UNFINISHED = ("PENDING", "QUEUED", "ADMITTED", "RUNNING", "DELETING")


@dataclass
class Replica:
    name: str
    url: str
    pid: int
    #: (Jobs created, workload steps, CPU seconds) when the submissions began.
    start: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass
class Submissions:
    """What the open loop saw: accepted POSTs per replica, POST 202 -> Job ADDED in ms."""

    accepted: Counter[str] = field(default_factory=Counter)
    refused: Counter[int] = field(default_factory=Counter)
    job_ms: list[float] = field(default_factory=list)
    missing: int = 0


def _counter(metrics: str, name: str) -> float:
    """The sum of the samples of `name` (any labels) in Prometheus text."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith((name + " ", name + "{"))
    )


@contextlib.asynccontextmanager
async def second_replica(stack: Stack, instance_id: str) -> AsyncIterator[Replica]:
    """Another `python -m app serve` like the stack's: the same command line, environment and
    checkout (read from /proc, so whatever `e2e_stack` sets), another replica id, any port."""
    assert stack.log_dir is not None
    proc = Path(f"/proc/{stack.aicp_pid}")
    argv = proc.joinpath("cmdline").read_bytes().decode().rstrip("\0").split("\0")
    env = dict(
        item.split("=", 1)
        for item in proc.joinpath("environ").read_bytes().decode().split("\0")
        if "=" in item
    )
    env.update(AICP_INSTANCE_ID=instance_id, AICP_HTTP_PORT="0")
    log = stack.log_dir / f"aicp-{instance_id}.log"
    process: subprocess.Popen[bytes] = _start(argv, env, log, proc.joinpath("cwd").resolve())
    try:
        url = (await _wait_for_line(log, "serving on", process)).rsplit(" ", 1)[1].strip()
        await _wait_ready(url)
        yield Replica("B", url, process.pid)
    finally:
        stop(process, 20)  # before the stack stops kubesim, as e2e_stack does for its own


async def submit(
    bench: Scenario,
    replicas: list[Replica],
    headers: dict[str, str],
    seen: Seen,
    rate: float,
    seconds: float,
) -> Submissions:
    """`rate` POSTs a second for `seconds`, open loop, replica after replica; each accepted one
    timed from its 202 to its Job's ADDED (a Job missing 60 s later is counted, not waited
    for; a 503 is counted and not retried, any other refusal ends the run)."""
    out = Submissions()
    sessions = [
        aiohttp.ClientSession(
            base_url=replica.url,
            headers=headers,
            connector=aiohttp.TCPConnector(limit=64 // len(replicas)),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=60),
        )
        for replica in replicas
    ]
    env = {"KUBESIM_RUN_SECONDS": "0.05"}

    async def one(i: int) -> None:
        name, session = replicas[i % len(replicas)].name, sessions[i % len(replicas)]
        workload = bench.workload_body(f"share-{i}", accelerators=0, env=env)
        async with session.post(WORKLOADS, json=workload) as response:
            returned = time.perf_counter()
            if response.status != 202:
                out.refused[response.status] += 1
                if response.status != 503:
                    raise SystemExit(f"share-{i}: {response.status} {await response.text()}")
                return
            uid = (await response.json())["uid"]
        out.accepted[name] += 1
        try:
            out.job_ms.append((await seen.wait(uid, "job") - returned) * 1000)
        except TimeoutError:
            out.missing += 1

    loop = asyncio.get_running_loop()
    begun = loop.time()
    tasks = []
    try:
        for i in range(round(rate * seconds)):
            await asyncio.sleep(max(0.0, begun + i / rate - loop.time()))
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
    finally:
        for session in sessions:
            await session.close()
    return out


async def wait_all_succeeded(clients: list[httpx.AsyncClient], deadline: float) -> None:
    """Until no workload is in a state short of SUCCEEDED (one list request a state, the
    replicas asked in turn); fails if one FAILED or `deadline` s pass."""
    turn = 0

    async def finished() -> bool:
        nonlocal turn
        turn += 1
        client = clients[turn % len(clients)]
        for state in UNFINISHED:
            page = await client.get(WORKLOADS, params={"state": state, "limit": 1})
            if page.raise_for_status().json()["items"]:
                return False
        return True

    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while not await finished():
        if loop.time() > end:
            raise SystemExit(f"workloads still short of SUCCEEDED after {deadline:g} s")
        await asyncio.sleep(0.2)
    failed = await clients[0].get(WORKLOADS, params={"state": "FAILED", "limit": 1})
    if failed.raise_for_status().json()["items"]:
        raise SystemExit("a workload FAILED")


async def count_succeeded(client: httpx.AsyncClient) -> int:
    total, cursor = 0, None
    while True:
        params: dict[str, str | int] = {"state": "SUCCEEDED", "limit": 500}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get(WORKLOADS, params=params)).raise_for_status().json()
        total += len(page["items"])
        if not (cursor := page.get("next_cursor")):
            return total


async def snapshot(stack: Stack, client: httpx.AsyncClient, pid: int) -> tuple[float, float, float]:
    """(Jobs created, workload steps, CPU seconds) of the replica `client` talks to, now."""
    metrics = (await client.get("/metrics")).raise_for_status().text
    steps, _ = _step_totals(metrics).get("workload", (0.0, 0.0))
    return _counter(metrics, JOBS_CREATED), steps, stack.cpu_seconds(pid)


async def measure(
    stack: Stack, replicas: list[Replica], args: argparse.Namespace
) -> tuple[bool, float]:
    """The run against `replicas` (all on `stack`'s database and cluster); prints its figures,
    returns whether each replica's share is within ±20 % of an even one, and aicp's CPU ms per
    workload (all replicas')."""
    title = f"{len(replicas)} replica{'s' if len(replicas) > 1 else ''}"
    seen = Seen()
    async with contextlib.AsyncExitStack() as exits:
        sim = await exits.enter_async_context(httpx.AsyncClient(base_url=stack.kubesim_url))
        clients = [
            await exits.enter_async_context(
                httpx.AsyncClient(base_url=replica.url, headers=stack.headers, timeout=30)
            )
            for replica in replicas
        ]
        await scenario(clients[0]).setup_pool()
        opened = asyncio.Event()
        watching = asyncio.create_task(watch(sim, "/apis/batch/v1/jobs", seen, opened))
        await opened.wait()
        for replica, client in zip(replicas, clients, strict=True):
            replica.start = await snapshot(stack, client, replica.pid)
        kubesim_start = stack.cpu_seconds(stack.kubesim_pid)
        begun = time.perf_counter()
        try:
            bench = scenario(clients[0])
            sent = await submit(bench, replicas, stack.headers, seen, args.rate, args.seconds)
            await wait_all_succeeded(clients, args.deadline)
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
        took = time.perf_counter() - begun
        ends = [
            await snapshot(stack, client, replica.pid)
            for replica, client in zip(replicas, clients, strict=True)
        ]
        kubesim_cpu = stack.cpu_seconds(stack.kubesim_pid) - kubesim_start
        succeeded = await count_succeeded(clients[0])

    accepted = sum(sent.accepted.values())
    via = ", ".join(f"{sent.accepted[r.name]} via {r.name}" for r in replicas)
    print(
        f"\n{title}, {args.rate:g}/s for {args.seconds:g} s: {round(args.rate * args.seconds)} "
        f"submitted, {accepted} accepted ({via}), {succeeded} SUCCEEDED; all done {took:.1f} s "
        "after the first submission",
        flush=True,
    )
    for status, count in sorted(sent.refused.items()):
        print(f"  {count} submissions answered {status} (not retried)")
    if sent.job_ms:
        report(f"  POST 202 -> Job ADDED ({title})", sent.job_ms, number="7.1f")
    deltas = [
        tuple(end - begin for end, begin in zip(ends[k], replica.start, strict=True))
        for k, replica in enumerate(replicas)
    ]
    jobs_total = sum(d[0] for d in deltas) or 1.0
    steps_total = sum(d[1] for d in deltas) or 1.0
    print(
        f"  {'replica':<8}{'workloads':>10}{'share':>8}{'steps':>8}{'share':>8}"
        f"{'CPU s':>8}{'CPU ms/workload':>17}"
    )
    for replica, (jobs, steps, cpu) in zip(replicas, deltas, strict=True):
        print(
            f"  {replica.name:<8}{jobs:>10.0f}{jobs / jobs_total:>8.1%}{steps:>8.0f}"
            f"{steps / steps_total:>8.1%}{cpu:>8.2f}{cpu / max(jobs, 1) * 1000:>17.1f}"
        )
    aicp_cpu = sum(d[2] for d in deltas)
    print(
        f"  {'all':<8}{jobs_total:>10.0f}{'':>8}{steps_total:>8.0f}{'':>8}{aicp_cpu:>8.2f}"
        f"{aicp_cpu / jobs_total * 1000:>17.1f}"
    )
    print(
        f"  kubesim: {kubesim_cpu:.2f} CPU s, {kubesim_cpu / jobs_total * 1000:.1f} ms per workload"
    )
    if sent.missing:
        raise SystemExit(f"{sent.missing} submissions never got their Job within 60 s")
    if succeeded != accepted or jobs_total != accepted:
        raise SystemExit(f"{accepted} accepted, but {succeeded} SUCCEEDED, {jobs_total:.0f} Jobs")
    half = 1 / len(replicas)
    even = all(abs(d[0] / jobs_total - half) <= 0.2 * half for d in deltas)
    return even, aicp_cpu / jobs_total * 1000


async def main(args: argparse.Namespace) -> None:
    # SIGTERM (a timeout) unwinds like Ctrl-C: the processes stopped, the database dropped
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    async with (
        e2e_stack(args.admin_url, aicp_repo=args.aicp_repo) as stack,
        second_replica(stack, "bench-b") as b,
    ):
        replicas = [Replica("A", stack.aicp_url, stack.aicp_pid), b]
        even, both_ms = await measure(stack, replicas, args)
    if args.compare_single:
        async with e2e_stack(args.admin_url, aicp_repo=args.aicp_repo) as stack:
            _, one_ms = await measure(stack, [Replica("A", stack.aicp_url, stack.aicp_pid)], args)
        print(
            f"\naicp CPU per workload: {both_ms:.1f} ms with 2 replicas, {one_ms:.1f} ms with 1 "
            f"({both_ms / one_ms:.2f}x)"
        )
    print(f"\nshare within ±20 % of half: {'yes' if even else 'no'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--admin-url", default="postgresql://postgres:postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--rate", type=float, default=50.0, help="submissions per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long they go on")
    parser.add_argument(
        "--deadline",
        type=float,
        default=120.0,
        help="seconds the workloads have to be SUCCEEDED once the last Job exists",
    )
    parser.add_argument(
        "--aicp-repo",
        type=Path,
        default=REPO,
        help="the checkout both replicas run from (e.g. a commit's, while this one is edited)",
    )
    parser.add_argument(
        "--compare-single",
        action="store_true",
        help="then the same load against one replica alone, for its figures beside these",
    )
    asyncio.run(main(parser.parse_args()))
