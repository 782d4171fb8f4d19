"""Do the sweep, the resync and the claims cost the same with 1,000,000 finished workloads in
the tables as with none? EXPLAIN-checked, side by side.

    .venv/bin/python loadtest/finished_rows_plans.py --finished 1000000

On a scratch database (aicp's migrations applied, dropped afterwards): one project, one pool and
`--live` live workloads (half RUNNING, half QUEUED, each with a live lease of this replica and the
events a real one has). Then, for each named query below (sql/queries.sql) with realistic
parameters, `EXPLAIN (ANALYZE, BUFFERS)` inside a transaction that is rolled back, so the writing
queries change nothing. Then `--finished` finished workloads are added as real ones would be left
behind (SUCCEEDED or FAILED, converged, `--events` events each, and the lease row their last owner
released, expired but kept for its epoch), the tables are analyzed, and every query is explained
again. Prints, per query, the plan's shape (node types and the indexes or tables they read), the
shared buffers it touched and its execution time, before and after.

A query whose buffers grow with the finished rows reads them: it fails the check (the script
exits 1 after printing the table, so a regression is loud).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.store.migrations import discover
from app.store.queries import QUERIES
from loadtest.databases import scratch_database

OWNER, INCARNATION, TTL = "replica-a", "inc-a", 30.0
PROJECT_ID = uuid.UUID("00000000-0000-4000-8000-000000000001")
POOL_ID = uuid.UUID("00000000-0000-4000-8000-000000000002")
SPEC = json.dumps(
    {
        "image": "ghcr.io/acme/train:1.4",
        "command": ["python", "train.py", "--epochs", "3"],
        "accelerators": 1,
        "cpu": "4",
        "memory": "16Gi",
        "env": {"WANDB_PROJECT": "llm-finetune", "SEED": "7"},
    }
)
OBSERVED_DONE = json.dumps(
    {
        "job": {"name": "wl-x", "uid": "6f1c2a9e-0000-4000-8000-000000000000"},
        "attempts": 1,
        "nodes": ["gpu-node-1"],
        "accelerator": "NVIDIA-H100-80GB-HBM3",
        "started_at": "2026-11-30T10:00:00Z",
        "finished_at": "2026-11-30T11:00:00Z",
        "exit_code": 0,
    }
)

SETUP = """
INSERT INTO projects (id, name, created_by, generation, observed_generation, state)
VALUES ($1, 'ml-research', 'admin', 1, 1, 'READY');
INSERT INTO accelerator_bindings (accelerator_class, resource_name, flavor)
VALUES ('h100-80g', 'nvidia.com/gpu', 'h100-80g');
INSERT INTO compute_pools (id, project_id, name, accelerator_class, spec, created_by,
                           generation, observed_generation, state)
VALUES ($2, $1, 'h100-pool', 'h100-80g', '{"quota": {"accelerators": 64}}', 'admin', 1, 1, 'READY');
"""

# Workloads numbered [$1, $2): `$3` state, converged, with their events and lease rows.
# `$5` says whether the lease is live (held by `$9` now) or was released (query lease_release:
# expired, owned by nobody, the row kept for its epoch).
WORKLOADS = """
WITH made AS (
    INSERT INTO workloads (id, project_id, pool_id, name, spec, generation, observed_generation,
                           state, observed, created_by, created_at, updated_at)
    SELECT md5('wl' || n)::uuid, $6, $7, 'wl-' || n, $4::jsonb, 1, 1,
           CASE WHEN $3 = 'finished' THEN (CASE WHEN n % 10 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END)
                ELSE $3 END,
           CASE WHEN $3 = 'finished' THEN $8::jsonb ELSE '{}'::jsonb END,
           'alice', now() - make_interval(secs => ($2 - n)::float8),
           now() - make_interval(secs => ($2 - n)::float8)
    FROM generate_series($1::bigint, $2::bigint - 1) AS n
    RETURNING id, name, created_at
), leased AS (
    INSERT INTO leases (kind, resource_id, owner, epoch, expires_at, incarnation)
    SELECT 'workload', id, CASE WHEN $5 THEN $9 ELSE '' END, 1 + (abs(hashtext(name)) % 3),
           CASE WHEN $5 THEN now() + interval '30 seconds' ELSE created_at + interval '1 hour' END,
           $10
    FROM made
    RETURNING 1
)
INSERT INTO events (project_id, kind, resource_id, resource_name, at, type, reason, generation,
                    actor)
SELECT $6, 'workload', m.id, m.name, m.created_at + make_interval(secs => e.i), e.type, e.reason,
       1, e.actor
FROM made m
CROSS JOIN LATERAL (
    SELECT i, t.type, t.reason, t.actor
    FROM unnest(ARRAY['Accepted', 'JobCreated', 'Admitted', 'Started', $11],
                ARRAY['Created', NULL, NULL, NULL, NULL],
                ARRAY['alice', 'controller', 'controller', 'controller', 'controller'])
         WITH ORDINALITY AS t (type, reason, actor, i)
    WHERE i <= $12
) e
"""


@dataclass(frozen=True)
class Measured:
    shape: str
    buffers: int
    ms: float


def _shape(node: dict[str, Any]) -> list[str]:
    """Node types with the index or table they read, depth first (one plan, one line)."""
    label = node["Node Type"]
    target = node.get("Index Name") or node.get("Relation Name")
    if target and node["Node Type"] not in ("ModifyTable",):
        label += f"({target})"
    elif node["Node Type"] == "ModifyTable":
        label = f"{node.get('Operation', 'Modify')}({node.get('Relation Name', '')})"
    parts = [label]
    for child in node.get("Plans", []):
        parts.extend(_shape(child))
    return parts


def _compact(parts: list[str]) -> str:
    """Drop plumbing nodes (results, appends, limits...) so the shape names what is read."""
    plumbing = {"Result", "Append", "Limit", "LockRows", "Subquery Scan", "CTE Scan", "Sort"}
    kept = [p for p in parts if p.split("(")[0] not in plumbing]
    return ", ".join(kept)


async def explain(conn: asyncpg.Connection, name: str, args: tuple[Any, ...]) -> Measured:
    """EXPLAIN (ANALYZE, BUFFERS) of query `name` in a transaction rolled back afterwards."""
    sql = QUERIES[name]
    tx = conn.transaction()
    await tx.start()
    try:
        raw = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args)
    finally:
        await tx.rollback()
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]
    top = plan["Plan"]
    buffers = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
    return Measured(_compact(_shape(top)), buffers, float(plan["Execution Time"]))


async def live_keys(conn: asyncpg.Connection, count: int) -> list[uuid.UUID]:
    rows = await conn.fetch(
        "SELECT id FROM workloads WHERE state IN ('RUNNING', 'QUEUED') ORDER BY id LIMIT $1", count
    )
    return [r["id"] for r in rows]


async def measure_all(conn: asyncpg.Connection) -> dict[str, Measured]:
    """Every periodic and per-claim query of the reconciler, with this replica's parameters."""
    keys = await live_keys(conn, 50)
    one_new = uuid.uuid4()
    cases: dict[str, tuple[Any, ...]] = {
        # the sweep, every sweep interval, on every replica
        "lease_claim_due": (OWNER, TTL, 100, INCARNATION),
        # the sweep's alarm for the next expiry of a peer's lease, after each sweep
        "lease_next_expiry": (OWNER, INCARNATION),
        # a doorbell batch of 50 keys, and the lease a create takes in its own transaction
        "lease_claim_keys": (["workload"] * len(keys), keys, OWNER, TTL, INCARNATION),
        "lease_take_new": ("workload", one_new, OWNER, TTL, INCARNATION),
        # the resync after a LISTEN gap
        "leases_held_changed": (OWNER, INCARNATION),
        # the lease keeper (every ttl/3) and its cross-check
        "lease_renew_all": (OWNER, TTL, INCARNATION),
        "leases_held_count": (OWNER,),
        # the gauges and the lag metric, every few seconds (the finished count every 5 minutes)
        "reconcile_lag_seconds": (),
        "steps_workload_state_counts": (),
        "steps_workload_finished_counts": (),
        "steps_stuck_deleting_counts": (),
        # the pool's usage, read by every create's capacity check and by GET of the pool
        "pool_by_name": (PROJECT_ID, "h100-pool"),
    }
    return {name: await explain(conn, name, args) for name, args in cases.items()}


async def add_workloads(
    conn: asyncpg.Connection, start: int, stop: int, state: str, live: bool, events: int
) -> None:
    last = "Succeeded" if state == "finished" else "Started"
    batch = 100_000
    for low in range(start, stop, batch):
        await conn.execute(
            WORKLOADS,
            low,
            min(stop, low + batch),
            state,
            SPEC,
            live,
            PROJECT_ID,
            POOL_ID,
            OBSERVED_DONE,
            OWNER,
            INCARNATION,
            last,
            events,
        )


# Queries that read every row by what they promise (not sweep, resync or claim): reported, and
# not a failure.
COUNTS_EVERY_ROW = {
    "steps_workload_finished_counts": "counts the finished rows, by definition (every 5 min)",
}

SIZES = """
SELECT pg_size_pretty(pg_total_relation_size('workloads')) AS w,
       pg_size_pretty(pg_total_relation_size('events')) AS e,
       pg_size_pretty(pg_total_relation_size('leases')) AS l,
       (SELECT count(*) FROM events) AS n_events
"""


def _table(points: list[tuple[int, dict[str, Measured]]]) -> bool:
    """Markdown: plan, buffers and time per query at each size. Flat: from a tenth of the
    finished rows to all of them, the buffers grow by no more than a few pages (a deeper index,
    a fuller leaf), and the plan does not change to one that reads them."""
    sizes = " → ".join(f"{n:,}" for n, _ in points)
    print(
        f"| query | plan (0 finished; later sizes if it changed) | buffers at {sizes} "
        f"| ms at {sizes} | flat |"
    )
    print("|---|---|---|---|---|")
    flat_all = True
    for name in points[0][1]:
        runs = [measured[name] for _, measured in points]
        tenth, full = runs[-2], runs[-1]
        flat = full.buffers <= tenth.buffers * 1.25 + 16
        verdict = "yes" if flat else "**no**"
        if not flat and name in COUNTS_EVERY_ROW:
            verdict = f"no: {COUNTS_EVERY_ROW[name]}"
        else:
            flat_all &= flat
        shapes = [runs[0].shape]
        shapes += [f"*then* {r.shape}" for i, r in enumerate(runs[1:]) if r.shape != runs[i].shape]
        print(
            f"| `{name}` | {'; '.join(shapes)} | {' → '.join(str(r.buffers) for r in runs)} "
            f"| {' → '.join(f'{r.ms:.2f}' for r in runs)} | {verdict} |"
        )
    return flat_all


async def main(args: argparse.Namespace) -> int:
    async with scratch_database(args.admin_url, "aicp_plans") as url:
        conn = await asyncpg.connect(url)
        try:
            for migration in discover(Path(__file__).resolve().parent.parent / "sql/migrations"):
                await conn.execute(migration.sql)
            await conn.execute(SETUP.replace("$1", f"'{PROJECT_ID}'").replace("$2", f"'{POOL_ID}'"))
            half = args.live // 2
            await add_workloads(conn, 0, half, "RUNNING", True, 4)
            await add_workloads(conn, half, args.live, "QUEUED", True, 2)
            points: list[tuple[int, dict[str, Measured]]] = []
            added = 0
            for finished in (0, args.finished // 10, args.finished):
                started = time.perf_counter()
                start = args.live + added
                await add_workloads(
                    conn, start, start + finished - added, "finished", False, args.events
                )
                added = finished
                await conn.execute("VACUUM ANALYZE")
                sizes = await conn.fetchrow(SIZES)
                print(
                    f"{args.live} live + {finished:,} finished workloads, {sizes['n_events']:,} "
                    f"events (workloads {sizes['w']}, events {sizes['e']}, leases {sizes['l']}; "
                    f"filled in {time.perf_counter() - started:.0f} s)",
                    flush=True,
                )
                points.append((finished, await measure_all(conn)))
        finally:
            await conn.close()
    print()
    flat = _table(points)
    print()
    print("every query flat" if flat else "SOME QUERY READS THE FINISHED ROWS")
    return 0 if flat else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--admin-url", default="postgresql://postgres:postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--live", type=int, default=1_000)
    parser.add_argument("--events", type=int, default=5, help="events per finished workload")
    sys.exit(asyncio.run(main(parser.parse_args())))
