"""How good the start estimates of queued workloads are: a seeded synthetic trace replayed on
kubesim through aicp, scored by aicp itself (docs/PLANNING.md, docs/BENCHMARKS.md "Planning
accuracy").

    .venv/bin/python loadtest/planning_accuracy.py --seeds 7,8,9 --workloads 30

Runs kubesim and `python -m app serve` as separate processes (`e2e_stack.py`), one pool of
`--gpus` accelerators, and then the trace (all drawn from `random.Random(seed)`):

- three kinds of workload, each its own name stem: `train` (lognormal duration, median
  `--median-seconds` x 2, sigma 0.3; 4 GPUs), `eval` (median x 0.5, sigma 0.3; 1 GPU) and
  `sweep` (median x 1, sigma 0.5; 2 GPUs), picked with weights 2:3:3;
- first a warm-up of 3 of each kind, one after another, so every stem has history;
- then `--workloads` arrivals, Poisson with mean gap `--gap-seconds`, at normal priority
  (one in ten `high`, which preempts).

Each workload runs its drawn duration (`KUBESIM_RUN_SECONDS`). Once all have finished, the
pool's `GET .../forecast-accuracy` gives what aicp measured: scored estimates, the share of
admissions inside the band shown (earliest to latest), the median absolute error of p50, the
median band width and the p90 wait. The goal: at least 80 % inside a band no wider than the p90
wait.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.e2e_stack import POOL, e2e_stack, scenario

#: kind → (duration factor of the median, lognormal sigma, GPUs per workload, weight)
KINDS: dict[str, tuple[float, float, int, int]] = {
    "train": (2.0, 0.3, 4, 2),
    "eval": (0.5, 0.3, 1, 3),
    "sweep": (1.0, 0.5, 2, 3),
}


def trace(seed: int, count: int, median: float, gap: float) -> list[dict[str, Any]]:
    """The arrivals: offset (s), name, kind, GPUs, duration (s), priority."""
    rng = random.Random(seed)
    kinds = list(KINDS)
    weights = [KINDS[k][3] for k in kinds]
    at, items = 0.0, []
    for index in range(count):
        kind = rng.choices(kinds, weights)[0]
        factor, sigma, gpus, _ = KINDS[kind]
        seconds = round(median * factor * math.exp(rng.gauss(0, sigma)), 1)
        priority = "high" if rng.random() < 0.1 else "normal"
        items.append(
            {
                "at": at,
                "name": f"{kind}-{index:03d}",
                "kind": kind,
                "gpus": gpus,
                "seconds": max(seconds, 1.0),
                "priority": priority,
            }
        )
        at += rng.expovariate(1 / gap)
    return items


async def _misses(database_url: str, dump: Path | None = None) -> dict[str, Any]:
    """Where the admissions outside the band fell: before it (early) or after it (late), and
    the scores of each workload's first estimate alone; `dump`: write every scored estimate
    there (JSON lines), to profile the misses."""
    conn = await asyncpg.connect(database_url)
    try:
        if dump is not None:
            rows = await conn.fetch(
                """
                SELECT w.name, w.spec->>'priority' AS priority, f.generation, f.position,
                       extract(epoch FROM f.made_at) AS made_at,
                       extract(epoch FROM f.earliest) AS earliest,
                       extract(epoch FROM f.likely) AS likely,
                       extract(epoch FROM f.latest) AS latest,
                       extract(epoch FROM f.replay_earliest) AS replay_earliest,
                       extract(epoch FROM f.replay_likely) AS replay_likely,
                       extract(epoch FROM f.replay_latest) AS replay_latest,
                       extract(epoch FROM f.started_at) AS started_at, f.basis
                FROM workload_forecasts f JOIN workloads w ON w.id = f.workload_id
                ORDER BY f.made_at
                """
            )
            with dump.open("w") as out:
                for one in rows:
                    out.write(json.dumps({k: _plain(v) for k, v in dict(one).items()}) + "\n")
        row = await conn.fetchrow(
            """
            SELECT avg((started_at + interval '1 second' < earliest)::int) AS early,
                   avg((started_at > latest)::int) AS late,
                   percentile_cont(0.5) WITHIN GROUP (
                       ORDER BY extract(epoch FROM started_at - likely)) AS median_error
            FROM workload_forecasts WHERE started_at IS NOT NULL AND likely IS NOT NULL
            """
        )
        first = await conn.fetchrow(
            """
            SELECT count(*) AS samples,
                   avg((started_at + interval '1 second' >= earliest
                        AND started_at <= latest)::int) AS inside_band
            FROM (SELECT DISTINCT ON (workload_id) * FROM workload_forecasts
                  WHERE started_at IS NOT NULL AND likely IS NOT NULL
                  ORDER BY workload_id, made_at) f
            """
        )
        calibrated = await conn.fetchrow(
            """
            SELECT count(*) AS samples,
                   avg((started_at + interval '1 second' >= earliest
                        AND started_at <= latest)::int) AS inside_band,
                   percentile_cont(0.5) WITHIN GROUP (
                       ORDER BY extract(epoch FROM latest - earliest)) AS median_band
            FROM workload_forecasts
            WHERE started_at IS NOT NULL AND likely IS NOT NULL AND basis LIKE '%calibrated%'
            """
        )
    finally:
        await conn.close()
    assert row is not None and first is not None and calibrated is not None
    return {
        "outside_early": float(row["early"] or 0),
        "outside_late": float(row["late"] or 0),
        "median_signed_error_seconds": float(row["median_error"] or 0),
        "first_estimates": int(first["samples"]),
        "first_estimates_inside_band": float(first["inside_band"] or 0),
        "calibrated_estimates": int(calibrated["samples"]),
        "calibrated_inside_band": float(calibrated["inside_band"] or 0),
        "calibrated_median_band_seconds": float(calibrated["median_band"] or 0),
    }


def _plain(value: Any) -> Any:
    return (
        float(value) if hasattr(value, "as_integer_ratio") and not isinstance(value, int) else value
    )


async def run(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    items = trace(seed, args.workloads, args.median_seconds, args.gap_seconds)
    async with (
        e2e_stack(args.pg) as stack,
        httpx.AsyncClient(base_url=stack.aicp_url, headers=stack.headers, timeout=30) as client,
    ):
        bench = scenario(client)
        await bench.setup_pool(quota={"accelerators": args.gpus, "cpu": "64", "memory": "512Gi"})
        rng = random.Random(seed + 1)
        for kind, (factor, sigma, gpus, _) in KINDS.items():
            for index in range(3):
                seconds = max(
                    round(args.median_seconds * factor * math.exp(rng.gauss(0, sigma)), 1), 1.0
                )
                name = f"{kind}-w{index}"
                await bench.submit(
                    name, accelerators=gpus, env={"KUBESIM_RUN_SECONDS": str(seconds)}
                )
                await bench.wait_state(name, "SUCCEEDED", timeout=120)
        started = time.monotonic()
        for item in items:
            delay = started + item["at"] - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await bench.submit(
                item["name"],
                accelerators=item["gpus"],
                priority=item["priority"],
                env={"KUBESIM_RUN_SECONDS": str(item["seconds"])},
            )
        for item in items:
            await bench.wait_state(item["name"], "SUCCEEDED", timeout=900)
        elapsed = time.monotonic() - started
        found = await client.get(f"{bench.pools}/{POOL}/forecast-accuracy")
        found.raise_for_status()
        accuracy: dict[str, Any] = found.json()
        dump = args.dump.with_suffix(f".{seed}.jsonl") if args.dump else None
        accuracy.update(await _misses(stack.database_url, dump))
    return {
        "seed": seed,
        "workloads": len(items),
        "gpus": args.gpus,
        "median_seconds": args.median_seconds,
        "gap_seconds": args.gap_seconds,
        "trace_seconds": round(elapsed, 1),
        **accuracy,
    }


def _line(result: dict[str, Any]) -> str:
    inside, band, wait = (
        result.get("inside_band"),
        result.get("median_band_seconds"),
        result.get("p90_wait_seconds"),
    )
    if inside is None or band is None or wait is None:
        return f"seed {result['seed']}: no scored estimate"
    return (
        f"seed {result['seed']}: inside the band {inside:.0%} of {result['samples']} scored "
        f"estimates ({result['calibrated_inside_band']:.0%} of the "
        f"{result['calibrated_estimates']} calibrated ones); median band {band:.1f} s vs p90 "
        f"wait {wait:.1f} s; median |error| {result['median_absolute_error_seconds']:.1f} s; "
        f"outside early {result['outside_early']:.0%} / late {result['outside_late']:.0%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default="postgresql://postgres:postgres@127.0.0.1:5432/postgres")
    parser.add_argument(
        "--seeds", default="7,8,9", help="comma-separated: one trace (and stack) per seed"
    )
    parser.add_argument("--workloads", type=int, default=40)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--median-seconds", type=float, default=6.0)
    parser.add_argument("--gap-seconds", type=float, default=1.5)
    parser.add_argument(
        "--dump", type=Path, help="write every scored estimate to DUMP.<seed>.jsonl (JSON lines)"
    )
    args = parser.parse_args()
    results = [asyncio.run(run(args, int(seed))) for seed in args.seeds.split(",")]
    print(json.dumps(results, indent=1))
    for result in results:
        print(_line(result))


if __name__ == "__main__":
    main()
