"""Starting aicp: concurrent migrations, the serve entry point and its configuration errors."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.parse
from pathlib import Path

import asyncpg
import httpx

from app.main import Service
from app.store.migrations import discover
from kubesim import Cluster
from tests.support.api_client import ADMIN_TOKEN
from tests.support.pg_fixtures import service_settings

REPO = Path(__file__).resolve().parents[3]


async def test_two_instances_starting_at_once_on_an_empty_database_both_migrate_and_serve(
    empty_database_url: str,
) -> None:
    first = Service(service_settings(empty_database_url))
    second = Service(service_settings(empty_database_url))
    try:
        await asyncio.gather(first.start(), second.start())
        for service in (first, second):
            async with httpx.AsyncClient(
                base_url=service.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
            ) as client:
                assert (await client.get("/readyz")).status_code == 200
                assert (await client.get("/api/v1/projects")).status_code == 200
        conn = await asyncpg.connect(empty_database_url)
        try:
            versions = [
                r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")
            ]
        finally:
            await conn.close()
        assert sorted(versions) == [m.version for m in discover()]
    finally:
        await asyncio.gather(first.stop(), second.stop())


async def test_readyz_turns_503_when_the_database_goes_away(
    pg_server_url: str, empty_database_url: str
) -> None:
    service = Service(service_settings(empty_database_url))
    await service.start()
    try:
        async with httpx.AsyncClient(
            base_url=service.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        ) as client:
            assert (await client.get("/readyz")).status_code == 200
            # The path, not the last "/": an embedded server's URL ends in `?host=/tmp/.../pg`.
            name = urllib.parse.urlsplit(empty_database_url).path.lstrip("/")
            admin = await asyncpg.connect(pg_server_url)
            try:
                await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            finally:
                await admin.close()
            ready = await client.get("/readyz")
            assert ready.status_code == 503
            assert "database" in ready.json()["reasons"][0]
            response = await client.get("/api/v1/projects")
            assert response.status_code == 503
            assert response.headers["retry-after"] == "1"
            assert response.json()["type"].endswith("/service-unavailable")
            assert (await client.get("/healthz")).status_code == 200
    finally:
        await service.stop()


def _serve(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app", "serve"],
        cwd=REPO,
        env={"PATH": os.environ.get("PATH", ""), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_serve_with_bad_settings_exits_2_with_one_line_per_bad_value() -> None:
    process = _serve(
        {
            "AICP_HTTP_PORT": "eighty",
            "AICP_WORKERS": "0",
            "AICP_LOG_FORMAT": "xml",
            "AICP_ADMIN_TOKEN": "short",
        }
    )
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2
    assert "AICP_HTTP_PORT='eighty' is invalid" in stderr
    assert "AICP_WORKERS='0' is invalid" in stderr
    assert "AICP_LOG_FORMAT='xml' is invalid" in stderr
    assert "AICP_ADMIN_TOKEN=(hidden) is invalid" in stderr
    assert "short" not in stderr
    assert "DATABASE_URL is not set" in stderr


async def test_serve_logs_json_lines_with_its_instance_id_and_stops_on_sigterm(
    database_url: str, kube_cluster: Cluster, tmp_path: Path
) -> None:
    kubeconfig = kube_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    process = _serve(
        {
            "DATABASE_URL": database_url,
            "AICP_ADMIN_TOKEN": ADMIN_TOKEN,
            "AICP_HTTP_HOST": "127.0.0.1",
            "AICP_HTTP_PORT": "0",
            "AICP_INSTANCE_ID": "serve-test",
            "KUBECONFIG": str(kubeconfig),
        }
    )
    try:
        assert process.stderr is not None
        entry: dict[str, str] = {}
        while "serving on" not in entry.get("msg", ""):
            line = await asyncio.wait_for(asyncio.to_thread(process.stderr.readline), 30)
            assert line, "serve exited before serving"
            entry = json.loads(line)
            assert entry["instance_id"] == "serve-test"
        url = entry["msg"].split("serving on ")[1]
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/healthz")).status_code == 200
        process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(process.wait, 30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
