"""aicp and the usual FastAPI + SQLAlchemy control plane under the same load, in one run.

    .venv/bin/python loadtest/side_by_side.py --seconds 10 --connections 8

Both servers get a fresh database on the same PostgreSQL (`--pg`) with aicp's schema and the
same binding, project, pool and editor token (set up through aicp's API, then copied). aicp runs
as deployed (`python -m app serve`, its reconciler applying a Job to kubesim for every new
workload); the comparison server is `loadtest/comparison_server.py` on uvicorn (uvloop,
httptools), doing the same logical work per request. Each server is pinned with `taskset` to
CPU 0 and the load generator to CPU 1; kubesim and PostgreSQL are not pinned.

The load generator is `wrk` (Debian's `wrk`): one thread, `--connections` keep-alive
connections, closed loop, written in C, so one core of it outruns either server; a Lua script
gives every POST a new workload name and every GET one of the workloads seeded before. Phases,
each after a one-second warm-up: GET of one workload, then POST of new ones, for each server in
turn (never both at once). Any answer but 200 / 202 fails the run. Prints the ratio table and
the CPU each server used per request.

`--variant NAME:VAR=VALUE[,VAR=VALUE]` adds one more aicp replica (on aicp's database, CPU 0)
with its environment changed, measured in the same run: the before/after of a setting, e.g.
`--variant nocache:AICP_TOKEN_CACHE_SIZE=0`; its rows give its rate against aicp's.

Without `wrk` on the PATH (`apt-get install wrk`) it refuses to run: a Python load generator on
one core would measure itself, not the servers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.store.migrations import discover
from loadtest.api_bench import (
    NO_RATE_LIMITS,
    POOL,
    PROJECT,
    _bearer,
    _free_port,
    kubesim,
    process_cpu,
    setup,
)
from loadtest.children import spawn, stop

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = f"/api/v1/projects/{PROJECT}/workloads"
COPIED_TABLES = ("projects", "accelerator_bindings", "compute_pools", "api_tokens")

LUA = """
local mode, prefix, seeded = "%(mode)s", "%(prefix)s", %(seeded)d
local path = "%(path)s"
local n = 0
local body_head = '{"name":"'
local body_tail = '","compute_pool":"%(pool)s","image":"ghcr.io/acme/train:1.4",' ..
  '"command":["python","train.py"],"accelerators":1,"cpu":"4","memory":"16Gi",' ..
  '"labels":{"team":"bench"}}'
wrk.headers["Authorization"] = "Bearer %(token)s"
wrk.headers["Content-Type"] = "application/json"
request = function()
  n = n + 1
  if mode == "get" then
    return wrk.format("GET", path .. "/seed-" .. (n %% seeded))
  end
  return wrk.format("POST", path, nil, body_head .. prefix .. "-" .. n .. body_tail)
end
done = function(summary, latency, requests)
  io.write(string.format(
    '{"requests":%%d,"duration_us":%%d,"non2xx":%%d,"socket_errors":%%d,' ..
    '"p50_us":%%d,"p99_us":%%d}\\n',
    summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write +
    summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


@dataclass
class Result:
    """One phase of one server: rate, latency and the server's CPU per request."""

    rate: float
    p50_ms: float
    p99_ms: float
    cpu_ms: float


@dataclass
class Server:
    name: str
    url: str
    token: str
    pid: int
    seeded: bool = False  # a variant shares aicp's database and its seeded workloads


def _pinned(cpu: int, argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(cpu), *argv] if shutil.which("taskset") else argv


async def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"{proc.args} exited:\n{log.read_text(errors='replace')[-3000:]}")
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.2)
    raise SystemExit(f"{url} did not answer within 60 s")


@contextlib.asynccontextmanager
async def databases(pg: str) -> AsyncIterator[tuple[str, str]]:
    """Two fresh databases (aicp's, the comparison's) on `pg`; dropped afterwards."""
    suffix = secrets.token_hex(4)
    names = (f"aicp_sbs_{suffix}", f"cmp_sbs_{suffix}")
    admin = await asyncpg.connect(f"{pg}/postgres")
    try:
        for name in names:
            await admin.execute(f'CREATE DATABASE "{name}"')
        yield f"{pg}/{names[0]}", f"{pg}/{names[1]}"
    finally:
        for name in names:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def copy_setup(source: str, target: str) -> None:
    """aicp's schema on `target`, and the rows the setup made on `source` copied into it."""
    src, dst = await asyncpg.connect(source), await asyncpg.connect(target)
    try:
        for migration in discover(ROOT / "sql" / "migrations"):
            await dst.execute(migration.sql)
        for table in COPIED_TABLES:
            rows = await src.fetch(f"SELECT * FROM {table}")
            await dst.copy_records_to_table(table, records=rows, columns=list(rows[0].keys()))
    finally:
        await src.close()
        await dst.close()


async def seed(server: Server, count: int) -> None:
    """`count` workloads named seed-N, for the GET phase."""
    async with aiohttp.ClientSession(headers=_bearer(server.token)) as session:
        for n in range(count):
            body = {"name": f"seed-{n}", "compute_pool": POOL, "image": "ghcr.io/acme/train:1.4"}
            async with session.post(f"{server.url}{WORKLOADS}", json=body) as resp:
                if resp.status != 202:
                    raise SystemExit(f"{server.name}: seed -> {resp.status}: {await resp.text()}")


def wrk(
    server: Server,
    mode: str,
    seconds: int,
    connections: int,
    seeded: int,
    directory: Path,
    profiles: Path | None = None,
) -> Result:
    """One wrk phase on CPU 1 against `server`; its rate, latencies and the server's CPU.
    With `profiles`, py-spy (on CPU 1 too) samples the server during the measured run and
    writes `<server>-<mode>.txt` there (collapsed stacks: flamegraph.pl or speedscope read
    them)."""

    def run(duration: float) -> dict[str, int]:
        prefix = f"{mode}-{secrets.token_hex(3)}"  # new workload names in every run
        script = directory / f"{server.name}-{prefix}.lua"
        script.write_text(
            LUA
            % {
                "mode": mode,
                "prefix": prefix,
                "seeded": seeded,
                "path": WORKLOADS,
                "pool": POOL,
                "token": server.token,
            }
        )
        argv = ["wrk", "-t1", f"-c{connections}", f"-d{round(duration)}s", "-s", str(script)]
        out = subprocess.run(
            [*_pinned(1, argv), server.url], capture_output=True, text=True, check=True
        ).stdout
        found: dict[str, int] = json.loads(out.strip().splitlines()[-1])
        if found["non2xx"] or found["socket_errors"]:
            raise SystemExit(f"{server.name} {mode}: {found} (wrk said:\n{out})")
        return found

    run(1)  # warm-up: connections, statement caches, the interpreter's own caches
    spy = None
    if profiles is not None:
        out = profiles / f"{server.name}-{mode}.txt"
        argv = ["py-spy", "record", "-p", str(server.pid), "-d", str(seconds), "-r", "250"]
        spy = subprocess.Popen(
            _pinned(1, [*argv, "-f", "raw", "--nonblocking", "-o", str(out)]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    cpu = process_cpu(server.pid)
    before = cpu()
    found = run(seconds)
    used = cpu() - before
    if spy is not None:
        spy.wait(timeout=seconds + 30)
    return Result(
        rate=found["requests"] / (found["duration_us"] / 1e6),
        p50_ms=found["p50_us"] / 1000,
        p99_ms=found["p99_us"] / 1000,
        cpu_ms=used / found["requests"] * 1000,
    )


@contextlib.asynccontextmanager
async def both_servers(
    pg: str, directory: Path, variants: dict[str, dict[str, str]] | None = None
) -> AsyncIterator[list[Server]]:
    """kubesim, aicp (CPU 0) and the comparison server (CPU 0), each on its own database; and
    one more aicp replica per variant (CPU 0, on aicp's database, its environment changed)."""
    admin_token = f"bench-{secrets.token_urlsafe(24)}"
    async with databases(pg) as (aicp_db, cmp_db):
        with kubesim(directory) as kubeconfig, contextlib.ExitStack() as stack:
            aicp_port, cmp_port = _free_port(), _free_port()
            env = {
                **os.environ,
                "KUBECONFIG": str(kubeconfig),
                "DATABASE_URL": aicp_db,
                "AICP_ADMIN_TOKEN": admin_token,
                "AICP_HTTP_HOST": "127.0.0.1",
                "AICP_HTTP_PORT": str(aicp_port),
                "AICP_LOG_FORMAT": "json",
                **NO_RATE_LIMITS,
            }
            aicp_log = stack.enter_context((directory / "aicp.log").open("w+b"))
            aicp = spawn(_pinned(0, [sys.executable, "-m", "app", "serve"]), env, aicp_log)
            stack.callback(stop, aicp, 20)
            aicp_url = f"http://127.0.0.1:{aicp_port}"
            await _wait_ready(f"{aicp_url}/readyz", aicp, directory / "aicp.log")
            editor = await setup(aicp_url, admin_token)
            others: list[Server] = []
            for name, changes in (variants or {}).items():
                port = _free_port()
                variant_env = {
                    **env,
                    "AICP_HTTP_PORT": str(port),
                    "AICP_INSTANCE_ID": f"bench-{name}",
                    **changes,
                }
                variant_log = stack.enter_context((directory / f"aicp-{name}.log").open("w+b"))
                variant = spawn(
                    _pinned(0, [sys.executable, "-m", "app", "serve"]), variant_env, variant_log
                )
                stack.callback(stop, variant, 20)
                url = f"http://127.0.0.1:{port}"
                await _wait_ready(f"{url}/readyz", variant, directory / f"aicp-{name}.log")
                others.append(Server(f"aicp[{name}]", url, editor, variant.pid, seeded=True))
            await copy_setup(aicp_db, cmp_db)
            cmp_log = stack.enter_context((directory / "comparison.log").open("w+b"))
            comparison = spawn(
                _pinned(
                    0,
                    [
                        sys.executable,
                        str(ROOT / "loadtest" / "comparison_server.py"),
                        "--port",
                        str(cmp_port),
                    ],
                ),
                {**os.environ, "DATABASE_URL": cmp_db},
                cmp_log,
            )
            stack.callback(stop, comparison, 20)
            cmp_url = f"http://127.0.0.1:{cmp_port}"
            await _wait_ready(f"{cmp_url}/healthz", comparison, directory / "comparison.log")
            yield [
                Server("aicp", aicp_url, editor, aicp.pid),
                *others,
                Server("comparison", cmp_url, editor, comparison.pid),
            ]


async def measure(
    pg: str,
    seconds: int,
    connections: int,
    seeded: int,
    profiles: Path | None,
    variants: dict[str, dict[str, str]] | None = None,
) -> dict[str, dict[str, Result]]:
    results: dict[str, dict[str, Result]] = {}
    with tempfile.TemporaryDirectory(prefix="aicp-sbs-") as tmp:
        directory = Path(tmp)
        async with both_servers(pg, directory, variants) as servers:
            for server in servers:
                if not server.seeded:
                    await seed(server, seeded)
            for server in servers:
                results[server.name] = {
                    mode: await asyncio.to_thread(
                        wrk, server, mode, seconds, connections, seeded, directory, profiles
                    )
                    for mode in ("get", "post")
                }
                for mode, result in results[server.name].items():
                    print(f"{server.name} {mode}: {result}", file=sys.stderr, flush=True)
    return results


def table(results: dict[str, dict[str, Result]]) -> str:
    aicp, other = results["aicp"], results["comparison"]
    lines = [
        "| request | aicp | comparison stack | ratio |",
        "|---|---|---|---|",
    ]
    for mode, label in (("get", "`GET .../workloads/{name}`"), ("post", "`POST .../workloads`")):
        a, c = aicp[mode], other[mode]
        lines.append(
            f"| {label} | {a.rate:,.0f} req/s (p50 {a.p50_ms:.1f} / p99 {a.p99_ms:.1f} ms, "
            f"{a.cpu_ms:.2f} ms CPU) | {c.rate:,.0f} req/s (p50 {c.p50_ms:.1f} / p99 "
            f"{c.p99_ms:.1f} ms, {c.cpu_ms:.2f} ms CPU) | {a.rate / c.rate:.1f}x |"
        )
    for name in results:
        if not name.startswith("aicp["):
            continue
        for mode, label in (("get", "`GET`"), ("post", "`POST`")):
            v, a = results[name][mode], aicp[mode]
            lines.append(
                f"| {label} {name} | {v.rate:,.0f} req/s (p50 {v.p50_ms:.1f} / p99 "
                f"{v.p99_ms:.1f} ms, {v.cpu_ms:.2f} ms CPU) | (against aicp: {a.rate:,.0f} "
                f"req/s) | {v.rate / a.rate:.2f}x aicp |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10, help="duration of each phase")
    parser.add_argument("--connections", type=int, default=8, help="wrk connections (c)")
    parser.add_argument("--seeded", type=int, default=200, help="workloads the GETs read")
    parser.add_argument(
        "--profile", type=Path, help="write py-spy profiles of each measured phase here"
    )
    parser.add_argument(
        "--pg",
        default=os.environ.get("AICP_BENCH_PG", "postgresql://postgres:postgres@127.0.0.1:5432"),
        help="PostgreSQL server for the two fresh databases (URL without a database)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:VAR=VALUE[,VAR=VALUE]",
        help="also measure an aicp replica with these environment changes (repeatable), e.g. "
        "nocache:AICP_TOKEN_CACHE_SIZE=0: before/after of a setting in one run",
    )
    args = parser.parse_args()
    variants = {}
    for spec in args.variant:
        name, _, assignments = spec.partition(":")
        variants[name] = dict(pair.split("=", 1) for pair in assignments.split(",") if pair)
    if shutil.which("wrk") is None:
        raise SystemExit("side_by_side.py needs wrk on the PATH (apt-get install wrk)")
    load_before = os.getloadavg()[0]
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    results = asyncio.run(
        measure(
            args.pg.rstrip("/"),
            args.seconds,
            args.connections,
            args.seeded,
            args.profile,
            variants,
        )
    )
    print(
        f"c={args.connections}, {args.seconds:g} s per phase, servers on CPU 0, wrk on CPU 1, "
        f"cpus {os.cpu_count()}, load average {load_before:.1f} before / "
        f"{os.getloadavg()[0]:.1f} after"
    )
    print(table(results))


if __name__ == "__main__":
    main()
