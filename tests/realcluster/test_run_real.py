"""`make run-real`: `python -m realcluster up -- python -m app dev` starts a real cluster, runs
aicp against it with aicp's least-privilege kubeconfig, and the README's golden path works on it
unchanged; the kubeconfig it prints works with kubectl; SIGTERM stops everything."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from realcluster import build as building
from tests.e2e.test_service_devmode import _pump, golden_path_script
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.real_cluster, pytest.mark.timeout(180)]


def _after(lines: list[str], label: str) -> str:
    for line in lines:
        if label in line:
            return line.split(label, 1)[1].split()[0]
    raise AssertionError(f"no {label!r} in {''.join(lines)}")


async def test_the_readme_golden_path_works_on_a_real_cluster_started_like_make_run_real(
    tmp_path: Path, database_url: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "AICP_ADMIN_TOKEN")}
    env.update({"PYTHONPATH": str(REPO), "DATABASE_URL": database_url, "AICP_HTTP_PORT": "0"})
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "realcluster", "up", "--", sys.executable, "-m", "app", "dev",
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    lines: list[str] = []
    pump = asyncio.create_task(_pump(process.stderr, lines))
    try:
        await wait_until(
            lambda: any("API description" in line for line in lines) or process.returncode,
            timeout=90,
            message="the dev banner after the cluster's",
        )
        assert process.returncode is None, "".join(lines)
        url = _after(lines, "aicp is running (dev mode): ")
        kubeconfig = _after(lines, "export KUBECONFIG=")

        kubectl = await asyncio.create_subprocess_exec(
            str(building.current().binary("kubectl")), "get", "nodes", "-o", "name",
            env={**os.environ, "KUBECONFIG": kubeconfig},
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        nodes, _ = await kubectl.communicate()
        assert nodes.decode().split() == ["node/gpu-node-0", "node/gpu-node-1"]

        shell = await asyncio.create_subprocess_exec(
            "bash", "-c", golden_path_script(),
            cwd=tmp_path,
            env={**os.environ, "AICP": url},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        output, _ = await asyncio.wait_for(shell.communicate(), 120)
        transcript = output.decode()
        assert shell.returncode == 0, transcript
        assert '"SUCCEEDED"' in transcript
        assert '"product": "NVIDIA-H100-80GB-HBM3"' in transcript
        assert "EvidenceRecorded: " in transcript
        assert "exited with code 3" in transcript
        assert transcript.rstrip().endswith('"Not found"')
        assert "internal-error" not in transcript and '"status": 500' not in transcript

        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0, "".join(lines)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        await pump
