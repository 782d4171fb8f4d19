"""Hostile names and text against a running aicp: every answer a 422 naming the field, none
stored, and what a tenant's ordinary requests see meanwhile.

Closed-loop clients send creates whose names, keys, labels, images or display names carry a
trailing newline, other control characters, bidirectional overrides or reserved names, for
`--seconds`; then the same number of clients send valid workload creates. Every hostile answer
must be 422 (anything else fails the run: a 500, a dropped connection, a 202), and after the
run no stored project, pool or workload name fails the whole-string rule.

    .venv/bin/python loadtest/hostile_names.py --seconds 10 --concurrency 8

It starts its own database, kubesim and `python -m app serve` like `loadtest/api_bench.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import secrets
import sys
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.api_bench import POOL, PROJECT, REQUEST_TIMEOUT, _bearer, run_phase, served, setup

NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
WORKLOAD = {"compute_pool": POOL, "image": "ghcr.io/acme/train:1.4", "cpu": "1", "memory": "1Gi"}
#: (path under /api/v1, body) pairs every one of which must be refused with 422.
HOSTILE: list[tuple[str, dict[str, object]]] = [
    ("projects", {"name": "nlproj\n"}),
    ("projects", {"name": "default"}),
    ("projects", {"name": "system"}),
    ("projects", {"name": "ok", "display_name": "a\u202eb"}),
    ("projects", {"name": "ok", "labels": {"team": "nlp\n"}}),
    (f"projects/{PROJECT}/compute-pools", {"name": "p\r", "accelerator_class": "bench-gpu"}),
    (f"projects/{PROJECT}/workloads", {**WORKLOAD, "name": "w\n"}),
    (f"projects/{PROJECT}/workloads", {**WORKLOAD, "name": "w", "image": "busybox\x85"}),
    (f"projects/{PROJECT}/workloads", {**WORKLOAD, "name": "w", "env": {"A\n": "1"}}),
    (f"projects/{PROJECT}/workloads", {**WORKLOAD, "name": "w", "labels": {"k\u2028": "v"}}),
]


async def hostile_run(base: str, token: str, seconds: float, concurrency: int) -> None:
    await setup(base, token)
    api = f"{base}/api/v1"
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        headers=_bearer(token), connector=connector, timeout=REQUEST_TIMEOUT
    ) as session:

        async def hostile(client: int, n: int) -> None:
            path, body = HOSTILE[(client + n) % len(HOSTILE)]
            async with session.post(f"{api}/{path}", json=body) as resp:
                text = await resp.text()
                if resp.status != 422:
                    raise SystemExit(f"POST {path} {body!r} -> {resp.status}: {text}")

        async def valid(client: int, n: int) -> None:
            body = {**WORKLOAD, "name": f"v-{client}-{n}"}
            async with session.post(f"{api}/projects/{PROJECT}/workloads", json=body) as resp:
                if resp.status != 202:
                    raise SystemExit(f"valid create -> {resp.status}: {await resp.text()}")

        attack = await run_phase("hostile creates (422)", concurrency, seconds, hostile, None)
        print(attack.summary(), file=sys.stderr, flush=True)
        normal = await run_phase("valid workload creates", concurrency, seconds, valid, None)
        print(normal.summary(), file=sys.stderr, flush=True)
        stored: list[str] = []
        for path in ("projects", f"projects/{PROJECT}/compute-pools"):
            async with session.get(f"{api}/{path}?limit=500") as resp:
                stored += [item["name"] for item in (await resp.json())["items"]]
        bad = [name for name in stored if NAME.fullmatch(name) is None]
        print(f"stored names failing the whole-string rule: {len(bad)}", file=sys.stderr)
        if bad:
            raise SystemExit(f"stored: {bad!r}")


async def amain(args: argparse.Namespace) -> None:
    token = secrets.token_urlsafe(24)
    async with served(args.pg, token) as (base, _pid):
        await hostile_run(base, token, args.seconds, args.concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each phase")
    parser.add_argument("--concurrency", type=int, default=8, help="closed-loop clients")
    parser.add_argument("--pg", default="postgresql://postgres:postgres@127.0.0.1:5432")
    asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    main()
