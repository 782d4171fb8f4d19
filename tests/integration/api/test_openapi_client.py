"""The OpenAPI document generates a Python client (openapi-python-client) without a warning:
every response it documents has a shape a generator can read, and none is one aicp never sends."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import httpx


async def test_openapi_python_client_generates_a_client_without_warnings(
    app_client: httpx.AsyncClient, tmp_path: Path
) -> None:
    document = (await app_client.get("/schema/openapi.json")).json()
    for item in document["paths"].values():
        for operation in item.values():
            bad = operation.get("responses", {}).get("400")
            assert bad is None or "application/problem+json" in bad["content"]
    spec = tmp_path / "openapi.json"
    spec.write_text(json.dumps(document))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "openapi_python_client",
        "generate",
        "--path",
        str(spec),
        "--meta",
        "none",
        "--output-path",
        str(tmp_path / "client"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        },
    )  # fmt: skip  (the generator formats its output with ruff, from this environment)
    output, _ = await asyncio.wait_for(process.communicate(), 120)
    text = output.decode()
    assert process.returncode == 0, text
    assert "warning" not in text.lower(), text
    assert (tmp_path / "client" / "api").is_dir()
