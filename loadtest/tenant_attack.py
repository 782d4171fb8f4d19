"""A hostile tenant against aicp's ceilings: the figures of docs/RELIABILITY.md, "Tenants and
clients".

Starts aicp in this process (no Kubernetes: pools and tokens are API-side rules) on a fresh
database of `--pg`'s server, then, through the HTTP API like any client:

- **quota**: `--burst` pool creates at once from one project admin, alternating 100,000- and
  1-accelerator pools, against a project limited to 16 accelerators and against one without
  limits (today's default); prints how many were accepted, the accelerators they hold, the
  answers by status and the latency;
- **tokens**: `--burst` token mints at once against a cap of `--token-cap` live tokens;
- **lineage**: a chain of `--depth` tokens each minted by the one before, then one DELETE of
  the first; prints its latency and how many of the chain still authenticate.

    .venv/bin/python loadtest/tenant_attack.py --pg postgresql://postgres:postgres@127.0.0.1:5432/postgres

Every answer is checked against the API's promises (no 5xx; only 202/201 or the documented
refusal); the run fails otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.config import Settings
from app.main import Service
from loadtest.databases import scratch_database

ADMIN = "tenant-attack-admin-token-0123456789"
CLASS = "h100-80g"


def settings(url: str, token_cap: int) -> Settings:
    return Settings(
        database_url=url,
        kubeconfig=None,
        instance_id="tenant-attack",
        http_host="127.0.0.1",
        http_port=0,
        admin_token=ADMIN,
        lease_ttl_seconds=15.0,
        sweep_interval_seconds=1.0,
        workers=2,
        db_pool_size=10,
        log_format="console",
        tokens_per_project=token_cap,
    )


async def timed(call: Any) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    response = await call
    return response, (time.perf_counter() - started) * 1000


def latency(ms: list[float]) -> str:
    ordered = sorted(ms)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered):.0f} ms, p99 {p99:.0f} ms"


async def burst(
    client: httpx.AsyncClient, path: str, bodies: list[dict[str, Any]], allowed: set[int]
) -> tuple[list[httpx.Response], Counter[int], str]:
    """POST every body at once; the answers, their count by status and their latency. Any
    status outside `allowed` ends the run."""
    results = await asyncio.gather(*(timed(client.post(path, json=body)) for body in bodies))
    answers = [response for response, _ in results]
    statuses = Counter(a.status_code for a in answers)
    unexpected = set(statuses) - allowed
    if unexpected:
        bad = next(a for a in answers if a.status_code in unexpected)
        raise SystemExit(f"unexpected answer {bad.status_code}: {bad.text}")
    return answers, statuses, latency([ms for _, ms in results])


async def quota(client: httpx.AsyncClient, count: int, limits: Any, label: str) -> None:
    project = f"q-{label}"
    body: dict[str, Any] = {"name": project}
    if limits is not None:
        body["limits"] = limits
    assert (await client.post("/api/v1/projects", json=body)).status_code == 202
    pools = f"/api/v1/projects/{project}/compute-pools"

    def pool(n: int) -> dict[str, Any]:
        size = 100_000 if n % 2 == 0 else 1
        return {
            "name": f"p-{n}",
            "accelerator_class": CLASS,
            "quota": {"accelerators": size, "cpu": "1", "memory": "1Gi"},
        }

    answers, statuses, took = await burst(
        client, pools, [pool(n) for n in range(count)], {202, 422}
    )
    held = sum(a.json()["quota"]["accelerators"] for a in answers if a.status_code == 202)
    print(
        f"quota {label:9s} {count} pool creates at once: {statuses[202]} accepted holding "
        f"{held} accelerators, {statuses[422]} refused (422); {took}"
    )


async def tokens(client: httpx.AsyncClient, count: int, cap: int) -> None:
    assert (await client.post("/api/v1/projects", json={"name": "tokens"})).status_code == 202
    path = "/api/v1/projects/tokens/tokens"

    def body(n: int) -> dict[str, Any]:
        return {"name": f"t-{n}", "role": "viewer", "expires_in_days": 1}

    _, statuses, took = await burst(client, path, [body(n) for n in range(count)], {201, 409})
    print(
        f"tokens    {count} mints at once, cap {cap}: {statuses[201]} created, "
        f"{statuses[409]} refused (409); {took}"
    )


async def lineage(client: httpx.AsyncClient, base: str, depth: int) -> None:
    assert (await client.post("/api/v1/projects", json={"name": "chain"})).status_code == 202
    path = "/api/v1/projects/chain/tokens"
    first = await client.post(path, json={"name": "c-0", "role": "admin", "expires_in_days": 30})
    chain = [first.json()]
    for n in range(1, depth):
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {chain[-1]['token']}"}
        ) as minter:
            made = await minter.post(
                path, json={"name": f"c-{n}", "role": "admin", "expires_in_days": max(1, 30 - n)}
            )
            assert made.status_code == 201, made.text
            chain.append(made.json())
    response, ms = await timed(client.delete(f"{path}/{chain[0]['id']}"))
    assert response.status_code == 204, response.text
    alive = 0
    for token in chain:
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {token['token']}"}
        ) as holder:
            alive += (await holder.get("/api/v1/projects/chain")).status_code == 200
    print(
        f"lineage   a chain of {depth} tokens, each minted by the one before: one DELETE of the "
        f"first took {ms:.0f} ms; {alive} of {depth} still authenticate"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", required=True, help="a PostgreSQL URL (its server is used)")
    parser.add_argument("--burst", type=int, default=50)
    parser.add_argument("--token-cap", type=int, default=20)
    parser.add_argument("--depth", type=int, default=20, help="at most --token-cap")
    args = parser.parse_args()
    async with scratch_database(args.pg, "tenant_attack") as url:
        service = Service(settings(url, args.token_cap))
        await service.start()
        try:
            async with httpx.AsyncClient(
                base_url=service.url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60
            ) as client:
                binding = {"resource_name": "nvidia.com/gpu", "flavor": CLASS, "node_labels": {}}
                assert (
                    await client.put(f"/api/v1/accelerator-bindings/{CLASS}", json=binding)
                ).status_code == 201
                await quota(client, args.burst, None, "unlimited")
                await quota(client, args.burst, {"accelerators": {CLASS: 16}}, "limited")
                await tokens(client, args.burst, args.token_cap)
                await lineage(client, service.url, args.depth)
        finally:
            await service.stop()


if __name__ == "__main__":
    asyncio.run(main())
