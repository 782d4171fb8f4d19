"""`python -m app dev` (what `make run` starts) in a subprocess: it announces the API, the admin
token and the embedded kubesim, serves the README's golden path, and stops cleanly on SIGTERM.

The README test runs the ```sh blocks of the README's "Quick start" and "Golden path" sections,
unchanged and in order, with bash against one fresh dev process, so the documentation stays
true when followed top to bottom.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.support.pg_fixtures import connected
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"

pytestmark = pytest.mark.timeout(90)


@dataclass
class DevProcess:
    process: asyncio.subprocess.Process
    cwd: Path
    lines: list[str] = field(default_factory=list)

    def banner(self, label: str) -> str:
        """The value after `label:` on the banner line that has it."""
        for line in self.lines:
            if line.strip().startswith(label):
                return line.split(": ", 1)[1].split()[0]
        raise AssertionError(f"no {label!r} line in {self.lines}")


async def _pump(stream: asyncio.StreamReader, into: list[str]) -> None:
    while line := await stream.readline():
        into.append(line.decode(errors="replace"))


@contextlib.asynccontextmanager
async def dev_process(directory: Path, database_url: str) -> AsyncIterator[DevProcess]:
    """`python -m app dev` in `directory` (so its state is `directory/.aicp`), on any free
    port, against the test's database (an embedded PostgreSQL takes too long to initialize)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "AICP_ADMIN_TOKEN")}
    env.update({"PYTHONPATH": str(REPO), "DATABASE_URL": database_url, "AICP_HTTP_PORT": "0"})
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "dev",
        cwd=directory,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    running = DevProcess(process, directory)
    pump = asyncio.create_task(_pump(process.stderr, running.lines))
    try:
        await wait_until(
            lambda: (
                any("API description" in line for line in running.lines)
                or process.returncode is not None
            ),
            timeout=30,
            message="the dev banner",
        )
        assert process.returncode is None, "".join(running.lines)
        yield running
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        await pump


async def test_dev_mode_announces_the_api_the_token_and_the_embedded_kubesim(
    tmp_path: Path, database_url: str
) -> None:
    async with dev_process(tmp_path, database_url) as dev:
        url = dev.banner("aicp is running (dev mode)")
        token = dev.banner("admin token")
        kubesim_url = dev.banner("kubesim (embedded, 2 nodes x 8 H100)")

        assert token == (tmp_path / ".aicp" / "admin-token").read_text().strip()
        assert kubesim_url in (tmp_path / ".aicp" / "kubeconfig").read_text()
        async with httpx.AsyncClient(base_url=url) as client:
            await wait_until(
                lambda: _status(client, "/readyz", 200), timeout=10, message="/readyz 200"
            )
            projects = await client.get(
                "/api/v1/projects", headers={"Authorization": f"Bearer {token}"}
            )
            assert projects.status_code == 200, projects.text
            # The bare URL in a browser is the dashboard's sign-in; the docs are where the
            # banner says.
            swagger = dev.banner("API docs (Swagger UI)")
            assert swagger == f"{url}/schema/swagger"
            assert dev.banner("dashboard").startswith(f"{url}/")
            root = await client.get("/")
            assert root.status_code == 303 and root.headers["location"] == "/sign-in"
            page = await client.get("/", follow_redirects=True)
            assert page.status_code == 200 and "Sign in" in page.text
            docs = await client.get("/schema/swagger")
            assert docs.status_code == 200 and "swagger" in docs.text.lower()
        kubectl = next(line for line in dev.lines if line.strip().startswith("kubectl:"))
        assert "KUBECONFIG=.aicp/kubeconfig kubectl get" in kubectl  # from where it runs
        async with httpx.AsyncClient(base_url=kubesim_url) as sim:
            nodes = (await sim.get("/api/v1/nodes")).json()["items"]
            assert [n["status"]["capacity"]["nvidia.com/gpu"] for n in nodes] == ["8", "8"]


async def _status(client: httpx.AsyncClient, path: str, expected: int) -> bool:
    return (await client.get(path)).status_code == expected


def _section(text: str, heading: str) -> str:
    """One README section, by its heading line (up to the next heading)."""
    return re.split(r"\n#{2,3} ", text.split(f"\n{heading}\n", 1)[1], maxsplit=1)[0]


def _blocks(text: str, heading: str) -> list[str]:
    """The ```sh blocks of one README section."""
    return re.findall(r"^```sh\n(.*?)^```", _section(text, heading), flags=re.S | re.M)


def console_commands(text: str, heading: str) -> list[str]:
    """The commands of the ```console blocks of one README section: each `$ ` line with its
    continuation lines; the output shown after them is left out."""
    commands: list[str] = []
    for block in re.findall(r"^```console\n(.*?)^```", _section(text, heading), re.S | re.M):
        continuing = False
        for line in block.splitlines():
            if continuing:
                commands[-1] += "\n" + line
            elif line.startswith("$ "):
                commands.append(line[2:])
            else:
                continue
            continuing = line.endswith("\\")
    return commands


def golden_path_script() -> str:
    """The ```sh blocks of the README's curl "Quick start" and "Golden path", in order: the
    REST walkthrough followed top to bottom on one fresh instance."""
    text = README.read_text()
    quick = _blocks(text, "### Quick start with curl")
    golden = _blocks(text, "### Golden path with curl")
    assert len(quick) >= 2, "the quick start lost its code blocks"
    assert len(golden) >= 6, "the golden path lost its code blocks"
    return "set -euo pipefail\n" + "\n".join(quick + golden)


async def test_the_readme_golden_path_works_against_dev_mode_and_sigterm_releases_every_lease(
    tmp_path: Path, database_url: str
) -> None:
    async with dev_process(tmp_path, database_url) as dev:
        url = dev.banner("aicp is running (dev mode)")
        shell = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            golden_path_script(),
            cwd=tmp_path,
            env={**os.environ, "AICP": url},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(shell.communicate(), 60)
        transcript = output.decode()

        assert shell.returncode == 0, transcript
        assert "204\n401\n" in transcript  # the quick start's token, revoked
        assert "Succeeded: Succeeded" not in transcript  # an event line shows its type once
        assert '"SUCCEEDED"' in transcript
        assert '"product": "NVIDIA-H100-80GB-HBM3"' in transcript
        assert "epoch 1: loss 0.42" in transcript  # the pod's log
        assert "EvidenceRecorded: " in transcript
        assert "exited with code 3" in transcript  # the failing workload's reason
        assert '"DELETING"' in transcript
        assert transcript.rstrip().endswith('"Not found"')  # the deleted workload

        # A workload still running holds a lease when the process is told to stop.
        token = dev.banner("admin token")
        async with httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {token}"}
        ) as client:
            long_run = await client.post(
                "/api/v1/projects/vision/workloads",
                json={
                    "name": "long",
                    "compute_pool": "vision-pool",
                    "image": "busybox",
                    "accelerators": 1,
                    "cpu": "1",
                    "memory": "1Gi",
                    "env": {"KUBESIM_RUN_SECONDS": "600"},
                },
            )
            assert long_run.status_code == 202, long_run.text
        async with connected(database_url) as conn:
            await wait_until(lambda: _live_leases(conn, "workload"), message="a live lease")

            dev.process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(dev.process.wait(), 20) == 0, "".join(dev.lines)

            assert await _live_leases(conn) == 0  # released: rows keep their epoch, expired


async def _live_leases(conn: asyncpg.Connection, kind: str | None = None) -> int:
    count: int = await conn.fetchval(
        "SELECT count(*) FROM leases WHERE expires_at > now() AND ($1::text IS NULL OR kind = $1)",
        kind,
    )
    return count
