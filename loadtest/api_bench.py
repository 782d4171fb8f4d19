"""Request rate and latency of `POST .../workloads` and `GET .../workloads/{name}`.

A small closed-loop load generator on aiohttp: `--concurrency` clients each send their next
request as soon as the previous answer arrives, for `--seconds` per phase. Unless `--url` points
at a running instance, it creates a fresh database on `--pg`, starts kubesim (API server only,
`--no-controllers`) and `python -m app serve` against both (admin token generated here), waits
for `/readyz`, and stops them at the end. The reconciler runs as in production: every accepted
workload is leased and applied to kubesim while the load continues.

    .venv/bin/python loadtest/api_bench.py --seconds 20 --concurrency 32

Setup (binding, project, pool with room for every workload) goes through the API like a user.
Every answer is checked: a POST must be 202 and a GET 200, or the run fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubesim.command import command as kubesim_command
from loadtest.children import spawn, stop
from tests.support.scenario import Scenario

ROOT = Path(__file__).resolve().parents[1]

PROJECT = "bench"
# A request slower than this fails the run instead of hanging it.
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30)
POOL = "bench-pool"
#: A benchmark of one replica's capacity sends one token's requests as fast as it can: the
#: per-token and per-project rate limits (a tenant policy, docs/API.md) are turned off.
NO_RATE_LIMITS = {
    f"AICP_RATE_{name}": "0"
    for name in (
        "READS_PER_TOKEN",
        "WRITES_PER_TOKEN",
        "READS_PER_PROJECT",
        "WRITES_PER_PROJECT",
        "AUTH_FAILURES_PER_CLIENT",
    )
}


@dataclass
class Phase:
    """Latencies (seconds) of one phase's successful requests, and its wall time."""

    name: str
    latencies: list[float] = field(default_factory=list)
    wall: float = 0.0
    app_cpu: float | None = None
    """CPU seconds the service process used during the phase (its reconciler included)."""

    def summary(self) -> str:
        lat = sorted(self.latencies)
        count = len(lat)
        p50 = lat[count // 2] * 1000
        p99 = lat[min(count - 1, int(count * 0.99))] * 1000
        cpu = "" if self.app_cpu is None else f"  app CPU {self.app_cpu / count * 1000:4.1f} ms/req"
        return (
            f"{self.name:<24} {count:>6} req {count / self.wall:>6.0f} req/s  "
            f"p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  mean {statistics.fmean(lat) * 1000:6.1f} ms"
            f"{cpu}"
        )


def process_cpu(pid: int) -> Callable[[], float]:
    """A reader of the CPU seconds (user + system) process `pid` has used so far (Linux)."""
    ticks = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    return read


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def kubesim(directory: Path) -> Iterator[Path]:
    """kubesim's API server in a subprocess; yields the path of its kubeconfig."""
    kubeconfig = directory / "kubeconfig"
    proc = subprocess.Popen(
        kubesim_command(kubeconfig, "--no-controllers"),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not kubeconfig.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("kubesim did not start")
            time.sleep(0.1)
        yield kubeconfig
    finally:
        stop(proc, 15)


@contextlib.asynccontextmanager
async def served(pg: str, token: str) -> AsyncIterator[tuple[str, int]]:
    """A fresh database, kubesim and `python -m app serve`; yields its base URL and pid."""
    database = f"aicp_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(f"{pg}/postgres")
    await admin.execute(f'CREATE DATABASE "{database}"')
    port = _free_port()
    stack = contextlib.ExitStack()
    directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="aicp-bench-")))
    kubeconfig = stack.enter_context(kubesim(directory))
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "DATABASE_URL": f"{pg}/{database}",
        "AICP_ADMIN_TOKEN": token,
        "AICP_HTTP_HOST": "127.0.0.1",
        "AICP_HTTP_PORT": str(port),
        "AICP_LOG_FORMAT": "json",
        **NO_RATE_LIMITS,
    }
    # The service logs to a file: an unread pipe would fill up and stall it mid-run.
    log = stack.enter_context((directory / "app.log").open("w+b"))
    proc = spawn([sys.executable, "-m", "app", "serve"], env, log)
    base = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(base, proc, directory / "app.log")
        yield base, proc.pid
    finally:
        stop(proc, 15)
        stack.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()


async def _wait_ready(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-4000:]
                raise SystemExit(f"app exited with {proc.returncode}:\n{tail}")
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"{base}/readyz") as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.2)
    raise SystemExit("app did not become ready within 60 s")


async def _call(
    session: aiohttp.ClientSession, method: str, url: str, expect: int, body: object = None
) -> None:
    async with session.request(method, url, json=body) as resp:
        text = await resp.text()
        if resp.status != expect:
            raise SystemExit(f"{method} {url} -> {resp.status}, expected {expect}: {text}")


async def bench_pool(client: httpx.AsyncClient) -> Scenario:
    """Binding (no node labels), project and a pool large enough for every workload a run
    creates, through `client` (the admin's); not waited for."""
    bench = Scenario(
        client,
        project=PROJECT,
        pool=POOL,
        accelerator_class="bench-gpu",
        binding={"node_labels": {}},
    )
    await bench.setup_pool(quota={"accelerators": 64, "cpu": "1000", "memory": "10Ti"}, wait=False)
    return bench


async def setup(base: str, admin_token: str) -> str:
    """`bench_pool`; returns a new editor token of the project (what an ML engineer's client
    would send)."""
    async with httpx.AsyncClient(base_url=base, headers=_bearer(admin_token), timeout=30) as client:
        bench = await bench_pool(client)
        return await bench.token("editor", "bench")


async def run_phase(
    name: str,
    concurrency: int,
    seconds: float,
    one: Callable[[int, int], Awaitable[None]],
    cpu: Callable[[], float] | None,
) -> Phase:
    """`concurrency` closed-loop clients calling `one(client, n)` until `seconds` pass."""
    phase = Phase(name)
    cpu_before = cpu() if cpu else 0.0
    stop_at = time.monotonic() + seconds

    async def client(index: int) -> None:
        n = 0
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            await one(index, n)
            phase.latencies.append(time.perf_counter() - started)
            n += 1

    began = time.monotonic()
    await asyncio.gather(*(client(i) for i in range(concurrency)))
    phase.wall = time.monotonic() - began
    if cpu is not None:
        phase.app_cpu = cpu() - cpu_before
    return phase


async def bench(
    base: str,
    admin_token: str,
    seconds: float,
    concurrency: int,
    as_admin: bool,
    cpu: Callable[[], float] | None = None,
) -> list[Phase]:
    editor_token = await setup(base, admin_token)
    token = admin_token if as_admin else editor_token
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        headers=_bearer(token), connector=connector, timeout=REQUEST_TIMEOUT
    ) as session:
        workloads = f"{base}/api/v1/projects/{PROJECT}/workloads"
        created: list[str] = []

        async def post(client: int, n: int) -> None:
            name = f"w-{client}-{n}"
            body = {
                "name": name,
                "compute_pool": POOL,
                "image": "ghcr.io/acme/train:1.4",
                "command": ["python", "train.py"],
                "accelerators": 1,
                "cpu": "4",
                "memory": "16Gi",
                "labels": {"team": "bench"},
            }
            await _call(session, "POST", workloads, 202, body)
            created.append(name)

        async def get(client: int, n: int) -> None:
            name = created[(client * 7919 + n * 104729) % len(created)]
            await _call(session, "GET", f"{workloads}/{name}", 200)

        posts = await run_phase("POST /workloads", concurrency, seconds, post, cpu)
        print(posts.summary(), file=sys.stderr, flush=True)
        gets = await run_phase("GET /workloads/{name}", concurrency, seconds, get, cpu)
        print(gets.summary(), file=sys.stderr, flush=True)
    return [posts, gets]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="duration of each phase")
    parser.add_argument("--concurrency", type=int, default=32, help="closed-loop clients")
    parser.add_argument(
        "--pg",
        default="postgresql://postgres@127.0.0.1:5432",
        help="PostgreSQL server for the fresh database (without a db name)",
    )
    parser.add_argument("--url", help="benchmark a running instance instead (needs --token)")
    parser.add_argument("--token", help="admin token of the running instance")
    parser.add_argument(
        "--as-admin",
        action="store_true",
        help="measure with the platform admin token (no token lookup) instead of an editor's",
    )
    args = parser.parse_args()

    async def go() -> list[Phase]:
        if args.url:
            return await bench(args.url, args.token, args.seconds, args.concurrency, args.as_admin)
        token = f"bench-{secrets.token_urlsafe(24)}"
        async with served(args.pg, token) as (base, pid):
            return await bench(
                base, token, args.seconds, args.concurrency, args.as_admin, process_cpu(pid)
            )

    phases = asyncio.run(go())
    who = "platform admin" if args.as_admin else "project editor"
    print(
        f"concurrency {args.concurrency}, {args.seconds:.0f} s per phase, "
        f"{who} token, cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}"
    )
    for phase in phases:
        print(phase.summary())


if __name__ == "__main__":
    main()
