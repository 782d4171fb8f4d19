"""The OpenAPI document generates a Python client (openapi-python-client) without a warning:
every response it documents has a shape a generator can read, and none is one aicp never sends;
its methods are named by the short operation ids, event streams are handed over as text, not
parsed as JSON, and the examples are the texts aicp really answers."""

from __future__ import annotations

import asyncio
import json
import os
import re
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
    api = tmp_path / "client" / "api"
    methods = {path.stem for path in api.glob("*/*.py") if path.stem != "__init__"}
    ids = [
        operation["operationId"]
        for item in document["paths"].values()
        for operation in item.values()
        if isinstance(operation, dict) and "operationId" in operation
    ]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+)*", i) for i in ids), ids
    assert {"listWorkloads", "getWorkload", "watchWorkload", "createWorkload"} <= set(ids)
    assert methods == {re.sub(r"([A-Z])", r"_\1", i).lower() for i in ids}
    watch = (api / "workloads" / "watch_workload.py").read_text()
    assert "response_200 = response.text" in watch  # an SSE client reads it, not from_dict
    create = (api / "workloads" / "create_workload.py").read_text()
    assert "response_200 = WorkloadDryRun.from_dict(response.json())" in create  # dry_run=true
    assert "dry_run: bool | Unset = False" in create
    problem = (tmp_path / "client" / "models" / "problem.py").read_text()
    assert "errors (list[FieldProblem] | None | Unset)" in problem


async def test_the_examples_are_the_texts_aicp_answers(app_client: httpx.AsyncClient) -> None:
    schemas = (await app_client.get("/schema/openapi.json")).json()["components"]["schemas"]

    def example(schema: str, field: str) -> object:
        return schemas[schema]["properties"][field]["examples"][0]

    created = (await app_client.post("/api/v1/projects", json={"name": "research"})).json()
    assert created["status"]["reason"] == example("Status", "reason")
    typo = await app_client.post("/api/v1/projects", json={"name": "x", "dispaly_name": "X"})
    problem = typo.json()
    for field in ("type", "title", "status", "detail", "instance"):
        assert problem[field] == example("Problem", field), field
    [error] = problem["errors"]
    assert error == {f: example("FieldProblem", f) for f in ("field", "message")}
