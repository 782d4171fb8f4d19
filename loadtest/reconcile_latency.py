"""End-to-end reconcile latency: API → Kubernetes, and Kubernetes → API.

    .venv/bin/python loadtest/reconcile_latency.py --submissions 250 --concurrency 1 --observed 50
    .venv/bin/python loadtest/reconcile_latency.py --rate 200 --seconds 60 --observed 20

Runs kubesim and `python -m app serve` as separate processes (`e2e_stack.py`); this process is
the user (HTTP to aicp) and an observer (watches on kubesim). Two measurements:

1. **POST → Job exists**: `--submissions` workloads (1 GPU, 0.05 s of work), `--concurrency`
   callers at a time. For each, the time from `POST .../workloads` returning 202 to the ADDED
   event of its Job (matched by the `aicp.dev/uid` label) arriving on a Job watch on kubesim.
2. **Pod status → API**: `--observed` workloads one after another (1 GPU, 0.5 s of work). A
   pod watch on kubesim records when each pod's phase became `Running` and `Succeeded`; a
   poller GETs the workload every `--poll-ms` and records when the API first shows
   `RUNNING` and `SUCCEEDED`. The difference is the time a pod change takes to reach the API
   (informer → event routing → step → fenced write), plus up to one poll interval.

With `--rate R` the submissions of (1) are open loop instead: one every 1/R s for `--seconds`
whatever the answers do (the load a fleet of users puts on the service), and (2) runs at the
same time, so both hand-offs are measured under that load. A submission whose Job does not
appear within 60 s fails the run; a 503 (aicp overloaded: every database connection busy) is
counted and reported, not retried.

Watch events are timestamped when they arrive here: kubesim is local, so this is the event's
time plus well under a millisecond. Prints percentiles in ms, then kubesim's request counters.
aicp runs with its default Kubernetes write limit (50/s, bursts of 100) unless `--write-qps`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import aiohttp
import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.e2e_stack import (
    POOL,
    PROJECT,
    REPO,
    WORKLOADS,
    Stack,
    e2e_stack,
    scenario,
    watch_managed,
)
from loadtest.latency import report


class Seen:
    """First arrival time of (uid, what) from the watches, with waiters."""

    def __init__(self) -> None:
        self.at: dict[tuple[str, str], float] = {}
        self._waiters: dict[tuple[str, str], list[asyncio.Future[float]]] = defaultdict(list)

    def record(self, uid: str, what: str, now: float) -> None:
        key = (uid, what)
        if key in self.at:
            return
        self.at[key] = now
        for waiter in self._waiters.pop(key, []):
            if not waiter.done():
                waiter.set_result(now)

    async def wait(self, uid: str, what: str, timeout: float = 60.0) -> float:
        if (uid, what) in self.at:
            return self.at[(uid, what)]
        waiter = asyncio.get_running_loop().create_future()
        self._waiters[(uid, what)].append(waiter)
        return await asyncio.wait_for(waiter, timeout)


async def watch(sim: httpx.AsyncClient, path: str, seen: Seen, opened: asyncio.Event) -> None:
    """Record Job ADDEDs as `job` and pod phases as `pod:<phase>`, until cancelled."""
    async for now, event in watch_managed(sim, path, opened):
        obj = event.get("object") or {}
        uid = ((obj.get("metadata") or {}).get("labels") or {}).get("aicp.dev/uid")
        if uid is None:
            continue
        if obj.get("kind") == "Job" and event["type"] == "ADDED":
            seen.record(uid, "job", now)
        elif obj.get("kind") == "Pod":
            phase = (obj.get("status") or {}).get("phase")
            if phase:
                seen.record(uid, f"pod:{phase}", now)


async def job_creation(
    client: httpx.AsyncClient, seen: Seen, submissions: int, concurrency: int
) -> None:
    samples: list[float] = []
    counter = iter(range(submissions))
    bench = scenario(client)

    async def caller() -> None:
        for i in counter:
            body = bench.workload_body(f"lat-{i}", env={"KUBESIM_RUN_SECONDS": "0.05"})
            response = await client.post(WORKLOADS, json=body)
            returned = time.perf_counter()
            response.raise_for_status()
            created = await seen.wait(response.json()["uid"], "job")
            samples.append((created - returned) * 1000)

    await asyncio.gather(*(caller() for _ in range(concurrency)))
    report(f"POST 202 -> Job ADDED (c={concurrency})", samples, number="7.1f")


async def job_creation_at_rate(
    client: httpx.AsyncClient, seen: Seen, rate: float, seconds: float
) -> int:
    """One submission every 1/rate s for `seconds` (open loop), each timed to its Job; returns
    how many Jobs did not appear within 60 s (the run then fails, after its report)."""
    samples: list[float] = []
    late: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time()

    missing: list[str] = []
    post_ms: list[float] = []
    refused: dict[int, int] = defaultdict(int)

    # aiohttp, not the httpx client: thousands of requests queued for a connection (aicp
    # falling behind an open loop) cost httpx's pool time per queued request on every release,
    # which starves this process, the measuring one; aiohttp's connector queues them in O(1).
    session = aiohttp.ClientSession(
        base_url=str(client.base_url),
        headers=dict(client.headers),
        connector=aiohttp.TCPConnector(limit=64),
        timeout=aiohttp.ClientTimeout(total=None, sock_read=60),
    )

    bench = scenario(client)

    async def one(i: int) -> None:
        body = bench.workload_body(f"rate-{i}", accelerators=0, env={"KUBESIM_RUN_SECONDS": "0.05"})
        sent_at = time.perf_counter()
        async with session.post(WORKLOADS, json=body) as response:
            returned = time.perf_counter()
            if response.status != 202:
                # an overloaded aicp answers 503 with Retry-After: counted, never retried (a
                # user would retry; the open loop goes on at its rate either way)
                refused[response.status] += 1
                if response.status != 503:
                    raise SystemExit(f"rate-{i}: {response.status} {await response.text()}")
                return
            post_ms.append((returned - sent_at) * 1000)
            uid = (await response.json())["uid"]
        try:
            created = await seen.wait(uid, "job")
        except TimeoutError:
            missing.append(f"rate-{i}")
            return
        samples.append((created - returned) * 1000)

    tasks = []
    total = round(rate * seconds)
    for i in range(total):
        due = start + i / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            late.append(-delay)
        tasks.append(asyncio.create_task(one(i)))
    sent = loop.time() - start
    try:
        await asyncio.gather(*tasks)
    finally:
        await session.close()
    ended = loop.time() - start
    print(
        f"submitted {total} in {sent:.1f} s ({total / sent:.0f}/s offered, {rate:g}/s asked); "
        + (
            f"the last answer or Job wait ended {ended:.1f} s after the first submission"
            if missing or refused
            else f"all Jobs existed {ended:.1f} s after the first submission"
        ),
        flush=True,
    )
    if samples:
        print(f"accepted: {len(post_ms)} submissions at {len(post_ms) / ended:.1f}/s overall")
    report(f"POST sent -> 202 ({rate:g}/s)", post_ms, number="7.1f")
    if samples:
        report(f"POST 202 -> Job ADDED ({rate:g}/s)", samples, number="7.1f")
    for status, count in sorted(refused.items()):
        print(f"{count} of {total} submissions answered {status} (not accepted, not retried)")
    if missing:
        print(f"{len(missing)} of {total} Jobs did not exist 60 s after their POST returned")
    return len(missing)


async def status_propagation(
    client: httpx.AsyncClient, seen: Seen, count: int, poll_seconds: float
) -> None:
    running: list[float] = []
    finished: list[float] = []
    refused = 0

    async def answered(method: str, url: str, body: object = None) -> httpx.Response:
        """The answer other than an overloaded aicp's 503 (retried after its Retry-After)."""
        nonlocal refused
        while True:
            response = await client.request(method, url, json=body)
            if response.status_code != 503:
                response.raise_for_status()
                return response
            refused += 1
            await asyncio.sleep(float(response.headers.get("retry-after", "1")))

    if count == 0:
        return
    bench = scenario(client)
    for i in range(count):
        body = bench.workload_body(f"obs-{i}", env={"KUBESIM_RUN_SECONDS": "0.5"})
        uid = (await answered("POST", WORKLOADS, body)).json()["uid"]
        shown: dict[str, float] = {}
        while "SUCCEEDED" not in shown:
            state = (await answered("GET", f"{WORKLOADS}/obs-{i}")).json()["status"]["state"]
            shown.setdefault(state, time.perf_counter())
            if state == "FAILED":
                raise SystemExit(f"obs-{i} failed")
            await asyncio.sleep(poll_seconds)
        pod_running = await seen.wait(uid, "pod:Running")
        pod_succeeded = await seen.wait(uid, "pod:Succeeded")
        if "RUNNING" in shown:  # a very short run may go from ADMITTED straight to SUCCEEDED
            running.append((shown["RUNNING"] - pod_running) * 1000)
        finished.append((shown["SUCCEEDED"] - pod_succeeded) * 1000)
    report("pod Running -> API RUNNING", running, number="7.1f")
    report("pod Succeeded -> API SUCCEEDED", finished, number="7.1f")
    if refused:
        print(f"the status poller got {refused} answers 503 (retried)")


def _histogram_mean(metrics: str, name: str) -> float | None:
    """The mean of one of aicp's Prometheus histograms (sum / count), None when empty."""
    values = {}
    for line in metrics.splitlines():
        for suffix in ("_sum", "_count"):
            if line.startswith(name + suffix + " ") or line.startswith(name + suffix + "{"):
                values[suffix] = float(line.rsplit(" ", 1)[1])
    count = values.get("_count", 0.0)
    return values.get("_sum", 0.0) / count if count else None


def _step_totals(metrics: str) -> dict[str, tuple[float, float]]:
    """(count, seconds) of reconcile steps per kind, from aicp's Prometheus text."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for line in metrics.splitlines():
        for suffix, slot in (("_count{", 0), ("_sum{", 1)):
            prefix = "aicp_reconcile_duration_seconds" + suffix
            if line.startswith(prefix):
                labels, value = line[len(prefix) :].rsplit("} ", 1)
                kind = labels.split('kind="', 1)[1].split('"', 1)[0]
                totals[kind][slot] += float(value)
    return {kind: (count, seconds) for kind, (count, seconds) in totals.items()}


async def _queues_applied(client: httpx.AsyncClient) -> None:
    """With the API server alone no Kueue reports the pool's ClusterQueue, so the pool never
    becomes READY: wait for its queues to be applied (observed generation 1) instead."""
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline:
        pool = (await client.get(f"/api/v1/projects/{PROJECT}/compute-pools/{POOL}")).json()
        if pool["status"]["observed_generation"] >= 1:
            return
        await asyncio.sleep(0.1)
    raise SystemExit("the pool's queues were not applied within 60 s")


def postgres_cpu_seconds() -> float:
    """User + system CPU time of every process named postgres on this machine (the server the
    benchmark runs against, with all its backends: nothing else uses it meanwhile)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # gone meanwhile
        if "(postgres)" in text:
            fields = text.rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


async def _all_succeeded(database_url: str, timeout: float) -> float:
    """Seconds until every workload is SUCCEEDED (read from the database, not the API, so the
    waiting adds no requests); fails the run after `timeout`."""
    started = time.perf_counter()
    conn = await asyncpg.connect(database_url)
    try:
        while True:
            left = await conn.fetchval("SELECT count(*) FROM workloads WHERE state <> 'SUCCEEDED'")
            if left == 0:
                return time.perf_counter() - started
            if time.perf_counter() - started > timeout:
                raise SystemExit(f"{left} workloads not SUCCEEDED {timeout:g} s after the rest")
            await asyncio.sleep(0.25)
    finally:
        await conn.close()


def _profile(directory: Path, stack: Stack, seconds: float) -> list[subprocess.Popen[bytes]]:
    """py-spy sampling aicp and kubesim for the first `seconds` of the run (raw collapsed
    stacks, 250 Hz, `loadtest/profile_summary.py` sorts them)."""
    directory.mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            [
                "py-spy",
                "record",
                "-p",
                str(pid),
                "-d",
                str(round(seconds)),
                "-r",
                "250",
                "-f",
                "raw",
                "--nonblocking",
                "-o",
                str(directory / f"{name}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name, pid in (("aicp", stack.aicp_pid), ("kubesim", stack.kubesim_pid))
    ]


async def main(args: argparse.Namespace) -> None:
    env = {}
    if args.write_qps:
        env = {"AICP_KUBE_WRITE_QPS": str(args.write_qps), "AICP_KUBE_WRITE_BURST": "1000"}
    sim_args = ("--no-controllers",) if args.api_only else ()
    stacked = e2e_stack(args.admin_url, aicp_repo=args.aicp_repo, sim_args=sim_args, **env)
    async with stacked as stack:
        seen = Seen()
        async with (
            httpx.AsyncClient(base_url=stack.kubesim_url) as sim,
            httpx.AsyncClient(
                base_url=stack.aicp_url,
                headers=stack.headers,
                timeout=httpx.Timeout(60, pool=None),  # open loop: requests may queue here
                limits=httpx.Limits(max_connections=64),
            ) as client,
        ):
            await scenario(client).setup_pool(wait=not args.api_only)
            if args.api_only:
                await _queues_applied(client)
            cpu_before = stack.cpu_seconds(stack.aicp_pid), stack.cpu_seconds(stack.kubesim_pid)
            postgres_before = postgres_cpu_seconds()
            opened = [asyncio.Event(), asyncio.Event()]
            watches = [
                asyncio.create_task(watch(sim, "/apis/batch/v1/jobs", seen, opened[0])),
                asyncio.create_task(watch(sim, "/api/v1/pods", seen, opened[1])),
            ]
            await asyncio.gather(*(event.wait() for event in opened))
            missing = 0
            spies = _profile(args.profile, stack, args.seconds) if args.profile else []
            try:
                if args.rate:
                    missing, _ = await asyncio.gather(
                        job_creation_at_rate(client, seen, args.rate, args.seconds),
                        status_propagation(client, seen, args.observed, args.poll_ms / 1000),
                    )
                else:
                    await job_creation(client, seen, args.submissions, args.concurrency)
                    await status_propagation(client, seen, args.observed, args.poll_ms / 1000)
            finally:
                for task in watches:
                    task.cancel()
                await asyncio.gather(*watches, return_exceptions=True)
                for spy in spies:
                    spy.wait(timeout=args.seconds + 60)
            if args.rate and not args.api_only:
                finished_after = await _all_succeeded(stack.database_url, args.finish_timeout)
                print(f"all SUCCEEDED {finished_after:.1f} s after the last Job appeared")
            metrics = (await client.get("/metrics")).text
            steps = _step_totals(metrics)
            created = _histogram_mean(metrics, "aicp_workload_accepted_to_job_created_seconds")
            if created is not None:
                print(
                    f"aicp's own accepted -> Job created (its metric): mean {created * 1000:.1f} ms"
                )
            submitted = round(args.rate * args.seconds) if args.rate else args.submissions
            workloads = submitted + args.observed
            count, seconds = steps.get("workload", (0.0, 0.0))
            print(
                f"aicp workload steps: {count:.0f} ({count / workloads:.1f} per workload), "
                f"mean {seconds / max(count, 1) * 1000:.1f} ms each"
            )
            aicp_cpu = stack.cpu_seconds(stack.aicp_pid) - cpu_before[0]
            kubesim_cpu = stack.cpu_seconds(stack.kubesim_pid) - cpu_before[1]
            postgres = postgres_cpu_seconds() - postgres_before
            print(
                f"CPU per workload: aicp {aicp_cpu / workloads * 1000:.1f} ms, "
                f"kubesim {kubesim_cpu / workloads * 1000:.1f} ms, "
                f"PostgreSQL {postgres / workloads * 1000:.1f} ms (every backend of the server)"
            )
            stats = (await sim.get("/_sim/stats")).json()
            print(
                f"kubesim requests: {stats['total']} ({stats['writes']} writes); by field "
                f"manager: {stats.get('by_field_manager')}; by verb: {stats.get('by_verb')}"
            )
    if missing:
        raise SystemExit(f"{missing} submissions never got their Job within 60 s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--submissions", type=int, default=250)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--observed", type=int, default=50)
    parser.add_argument("--poll-ms", type=float, default=5.0)
    parser.add_argument(
        "--rate", type=float, default=None, help="open-loop submissions per second instead"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="how long --rate lasts")
    parser.add_argument(
        "--write-qps", type=float, default=None, help="aicp's AICP_KUBE_WRITE_QPS (default 50)"
    )
    parser.add_argument(
        "--finish-timeout",
        type=float,
        default=900.0,
        help="with --rate: how long every workload may take to be SUCCEEDED after the last POST",
    )
    parser.add_argument(
        "--api-only",
        action="store_true",
        help="kubesim without its controllers (no Kueue, no pods): POST -> Job only, with the "
        "cluster's cost of running the workloads off the machine",
    )
    parser.add_argument(
        "--aicp-repo",
        type=Path,
        default=REPO,
        help="run aicp from this checkout (e.g. an earlier commit's, to compare)",
    )
    parser.add_argument(
        "--profile", type=Path, help="py-spy profiles of aicp and kubesim during --seconds, here"
    )
    asyncio.run(main(parser.parse_args()))
