"""A noisy project next to a quiet one: what the quiet one notices.

    .venv/bin/python loadtest/noisy_neighbour.py --flood-rate 100 --flood-seconds 15

Runs kubesim and `python -m app serve` as separate processes (`e2e_stack.py`) with the
default limits, two projects each with a pool of 8 of the cluster's 16 GPUs, and then, at the
same time:

- the noisy project's editor submits workloads open loop at `--flood-rate` per second for
  `--flood-seconds` (1 GPU, 0.2 s of work each; what its rate limit refuses is counted);
- the noisy project's viewer opens `--follows` log follows (`logs?follow=true`) of one of its
  running workloads and keeps them open;
- the quiet project's editor submits one workload every `--quiet-interval` seconds and polls
  it with GET every 100 ms until it is RUNNING (at most `--quiet-timeout` seconds), from a
  process of its own: its timings hold aicp's answer and the network, not the flood's client
  work (1,500 posts and 100 follows on one event loop would delay its reads of the answers).

Prints the quiet project's GET latency (p50/p99 over every poll) and submit → RUNNING time
(p50/p99/max; a workload that never ran within the timeout counts as the timeout), and what
the noisy project got: submissions accepted and refused, follows opened and refused.
The targets (docs/RELIABILITY.md "Tenants and clients"): GET p99 ≤ 100 ms, submit → RUNNING
p99 ≤ 5 s.

`--profile FILE` samples aicp with `py-spy record` (250 Hz, raw collapsed stacks, on PATH or
in the virtual environment) for the flood's duration and writes them to FILE
(`loadtest/profile_summary.py FILE` sorts them). `--aicp-repo` runs another checkout's aicp
(e.g. an older commit, to compare).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import secrets
import shutil
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.e2e_stack import CLASS, REPO, e2e_stack
from tests.support.api_client import Api
from tests.support.scenario import Scenario

NOISY, QUIET = "noisy", "quiet"
TIMEOUT = aiohttp.ClientTimeout(total=30)


@dataclass
class Figures:
    get_latencies: list[float] = field(default_factory=list)
    to_running: list[float] = field(default_factory=list)
    never_ran: int = 0
    flood: Counter[int] = field(default_factory=Counter)
    follows: Counter[int] = field(default_factory=Counter)
    quiet_posts: Counter[int] = field(default_factory=Counter)
    post_latencies: list[float] = field(default_factory=list)
    bad_tokens: Counter[int] = field(default_factory=Counter)
    bad_token_seconds: float = 0.0
    bad_token_reads: float = 0.0
    aicp_cpu: float = 0.0
    wall: float = 0.0

    def add_quiet(self, quiet: Figures) -> None:
        """What the quiet project's own process measured."""
        self.get_latencies += quiet.get_latencies
        self.to_running += quiet.to_running
        self.never_ran += quiet.never_ran
        self.quiet_posts += quiet.quiet_posts
        self.post_latencies += quiet.post_latencies


@dataclass(frozen=True)
class QuietUser:
    """The quiet project's editor: submits one workload every `interval` seconds for
    `seconds`, each polled until RUNNING for `timeout` seconds at most."""

    base: str
    token: str
    seconds: float
    interval: float
    timeout: float


def quiet_user(user: QuietUser) -> Figures:
    """`user`'s submissions and polls, measured in a process of its own: the quiet project's
    client is another machine's, and its timings must not include the flood's client work
    (the 1,500 posts, their answers and the 100 follows' lines share no event loop with it)."""
    return asyncio.run(_quiet_user(user))


async def _quiet_user(user: QuietUser) -> Figures:
    fig = Figures()
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        tasks: list[asyncio.Task[None]] = []
        started, n = time.monotonic(), 0
        while time.monotonic() - started < user.seconds:
            tasks.append(
                asyncio.create_task(quiet_one(session, user.base, user.token, n, user.timeout, fig))
            )
            n += 1
            await asyncio.sleep(user.interval)
        await asyncio.gather(*tasks)
    return fig


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def workload(name: str, pool: str, **env: str) -> dict[str, Any]:
    return {
        "name": name,
        "compute_pool": pool,
        "image": "ghcr.io/acme/train:1.4",
        "command": ["python", "train.py"],
        "accelerators": 1,
        "cpu": "1",
        "memory": "4Gi",
        "env": {"KUBESIM_RUN_SECONDS": "0.2", **env},
    }


async def call(
    session: aiohttp.ClientSession, method: str, url: str, token: str, body: Any = None
) -> tuple[int, Any]:
    async with session.request(
        method, url, json=body, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        data = await response.json(content_type=None) if response.status != 204 else None
        return response.status, data


def scenario(client: httpx.AsyncClient, project: str) -> Scenario:
    """The scenario API for `project` (a pool of 8 of the 16 GPUs) through `client`."""
    return Scenario(
        client,
        project=project,
        pool="pool",
        accelerator_class=CLASS,
        accelerators=8,
        wait_timeout=60,
        interval=0.1,
    )


async def setup(client: httpx.AsyncClient) -> dict[str, str]:
    """Binding, two projects with a pool of 8 GPUs each, and their tokens, through `client`
    (the admin's)."""
    await Api(client).put_binding(CLASS)
    tokens: dict[str, str] = {}
    for project in (NOISY, QUIET):
        theirs = scenario(client, project)
        await theirs.create_project(project)
        await theirs.create_pool()
        for role in ("editor", "viewer"):
            tokens[f"{project}-{role}"] = await theirs.token(role, role)
        await theirs.wait_pool_state("READY")
    return tokens


async def flood(
    session: aiohttp.ClientSession, base: str, token: str, rate: float, seconds: float, fig: Figures
) -> None:
    url = f"{base}/api/v1/projects/{NOISY}/workloads"

    async def one(n: int) -> None:
        with contextlib.suppress(Exception):
            status, _ = await call(session, "POST", url, token, workload(f"n-{n}", "pool"))
            fig.flood[status] += 1

    tasks: list[asyncio.Task[None]] = []
    started = time.monotonic()
    n = 0
    while (elapsed := time.monotonic() - started) < seconds:
        while n < elapsed * rate:
            tasks.append(asyncio.create_task(one(n)))
            n += 1
        await asyncio.sleep(0.005)
    await asyncio.gather(*tasks)


async def follow_logs(base: str, token: str, count: int, fig: Figures, stop: asyncio.Event) -> None:
    url = f"{base}/api/v1/projects/{NOISY}/workloads/chatty/logs?follow=true"
    # A client of its own: its connections are not the ones the other callers use.
    connector = aiohttp.TCPConnector(limit=count + 10)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout()) as s:

        async def one() -> None:
            try:
                async with s.get(url, headers={"Authorization": f"Bearer {token}"}) as response:
                    fig.follows[response.status] += 1
                    if response.status == 200:
                        reading = asyncio.ensure_future(response.content.read())
                        waiting = asyncio.ensure_future(stop.wait())
                        await asyncio.wait({reading, waiting}, return_when="FIRST_COMPLETED")
                        reading.cancel()
                        waiting.cancel()
            except aiohttp.ClientError:
                fig.follows[0] += 1

        await asyncio.gather(*(one() for _ in range(count)))


async def quiet_one(
    session: aiohttp.ClientSession, base: str, token: str, n: int, timeout: float, fig: Figures
) -> None:
    url = f"{base}/api/v1/projects/{QUIET}/workloads"
    submitted = time.monotonic()
    sent = time.monotonic()
    try:
        status, _ = await call(session, "POST", url, token, workload(f"q-{n}", "pool"))
    except (aiohttp.ClientError, TimeoutError):
        status = 0
    fig.quiet_posts[status] += 1
    fig.post_latencies.append(time.monotonic() - sent)
    if status != 202:
        return  # refused: counted, not retried
    while (waited := time.monotonic() - submitted) < timeout:
        sent = time.monotonic()
        try:
            status, body = await call(session, "GET", f"{url}/q-{n}", token)
        except (aiohttp.ClientError, TimeoutError):
            status, body = 0, None
        fig.get_latencies.append(time.monotonic() - sent)
        if status == 200 and body["status"]["state"] in ("RUNNING", "SUCCEEDED"):
            fig.to_running.append(time.monotonic() - submitted)
            return
        await asyncio.sleep(0.1)
    del waited
    fig.never_ran += 1
    fig.to_running.append(timeout)


async def run(args: argparse.Namespace) -> Figures:
    fig = Figures()
    env = dict(item.split("=", 1) for item in args.aicp_env)
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as executor:
        executor.submit(int).result()  # the quiet user's process is up before the flood
        return await _run(args, env, executor, fig)


async def _run(
    args: argparse.Namespace, env: dict[str, str], executor: ProcessPoolExecutor, fig: Figures
) -> Figures:
    async with e2e_stack(args.pg, aicp_repo=args.aicp_repo, **env) as stack:
        base = stack.aicp_url
        connector = aiohttp.TCPConnector(limit=256)
        async with (
            aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as session,
            httpx.AsyncClient(base_url=base, headers=stack.headers, timeout=30) as client,
        ):
            tokens = await setup(client)
            chatty = workload("chatty", "pool", KUBESIM_RUN_SECONDS="300", KUBESIM_LOG="tick")
            chatty["env"]["KUBESIM_LOG_INTERVAL"] = "1"
            noisy = scenario(client, NOISY)
            await noisy.request("POST", noisy.workloads, json=chatty, accept=(202,))
            await noisy.wait_state("chatty", "RUNNING")
            stop = asyncio.Event()
            follows = asyncio.create_task(
                follow_logs(base, tokens[f"{NOISY}-viewer"], args.follows, fig, stop)
            )
            await asyncio.sleep(1.0)  # the follows are open before the flood begins
            spy = _profile(stack.aicp_pid, args.flood_seconds, args.profile)
            cpu, wall = stack.cpu_seconds(stack.aicp_pid), time.monotonic()
            quiet = asyncio.get_running_loop().run_in_executor(
                executor,
                quiet_user,
                QuietUser(
                    base,
                    tokens[f"{QUIET}-editor"],
                    args.flood_seconds,
                    args.quiet_interval,
                    args.quiet_timeout,
                ),
            )
            await flood(
                session, base, tokens[f"{NOISY}-editor"], args.flood_rate, args.flood_seconds, fig
            )
            fig.add_quiet(await quiet)
            fig.aicp_cpu = stack.cpu_seconds(stack.aicp_pid) - cpu
            fig.wall = time.monotonic() - wall
            if spy is not None:
                spy.wait(timeout=args.flood_seconds + 30)
            stop.set()
            await follows
            if args.bad_tokens:
                await bad_tokens(session, base, args.bad_tokens, fig)
    return fig


def _profile(pid: int, seconds: float, out: Path | None) -> subprocess.Popen[bytes] | None:
    """py-spy sampling `pid` for `seconds` into `out` (None: no profile)."""
    if out is None:
        return None
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    argv = [spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "250"]
    return subprocess.Popen(
        [*argv, "-f", "raw", "--nonblocking", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def bad_tokens(session: aiohttp.ClientSession, base: str, count: int, fig: Figures) -> None:
    """`count` distinct well-formed tokens nobody issued, 32 at a time, from one address; how
    many of them cost a database read (from the replica's own metrics)."""

    async def reads() -> float:
        """NaN where the replica does not count them (before the metric existed)."""
        for _ in range(5):
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(f"{base}/metrics") as response:
                    text = await response.text()
                break
            await asyncio.sleep(1)
        else:
            return float("nan")
        for line in text.splitlines():
            if line.startswith('aicp_auth_failures_total{check="looked-up"}'):
                return float(line.rsplit(" ", 1)[1])
        return 0.0 if "aicp_auth_failures_total" in text else float("nan")

    before = await reads()
    started = time.monotonic()
    sent = iter(range(count))

    async def client() -> None:
        for _ in sent:
            token = "aicp_" + secrets.token_urlsafe(32)
            try:
                status, _ = await call(session, "GET", f"{base}/api/v1/projects", token)
            except (aiohttp.ClientError, TimeoutError):
                status = 0
            fig.bad_tokens[status] += 1

    await asyncio.gather(*(client() for _ in range(32)))
    fig.bad_token_seconds = time.monotonic() - started
    fig.bad_token_reads = await reads() - before


def report(args: argparse.Namespace, fig: Figures) -> None:
    ms = 1000
    print(
        f"flood {args.flood_rate:g}/s for {args.flood_seconds:g} s, {args.follows} follows, "
        f"a quiet submission every {args.quiet_interval:g} s"
    )
    print(f"aicp used {fig.aicp_cpu:.1f} s of CPU in {fig.wall:.1f} s")
    print(f"noisy submissions by status: {dict(sorted(fig.flood.items()))}")
    print(f"noisy follows by status:     {dict(sorted(fig.follows.items()))}")
    gets = fig.get_latencies
    print(
        f"quiet GET: {len(gets)} requests, p50 {percentile(gets, 0.5) * ms:.1f} ms, "
        f"p99 {percentile(gets, 0.99) * ms:.1f} ms"
    )
    posts = fig.post_latencies
    print(
        f"quiet POST: by status {dict(sorted(fig.quiet_posts.items()))}, "
        f"p50 {percentile(posts, 0.5) * ms:.1f} ms, p99 {percentile(posts, 0.99) * ms:.1f} ms"
    )
    runs = fig.to_running
    print(
        f"quiet submit -> RUNNING: {len(runs)} workloads, p50 {percentile(runs, 0.5):.2f} s, "
        f"p99 {percentile(runs, 0.99):.2f} s, max {max(runs, default=float('nan')):.2f} s, "
        f"{fig.never_ran} not running after {args.quiet_timeout:g} s"
    )
    if args.bad_tokens:
        count = sum(fig.bad_tokens.values())
        print(
            f"bad tokens: {count} in {fig.bad_token_seconds:.1f} s "
            f"({count / fig.bad_token_seconds:.0f}/s), by status "
            f"{dict(sorted(fig.bad_tokens.items()))}, database reads {fig.bad_token_reads:.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default="postgresql://postgres:postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--flood-rate", type=float, default=100.0)
    parser.add_argument("--flood-seconds", type=float, default=15.0)
    parser.add_argument("--follows", type=int, default=100)
    parser.add_argument("--quiet-interval", type=float, default=1.0)
    parser.add_argument("--quiet-timeout", type=float, default=20.0)
    parser.add_argument(
        "--bad-tokens", type=int, default=0, help="then this many distinct bad tokens"
    )
    parser.add_argument("--aicp-repo", type=Path, default=REPO, help="the checkout to run")
    parser.add_argument(
        "--profile", type=Path, help="write a py-spy profile of aicp during the flood here"
    )
    parser.add_argument(
        "--aicp-env", action="append", default=[], metavar="NAME=VALUE", help="aicp setting"
    )
    args = parser.parse_args()
    report(args, asyncio.run(run(args)))


if __name__ == "__main__":
    main()
