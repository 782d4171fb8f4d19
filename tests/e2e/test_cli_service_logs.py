"""`aicp logs service NAME` against a running aicp on kubesim: every replica's lines with its
pod's name, one replica's with --pod, and a workload's options refused for a service."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_cli import admin_cli
from tests.support.service import RunningService

pytestmark = pytest.mark.timeout(180)


async def test_a_services_replicas_logs(running_service: RunningService, tmp_path: Path) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool()
    await scenario.create_service("chat", replicas=2, env={"KUBESIM_LOG": "model loaded"})
    ready = await scenario.wait_service("chat", "READY")
    pods = sorted(pod["name"] for pod in ready["status"]["pods"])
    cli = admin_cli(running_service, tmp_path)

    both = await cli.run("logs", "service", "chat")
    one = await cli.run("logs", "svc", "chat", "--pod", pods[1])
    refused = await cli.run("logs", "service", "chat", "--replica", "0")

    assert (both.code, both.out.splitlines()) == (0, [f"[{pod}] model loaded" for pod in pods])
    assert (one.code, one.out) == (0, "model loaded\n")
    assert refused.code != 0
    assert refused.error_lines == [
        "error: --replica and --rank are a workload's; use --pod for a service"
    ]
