"""Every benchmark runs end to end at a tiny scale and prints its table, so none of them rots.

No timing is asserted (the numbers are only meaningful on a quiet machine, see
docs/BENCHMARKS.md); what is asserted is what a person running the benchmark relies on: it
starts its services, every request it makes is answered as the API promises (each script fails
otherwise), and it prints its results in the documented shape.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _server(pg_server_url: str) -> str:
    """The server part of the test database URL (the scripts make their own databases)."""
    if "?" in pg_server_url:
        pytest.skip("the benchmarks need PostgreSQL over TCP (AICP_TEST_DATABASE_URL)")
    return pg_server_url.rsplit("/", 1)[0]


def _run(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, f"{argv[0]} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout


def test_side_by_side_prints_the_ratio_table(pg_server_url: str) -> None:
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed (apt-get install wrk; .ci/run installs it)")
    out = _run(
        "loadtest/side_by_side.py",
        "--seconds",
        "1",
        "--seeded",
        "5",
        "--pg",
        _server(pg_server_url),
    )
    assert "| request | aicp | comparison stack | ratio |" in out
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    assert [row.split("|")[1].strip() for row in rows] == [
        "`GET .../workloads/{name}`",
        "`POST .../workloads`",
    ]
    assert all(row.rstrip(" |").endswith("x") for row in rows)


def test_latency_benchmark_at_a_fixed_rate_prints_percentiles(pg_server_url: str) -> None:
    out = _run(
        "loadtest/reconcile_latency.py",
        "--admin-url",
        pg_server_url,
        "--rate",
        "5",
        "--seconds",
        "1",
        "--observed",
        "1",
    )
    for title in ("POST 202 -> Job ADDED (5/s)", "pod Succeeded -> API SUCCEEDED"):
        line = next((line for line in out.splitlines() if line.startswith(title)), None)
        assert line is not None, out
        assert "p50=" in line and "p99=" in line
    assert "submitted 5 in" in out


def test_locust_load_test_runs_headless_and_writes_reports(
    pg_server_url: str, tmp_path: Path
) -> None:
    out = _run(
        "loadtest/locust_run.py",
        "--seconds",
        "8",
        "--users",
        "4",
        "--pg",
        _server(pg_server_url),
        "--reports",
        str(tmp_path),
    )
    assert "reports:" in out
    stats = (tmp_path / "aicp_stats.csv").read_text()
    assert "POST workloads" in stats
    assert "Aggregated" in stats
    assert (tmp_path / "aicp.html").stat().st_size > 0


def test_finished_rows_plans_prints_each_periodic_query_at_each_size(pg_server_url: str) -> None:
    # Whether a plan stays flat is the script's own verdict at full size; here only that it
    # fills its tables, explains every query and prints the table.
    done = subprocess.run(
        [
            sys.executable,
            "loadtest/finished_rows_plans.py",
            "--admin-url",
            pg_server_url,
            "--finished",
            "2000",
            "--live",
            "20",
            "--events",
            "2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode in (0, 1), done.stderr[-4000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| `")]
    assert [row.split("|")[1].strip(" `") for row in rows] == [
        "lease_claim_due",
        "lease_next_expiry",
        "lease_claim_keys",
        "lease_take_new",
        "leases_held_changed",
        "lease_renew_all",
        "leases_held_count",
        "reconcile_lag_seconds",
        "steps_workload_state_counts",
        "steps_workload_finished_counts",
        "steps_stuck_deleting_counts",
        "pool_by_name",
    ]
    assert "20 live + 2,000 finished workloads" in done.stdout


def test_live_workloads_rss_brings_every_workload_live_and_prints_memory(
    pg_server_url: str,
) -> None:
    out = _run(
        "loadtest/live_workloads_rss.py",
        "--admin-url",
        pg_server_url,
        "--workloads",
        "12",
        "--quota",
        "2",
        "--settle",
        "0.5",
    )
    assert "all live after" in out and "RUNNING 2, QUEUED 10" in out
    memory = [line for line in out.splitlines() if "aicp RSS" in line]
    assert len(memory) == 4
    assert all(" MB (peak " in line for line in memory)


def test_stream_benchmark_delivers_every_change_to_every_watcher(pg_server_url: str) -> None:
    out = _run(
        "loadtest/stream_bench.py", "--pg", pg_server_url, "--watchers", "5", "--changes", "3"
    )
    line = next((line for line in out.splitlines() if "commit -> event" in line), None)
    assert line is not None, out
    assert "p99" in line and "(15 deliveries, 0 missing)" in line
    assert "per idle stream" in out


def test_the_tenant_attack_prints_each_ceiling_holding(pg_server_url: str) -> None:
    out = _run(
        "loadtest/tenant_attack.py",
        "--pg",
        pg_server_url,
        "--burst",
        "6",
        "--token-cap",
        "3",
        "--depth",
        "3",
    )
    assert "quota unlimited 6 pool creates at once: 6 accepted holding 300003" in out
    # Alternating 100,000 and 1: only the three 1-accelerator pools fit under 16.
    assert "quota limited   6 pool creates at once: 3 accepted holding 3 accelerators" in out
    assert "3 created, 3 refused (409)" in out
    assert "0 of 3 still authenticate" in out


def test_planning_accuracy_scores_a_tiny_trace(pg_server_url: str) -> None:
    out = _run(
        "loadtest/planning_accuracy.py",
        "--seeds",
        "3",
        "--workloads",
        "4",
        "--median-seconds",
        "1",
        "--pg",
        _server(pg_server_url),
    )
    assert out.rstrip().splitlines()[-1].startswith("seed 3: inside the band ")


def test_standing_read_bench_times_gets_of_a_queued_workload(pg_server_url: str) -> None:
    out = _run(
        "loadtest/standing_read_bench.py",
        "--live",
        "12",
        "--requests",
        "5",
        "--pg",
        _server(pg_server_url),
    )
    assert "GET of a queued workload (position " in out.rstrip().splitlines()[-1]
