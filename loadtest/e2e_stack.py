"""aicp end to end in three processes, as deployed: kubesim (`python -m kubesim`, the API
server with Kueue and 2 nodes x 8 H100), aicp (`python -m app serve` with `KUBECONFIG`
pointing at it) on a throwaway database, and the caller (this process).

    async with e2e_stack(admin_url) as stack:
        stack.aicp_url, stack.kubesim_url, stack.headers

The database is created from `admin_url`'s server and dropped afterwards; both processes are
stopped with SIGTERM (aicp first, so it releases its leases while the cluster still answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from kubesim.command import command as kubesim_command
from loadtest.children import spawn, stop
from loadtest.databases import scratch_database
from tests.support.scenario import Scenario

REPO = Path(__file__).resolve().parent.parent
ADMIN_TOKEN = "bench-admin-token-" + secrets.token_hex(8)
PROJECT, POOL, CLASS = "bench", "h100-pool", "h100-80g"
WORKLOADS = f"/api/v1/projects/{PROJECT}/workloads"
#: The benchmarks' workloads: one GPU, the default runtime bound, done after 0.2 s.
DEFAULTS: dict[str, Any] = {
    "accelerators": 1,
    "cpu": "1",
    "memory": "4Gi",
    "max_runtime_seconds": 86400,
    "env": {"KUBESIM_RUN_SECONDS": "0.2"},
}


@dataclass
class Stack:
    aicp_url: str
    kubesim_url: str
    database_url: str
    headers: dict[str, str]
    aicp_pid: int
    kubesim_pid: int
    #: Stops aicp (SIGTERM) and starts it again on the same port; sets `aicp_pid`.
    restart_aicp: Callable[[], Awaitable[None]] | None = None
    #: aicp's output (`aicp.log`, then `aicp-restarted.log`), while the stack runs.
    log_dir: Path | None = None

    def cpu_seconds(self, pid: int) -> float:
        """User + system CPU time a process has used so far (Linux `/proc`)."""
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(
    argv: list[str], env: dict[str, str], log: Path, cwd: Path = REPO
) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return spawn(argv, env, out, cwd)


async def _wait_for_line(log: Path, needle: str, process: subprocess.Popen[bytes]) -> str:
    for _ in range(2400):
        for line in log.read_text(errors="replace").splitlines():
            if needle in line:
                return line
        if process.poll() is not None:
            raise SystemExit(f"{process.args} exited:\n{log.read_text(errors='replace')}")
        await asyncio.sleep(0.05)
    raise SystemExit(f"no {needle!r} in {log}")


@contextlib.asynccontextmanager
async def e2e_stack(
    admin_url: str,
    *,
    aicp_repo: Path = REPO,
    sim_nodes: int = 2,
    sim_args: tuple[str, ...] = (),
    debug_loggers: tuple[str, ...] = (),
    **aicp_env: str,
) -> AsyncIterator[Stack]:
    """The three processes; `aicp_repo`: run aicp from another checkout (e.g. an older
    commit's, to compare), with this interpreter; `sim_nodes`: kubesim's nodes (8 H100s each);
    `sim_args`: kubesim's other options (`--no-controllers`: the API server alone);
    `debug_loggers`: aicp's loggers that log at DEBUG (the others stay at INFO)."""
    async with (
        scratch_database(admin_url, "aicp_e2e_bench") as database_url,
        _processes(database_url, aicp_env, aicp_repo, sim_nodes, debug_loggers, sim_args) as stack,
    ):
        yield stack


@contextlib.asynccontextmanager
async def _processes(
    database_url: str,
    aicp_env: dict[str, str],
    aicp_repo: Path,
    sim_nodes: int = 2,
    debug_loggers: tuple[str, ...] = (),
    sim_args: tuple[str, ...] = (),
) -> AsyncIterator[Stack]:
    processes: list[subprocess.Popen[bytes]] = []
    serve = [sys.executable, "-m", "app", "serve"]
    if debug_loggers:
        # `python -m app serve`, with these loggers set to DEBUG first (logging's setup
        # leaves a logger's own level alone).
        serve = [
            sys.executable,
            "-c",
            "import logging, sys\n"
            f"for name in {list(debug_loggers)!r}: logging.getLogger(name).setLevel('DEBUG')\n"
            "from app.__main__ import main\n"
            "sys.exit(main(['serve']))",
        ]
    try:
        with tempfile.TemporaryDirectory(prefix="aicp-e2e-") as tmp:
            directory = Path(tmp)
            kubeconfig = directory / "kubeconfig"
            kubesim = _start(
                kubesim_command(kubeconfig, "--nodes", str(sim_nodes), *sim_args),
                {**os.environ},
                directory / "kubesim.log",
            )
            processes.append(kubesim)
            line = await _wait_for_line(directory / "kubesim.log", "listening on", kubesim)
            kubesim_url = line.rsplit(" ", 1)[1].strip()
            while not kubeconfig.exists():
                await asyncio.sleep(0.05)
            env = {
                **{k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"},
                "DATABASE_URL": database_url,
                "KUBECONFIG": str(kubeconfig),
                "AICP_ADMIN_TOKEN": ADMIN_TOKEN,
                "AICP_HTTP_HOST": "127.0.0.1",
                "AICP_HTTP_PORT": "0",
                "AICP_INSTANCE_ID": "bench",
                "AICP_LOG_FORMAT": "console",
                **aicp_env,
            }
            aicp = _start(serve, env, directory / "aicp.log", aicp_repo)
            processes.insert(0, aicp)
            line = await _wait_for_line(directory / "aicp.log", "serving on", aicp)
            aicp_url = line.rsplit(" ", 1)[1].strip()
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            stack = Stack(
                aicp_url,
                kubesim_url,
                database_url,
                headers,
                aicp.pid,
                kubesim.pid,
                log_dir=directory,
            )
            await _wait_ready(aicp_url)

            async def restart() -> None:
                stop(processes.pop(0), 20)
                port = aicp_url.rsplit(":", 1)[1]
                log = directory / "aicp-restarted.log"
                again = _start(serve, {**env, "AICP_HTTP_PORT": port}, log, aicp_repo)
                processes.insert(0, again)
                await _wait_for_line(log, "serving on", again)
                stack.aicp_pid = again.pid
                await _wait_ready(aicp_url)

            stack.restart_aicp = restart
            yield stack
            for process in processes:
                stop(process, 20)
    finally:
        for process in processes:
            stop(process, 20)


async def _wait_ready(url: str, timeout: float = 120.0) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            if (await client.get("/readyz")).status_code == 200:
                return
            await asyncio.sleep(0.05)
    raise SystemExit("aicp did not become ready")


def scenario(client: httpx.AsyncClient) -> Scenario:
    """The scenario API (tests/support/scenario.py) for the benchmarks' project `bench` and its
    pool through `client`: 1-GPU workloads that run 0.2 s, waits of up to a minute."""
    return Scenario(
        client, project=PROJECT, pool=POOL, defaults=DEFAULTS, wait_timeout=60.0, interval=0.02
    )


#: The label selector of everything aicp applies.
MANAGED = "app.kubernetes.io/managed-by=aicp"


async def watch_managed(
    sim: httpx.AsyncClient, path: str, opened: asyncio.Event
) -> AsyncIterator[tuple[float, dict[str, Any]]]:
    """Each watch event of kubesim's `path` (e.g. `/api/v1/pods`) for what aicp manages, with the
    `time.perf_counter()` it arrived at; sets `opened` once the watch is open."""
    params = {"watch": "true", "labelSelector": MANAGED, "timeoutSeconds": "3600"}
    async with sim.stream("GET", path, params=params, timeout=None) as response:
        response.raise_for_status()
        opened.set()
        async for line in response.aiter_lines():
            now = time.perf_counter()
            if line:
                yield now, json.loads(line)
