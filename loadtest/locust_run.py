"""`make loadtest`: the locust users of `loadtest/locustfile.py`, headless, for a fixed time,
against `python -m app dev` (embedded kubesim; embedded PostgreSQL, or with `--pg` a fresh
database on that server, dropped afterwards) in a throwaway state directory. Writes locust's
CSV and HTML reports under `loadtest/reports/` (ignored by git) and exits non-zero if any
request failed.

    .venv/bin/python loadtest/locust_run.py --seconds 30 --users 20 \
        [--pg postgresql://postgres:postgres@127.0.0.1:5432]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.api_bench import NO_RATE_LIMITS
from loadtest.children import spawn, stop

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "loadtest" / "reports"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _psql(server: str, statement: str) -> None:
    """One statement on the server's `postgres` database (asyncpg, like the service)."""
    import asyncio

    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(f"{server}/postgres")
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run())


@contextlib.contextmanager
def fresh_database(server: str | None) -> Iterator[str | None]:
    """A new database on `server` (dropped at the end), or None for the embedded one."""
    if server is None:
        yield None
        return
    server = server.rstrip("/")
    name = f"aicp_loadtest_{secrets.token_hex(4)}"
    _psql(server, f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}"
    finally:
        _psql(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def dev_service(state: Path, database_url: str | None) -> Iterator[tuple[str, str]]:
    """`python -m app dev` in `state`; yields its base URL and admin token."""
    port = _free_port()
    env = {**os.environ, "AICP_HTTP_PORT": str(port), "AICP_STATE_DIR": str(state)}
    # Every simulated engineer shares one editor token: the per-token rate limits (a tenant
    # policy) would measure that sharing, not the service.
    env.update(NO_RATE_LIMITS)
    env.pop("KUBECONFIG", None)  # always the embedded simulator
    env.pop("DATABASE_URL", None)
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    log = (state / "aicp.log").open("wb")
    proc = spawn([sys.executable, "-m", "app", "dev"], env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not _ready(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (state / "aicp.log").read_text(errors="replace")[-3000:]
                raise SystemExit(f"aicp dev did not become ready:\n{tail}")
            time.sleep(0.2)
        yield url, (state / "admin-token").read_text().strip()
    finally:
        stop(proc, 30)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=30, help="how long the users run")
    parser.add_argument("--users", type=int, default=20, help="concurrent users")
    parser.add_argument("--spawn-rate", type=float, default=10.0, help="users started per second")
    parser.add_argument(
        "--pg", help="PostgreSQL server (URL without a database) for a fresh database"
    )
    parser.add_argument("--reports", type=Path, default=REPORTS, help="where the reports go")
    args = parser.parse_args()
    args.reports.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="aicp-loadtest-") as tmp,
        fresh_database(args.pg) as database_url,
        dev_service(Path(tmp), database_url) as (url, token),
    ):
        prefix = args.reports / "aicp"
        command = [
            str(Path(sys.executable).with_name("locust")),
            "-f",
            str(ROOT / "loadtest" / "locustfile.py"),
            "--headless",
            "--host",
            url,
            "--users",
            str(args.users),
            "--spawn-rate",
            str(args.spawn_rate),
            "--run-time",
            f"{args.seconds}s",
            "--stop-timeout",
            "5",
            "--csv",
            str(prefix),
            "--html",
            str(prefix.with_suffix(".html")),
            "--only-summary",
        ]
        code = subprocess.call(command, env={**os.environ, "AICP_LOADTEST_TOKEN": token})
    stats = (prefix.parent / f"{prefix.name}_stats.csv").read_text().splitlines()
    aggregated = next(line for line in stats if line.startswith(",Aggregated,"))
    if code == 0 and int(aggregated.split(",")[2]) == 0:
        print("locust_run: the users made no request", file=sys.stderr)
        code = 1
    print(f"reports: {prefix}_stats.csv, {prefix}_failures.csv, {prefix.with_suffix('.html')}")
    sys.exit(code)


if __name__ == "__main__":
    main()
