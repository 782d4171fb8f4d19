"""Hostile HTTP clients against `python -m app serve`: does the replica keep its lease cadence?

    .venv/bin/python loadtest/http_abuse.py                      # this checkout
    .venv/bin/python loadtest/http_abuse.py --aicp-repo DIR      # another checkout's aicp

Runs kubesim and aicp as separate processes (`e2e_stack.py`), makes a project and a pool (so
the replica holds leases), then runs each attack of `ATTACKS` in turn from threads of this
process. During each it watches the lease rows (`lease_cadence.py`: the widest gap between two
renewals, every `ttl / 3` = 5 s when healthy) and times `GET /readyz` every 100 ms, and prints
those with what the attacker noticed: the status answered, and when the connection was closed.
An attack is given `--seconds` (15) at most; what is still open then is counted as such.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest import http_attacks
from loadtest.e2e_stack import ADMIN_TOKEN, REPO, e2e_stack, scenario
from loadtest.http_attacks import Address, Outcome, SwarmOutcome
from loadtest.lease_cadence import Cadence, Readiness, watch_cadence, watch_readiness

LEASE_TTL = 15.0

Attack = Callable[[Address, float], Outcome | SwarmOutcome]

ATTACKS: dict[str, Attack] = {
    "128 MiB header": lambda a, s: http_attacks.huge_header(a, 128 << 20, deadline=max(s, 60)),
    "50,000 header fields": lambda a, s: http_attacks.many_headers(a, 50_000),
    "128 MiB request line": lambda a, s: http_attacks.long_request_line(
        a, 128 << 20, deadline=max(s, 60)
    ),
    "300 slowloris heads (1 B/s)": lambda a, s: http_attacks.swarm(
        a, 300, s, opening=b"GET /readyz HTTP/1.1\r\n", dribble=b"X", pause=1.0
    ),
    # the body timeout is 30 s: this one runs 40 s at least
    "200 dribbled bodies (1 B/s)": lambda a, s: http_attacks.swarm(
        a,
        200,
        max(s, 40),
        opening=(
            "POST /api/v1/projects HTTP/1.1\r\nHost: aicp\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Length: 100000\r\n\r\n"
        ).encode(),
        dribble=b" ",
        pause=1.0,
    ),
    "800 silent connections": lambda a, s: http_attacks.swarm(a, 800, s),
    "1,200 keep-alive connections (cap 1,000)": lambda a, s: http_attacks.swarm(
        a, 1200, s, opening=b"GET /healthz HTTP/1.1\r\nHost: aicp\r\n\r\n"
    ),
    "20 x 1,000 pipelined requests": lambda a, s: _pipelined(a, 20, 1000),
}


def _pipelined(address: Address, connections: int, each: int) -> SwarmOutcome:
    from concurrent.futures import ThreadPoolExecutor

    started = time.monotonic()
    with ThreadPoolExecutor(connections) as pool:
        outcomes = list(
            pool.map(lambda _: http_attacks.pipelined(address, each), range(connections))
        )
    statuses: dict[int | None, int] = {}
    for outcome in outcomes:
        for status in outcome.statuses():
            statuses[status] = statuses.get(status, 0) + 1
    return SwarmOutcome(statuses, [time.monotonic() - started], 0)


def noticed(outcome: Outcome | SwarmOutcome) -> str:
    if isinstance(outcome, Outcome):
        closed = (
            "open at the end"
            if outcome.closed_after is None
            else f"closed after {outcome.closed_after:.1f} s"
        )
        return f"status {outcome.status}, {closed}"
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(outcome.statuses.items(), key=str))
    worst = outcome.worst_close
    closed = (
        f"{len(outcome.closed_after)} closed (last after {worst:.1f} s)" if worst else "none closed"
    )
    return f"statuses {{{statuses}}}, {closed}, {outcome.still_open} open at the end"


async def one_more_renewal(cadence: Cadence, timeout: float) -> None:
    seen = len(cadence.renewals)
    deadline = time.monotonic() + timeout
    while len(cadence.renewals) <= seen and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


def readyz(readiness: Readiness) -> str:
    if not readiness.latencies:
        return "no answer"
    median = statistics.median(readiness.latencies) * 1000
    return (
        f"/readyz median {median:.0f} ms, worst {readiness.worst * 1000:.0f} ms, "
        f"{readiness.failures} failed"
    )


async def main(args: argparse.Namespace) -> None:
    env = {
        "AICP_LEASE_TTL_SECONDS": str(LEASE_TTL),
        "AICP_HTTP_MAX_CONNECTIONS": str(args.max_connections),
    }
    selected = [name for name in ATTACKS if not args.only or any(o in name for o in args.only)]
    async with e2e_stack(args.admin_url, aicp_repo=args.aicp_repo, **env) as stack:
        async with httpx.AsyncClient(base_url=stack.aicp_url, headers=stack.headers) as client:
            await scenario(client).setup_pool()
        host, port = stack.aicp_url.removeprefix("http://").rsplit(":", 1)
        address = (host, int(port))
        async with (
            watch_cadence(stack.database_url, "bench", LEASE_TTL) as cadence,
            watch_readiness(stack.aicp_url) as readiness,
        ):
            await one_more_renewal(cadence, LEASE_TTL)
            print(f"aicp from {args.aicp_repo}; renewals every {LEASE_TTL / 3:g} s", flush=True)
            for name in selected:
                cadence.reset()
                readiness.reset()
                started = time.monotonic()
                outcome = await asyncio.to_thread(ATTACKS[name], address, args.seconds)
                took = time.monotonic() - started
                await one_more_renewal(cadence, LEASE_TTL * 2)
                print(
                    f"{name:<42} {took:5.1f} s | worst renewal gap {cadence.worst_gap:5.1f} s, "
                    f"{cadence.lapsed} polls with no live lease | {readyz(readiness)} | "
                    f"attacker: {noticed(outcome)}",
                    flush=True,
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--admin-url", default="postgresql://postgres:postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--aicp-repo", type=Path, default=REPO, help="the checkout to run")
    parser.add_argument("--seconds", type=float, default=15.0, help="an attack's duration")
    parser.add_argument("--max-connections", type=int, default=1000)
    parser.add_argument("--only", nargs="*", help="attacks whose name contains one of these")
    asyncio.run(main(parser.parse_args()))
