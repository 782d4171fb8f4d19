"""Live streams at scale: N concurrent watchers on one aicp process, the delivery latency of a
state change from its commit to every watcher, and the memory an idle stream costs.

    .venv/bin/python loadtest/stream_bench.py --watchers 1000 --changes 40

It creates a fresh database (on `--pg`, or an embedded PostgreSQL when that does not answer),
starts kubesim (API server only) and `python -m app serve` as in production, with the stream
limits raised for one token. Workloads are inserted as finished (SUCCEEDED, observed): the
reconciler leaves them alone, so every change is one the benchmark makes. Then:

1. `--watchers` clients open `GET .../workloads?watch=true` (each gets every change of the
   project) and read their first events; the service's RSS before and after, over the number of
   streams, is the memory per idle stream.
2. `--changes` times, one UPDATE of one workload's state and reason (what a reconcile step's
   status write does, committed in autocommit), `--interval` apart. Each watcher notes when the
   event carrying that change arrives; latency = arrival - the moment the UPDATE returned (its
   commit). The clients are raw asyncio sockets with a minimal parser on uvloop in this one
   process, so their own reading is part of the number.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.api_bench import NO_RATE_LIMITS, bench_pool, kubesim
from loadtest.children import spawn, stop
from loadtest.databases import with_database
from tests.support.pg_fixtures import answers

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "bench"
POOL = "bench-pool"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _embedded_postgres() -> Iterator[str]:
    import pgserver  # the dev dependency the test suite falls back to as well

    with tempfile.TemporaryDirectory(prefix="aicp-stream-bench-pg-") as directory:
        server = pgserver.get_server(directory, cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def served(pg: str, token: str, watchers: int) -> AsyncIterator[tuple[int, int, str]]:
    """A fresh database, kubesim and `python -m app serve`: (port, pid, database URL)."""
    database = f"aicp_streams_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(pg)
    await admin.execute(f'CREATE DATABASE "{database}"')
    url = with_database(pg, database)
    port = _free_port()
    with (
        tempfile.TemporaryDirectory(prefix="aicp-stream-bench-") as raw,
        kubesim(Path(raw)) as kubeconfig,
    ):
        directory = Path(raw)
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "DATABASE_URL": url,
            "AICP_ADMIN_TOKEN": token,
            "AICP_HTTP_HOST": "127.0.0.1",
            "AICP_HTTP_PORT": str(port),
            "AICP_LOG_FORMAT": "json",
            "AICP_STREAMS_MAX": str(watchers + 100),
            "AICP_STREAMS_PER_TOKEN": str(watchers + 100),
            "AICP_STREAMS_PER_PROJECT": str(watchers + 100),
            **NO_RATE_LIMITS,
        }
        app = None
        try:
            log = (directory / "app.log").open("wb")
            app = spawn([sys.executable, "-m", "app", "serve"], env, log)
            await _wait_ready(port, app, directory / "app.log")
            yield port, app.pid, url
        finally:
            if app is not None:
                stop(app, 15)
            await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            await admin.close()


async def _http(port: int, request: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    data = await reader.read()
    writer.close()
    status = int(data.split(b" ", 2)[1]) if data else 0
    return status, data


async def _wait_ready(port: int, app: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if app.poll() is not None:
            raise SystemExit(f"app exited:\n{log.read_text(errors='replace')[-3000:]}")
        with contextlib.suppress(OSError, IndexError, ValueError):
            status, _ = await _http(
                port, b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            if status == 200:
                return
        await asyncio.sleep(0.2)
    raise SystemExit("app did not become ready")


async def setup(port: int, token: str, url: str, workloads: int) -> list[uuid.UUID]:
    """Binding, project and pool through the API; finished workloads straight into the table."""
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
        await bench_pool(client)
    conn = await asyncpg.connect(url)
    try:
        project_id, pool_id = await conn.fetchrow(
            "SELECT p.id, c.id FROM projects p JOIN compute_pools c ON c.project_id = p.id "
            "WHERE p.name = $1",
            PROJECT,
        )
        ids = [uuid.uuid4() for _ in range(workloads)]
        for n, workload_id in enumerate(ids):
            spec = (
                f'{{"name": "w{n}", "compute_pool": "{POOL}", "image": "i", "command": [], '
                '"args": [], "env": {}, "accelerators": 0, "cpu": "1", "memory": "1Gi", '
                '"replicas": 1, "max_runtime_seconds": 86400, "retries": 0, '
                '"priority": "normal", "labels": {}}'
            )
            await conn.execute(
                "INSERT INTO workloads (id, project_id, pool_id, name, spec, state, "
                "state_reason, observed_generation, created_by) "
                "VALUES ($1, $2, $3, $4, $5::text::jsonb, 'SUCCEEDED', 'Finished.', 1, 'bench')",
                workload_id,
                project_id,
                pool_id,
                f"w{n}",
                spec,
            )
    finally:
        await conn.close()
    return ids


class Watcher:
    """One raw SSE client: records when each change marker (`change-<n>.`) first arrives."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self.arrived: dict[int, float] = {}
        self.ready = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(
            (
                f"GET /api/v1/projects/{PROJECT}/workloads?watch=true HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {self.token}\r\nAccept: text/event-stream\r\n\r\n"
            ).encode()
        )
        buffer = b""
        try:
            while chunk := await reader.read(65536):
                now = time.monotonic()
                if not self.ready.is_set() and b"id: " in chunk:
                    self.ready.set()  # the first events are out: the stream is live
                buffer = (buffer + chunk)[-256:] if b"change-" not in chunk else buffer + chunk
                start = 0
                while (at := buffer.find(b"change-", start)) >= 0:
                    end = buffer.find(b".", at)
                    if end < 0:
                        break
                    self.arrived.setdefault(int(buffer[at + 7 : end]), now)
                    start = end
                buffer = buffer[start:]
        finally:
            writer.close()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench(args: argparse.Namespace, pg: str) -> None:
    token = secrets.token_urlsafe(24)
    async with served(pg, token, args.watchers) as (port, pid, url):
        ids = await setup(port, token, url, args.workloads)
        print(f"service pid {pid} on port {port}", flush=True)
        await asyncio.sleep(args.pause)
        rss_before = _rss_kib(pid)
        watchers = [Watcher(port, token) for _ in range(args.watchers)]
        opened = time.monotonic()
        for watcher in watchers:
            watcher.task = asyncio.create_task(watcher.run())
        await asyncio.wait_for(asyncio.gather(*(w.ready.wait() for w in watchers)), 120)
        open_seconds = time.monotonic() - opened
        await asyncio.sleep(2.0)
        rss_idle = _rss_kib(pid)
        conn = await asyncpg.connect(url)
        commits: dict[int, float] = {}
        cpu_before = _cpu_seconds(pid)
        try:
            for n in range(args.changes):
                workload = ids[n % len(ids)]
                state = "FAILED" if n % 2 == 0 else "SUCCEEDED"
                await conn.execute(
                    "UPDATE workloads SET state = $2, state_reason = $3, updated_at = now() "
                    "WHERE id = $1",
                    workload,
                    state,
                    f"Bench change-{n}.",
                )
                commits[n] = time.monotonic()
                await asyncio.sleep(args.interval)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(
                len(w.arrived) < args.changes for w in watchers
            ):
                await asyncio.sleep(0.05)
        finally:
            await conn.close()
        cpu = _cpu_seconds(pid) - cpu_before
        latencies = [
            (w.arrived[n] - commits[n]) * 1000 for w in watchers for n in commits if n in w.arrived
        ]
        missing = args.watchers * args.changes - len(latencies)
        for watcher in watchers:
            if watcher.task is not None:
                watcher.task.cancel()
        load = os.getloadavg()[0]
    print(f"watchers {args.watchers}, changes {args.changes} ({args.interval * 1000:.0f} ms apart)")
    print(f"  all streams open and live in {open_seconds:.2f} s")
    print(
        f"  service RSS {rss_before / 1024:.1f} MiB before, {rss_idle / 1024:.1f} MiB with the "
        f"streams idle: {(rss_idle - rss_before) / args.watchers:.1f} KiB per idle stream"
    )
    print(
        f"  commit -> event at every watcher: p50 {_pct(latencies, 0.5):.1f} ms, "
        f"p90 {_pct(latencies, 0.9):.1f} ms, p99 {_pct(latencies, 0.99):.1f} ms, "
        f"max {max(latencies):.1f} ms, mean {statistics.fmean(latencies):.1f} ms "
        f"({len(latencies)} deliveries, {missing} missing)"
    )
    print(
        f"  service CPU {cpu * 1000 / args.changes:.1f} ms per change "
        f"({cpu * 1e6 / max(1, len(latencies)):.0f} us per delivery); load average {load:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between changes")
    parser.add_argument("--workloads", type=int, default=10)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds before opening streams")
    parser.add_argument(
        "--pg",
        default=os.environ.get(
            "AICP_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="a maintenance database URL; an embedded server is started when it does not answer",
    )
    args = parser.parse_args()
    # Two sockets per watcher (its client end here, its server end in the child, which
    # inherits the limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    uvloop.install()

    async def run() -> None:
        if await answers(args.pg):
            await bench(args, args.pg)
            return
        with _embedded_postgres() as pg:
            await bench(args, pg)

    asyncio.run(run())


if __name__ == "__main__":
    main()
