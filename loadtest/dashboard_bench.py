"""The web dashboard at scale, in a real browser (Debian's Chromium through Playwright).

    .venv/bin/python loadtest/dashboard_bench.py --workloads 100000 --dashboards 50 --changes 20

Starts kubesim and `python -m app serve` on a scratch database (`loadtest/e2e_stack.py`;
`--pg` is the server to make it on), sets up project `bench` with one pool through the API,
submits one workload and waits until it SUCCEEDED, then copies that row `--workloads` times
with one `INSERT ... SELECT ... FROM generate_series` straight into the store (finished and
observed: the reconciler leaves them alone; the change-log triggers run as for any insert).
Then:

1. **First page, server**: `--requests` sequential `GET /api/v1/projects/bench/workloads`
   (the first page the dashboard reads, 50 rows) with the admin token: p50/p99 in ms.
2. **First page, browser**: `--renders` times, a signed-in page opens `/projects/bench`; the
   time from navigation start (`performance.now()`) until the table holds its 50 rows.
3. **Live**: `--dashboards` signed-in pages on the project view (one browser, each page in its
   own context). aicp's RSS before and after they opened, over their number, is the server
   memory per open dashboard. Then `--changes` times, one UPDATE of the state and reason of the
   newest workload (the first row of every table), committed in autocommit; every page's
   MutationObserver notes when its row shows the new reason (`Date.now()`); latency = that
   moment - when the UPDATE returned (one clock: the same machine).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.e2e_stack import ADMIN_TOKEN, DEFAULTS, POOL, PROJECT, e2e_stack
from tests.support.browser import CHROMIUM
from tests.support.scenario import Scenario

COPIES = """
INSERT INTO workloads (id, project_id, pool_id, name, spec, generation, observed_generation,
                       state, state_reason, observed, created_by, created_at, updated_at)
SELECT gen_random_uuid(), w.project_id, w.pool_id, 'bulk-' || n, w.spec, 1, 1, w.state,
       w.state_reason, w.observed, w.created_by,
       w.created_at - make_interval(secs => ($2 - n + 1)::float8),
       w.updated_at - make_interval(secs => ($2 - n + 1)::float8)
FROM workloads w, generate_series(1, $2::int) AS n
WHERE w.name = $1
"""

OBSERVE = """
(name) => {
  window.__seen = {};
  const row = document.querySelector(`tr[data-name="${name}"]`);
  new MutationObserver(() => {
    const reason = row.cells[2].textContent;
    if (!(reason in window.__seen)) window.__seen[reason] = Date.now();
  }).observe(row, { childList: true, subtree: true, characterData: true });
}
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def signed_in_page(browser: Any, url: str) -> Any:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    page = await context.new_page()
    page.set_default_timeout(120_000)
    await page.goto(f"{url}/sign-in")
    await page.get_by_label("API token").fill(ADMIN_TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(lambda address: "/sign-in" not in address)
    return page


async def rows_rendered_ms(page: Any, url: str) -> float:
    await page.goto(f"{url}/projects/{PROJECT}")
    handle = await page.wait_for_function(
        "() => document.querySelectorAll('#workloads tbody tr').length >= 50 && performance.now()",
        polling="raf",
    )
    return float(await handle.json_value())


async def bench(args: argparse.Namespace) -> None:
    from playwright.async_api import async_playwright

    async with e2e_stack(args.pg) as stack:
        async with httpx.AsyncClient(
            base_url=stack.aicp_url, headers=stack.headers, timeout=60
        ) as client:
            scenario = Scenario(client, project=PROJECT, pool=POOL, defaults=DEFAULTS)
            await scenario.setup_pool(accelerators=16)
            await scenario.submit("seed")
            await scenario.wait_state("seed", "SUCCEEDED", timeout=60)
            conn = await asyncpg.connect(stack.database_url)
            started = time.perf_counter()
            await conn.execute(COPIES, "seed", args.workloads)
            await conn.execute("ANALYZE workloads")
            inserted = time.perf_counter() - started
            print(f"inserted {args.workloads} workloads in {inserted:.1f} s")

            first_page = []
            for _ in range(args.requests):
                t0 = time.perf_counter()
                answer = await client.get(f"/api/v1/projects/{PROJECT}/workloads?limit=50")
                first_page.append((time.perf_counter() - t0) * 1000)
                assert answer.status_code == 200 and len(answer.json()["items"]) == 50
            print(
                f"first page (API, 50 rows of {args.workloads}): p50 "
                f"{statistics.median(first_page):.1f} ms, p99 {pct(first_page, 0.99):.1f} ms "
                f"({args.requests} requests)"
            )

        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
            )
            page = await signed_in_page(browser, stack.aicp_url)
            renders = [await rows_rendered_ms(page, stack.aicp_url) for _ in range(args.renders)]
            print(
                f"first page (browser, navigation to 50 rows shown): p50 "
                f"{statistics.median(renders):.0f} ms, max {max(renders):.0f} ms "
                f"({args.renders} loads)"
            )
            await page.context.close()

            before = rss_mib(stack.aicp_pid)
            pages = []
            for _ in range(args.dashboards):
                opened = await signed_in_page(browser, stack.aicp_url)
                await opened.goto(f"{stack.aicp_url}/projects/{PROJECT}")
                pages.append(opened)
            for each in pages:
                await each.locator("#live-status").filter(has_text="Live").wait_for()
            await asyncio.sleep(2)
            after = rss_mib(stack.aicp_pid)
            print(
                f"{args.dashboards} dashboards open: aicp RSS {before:.0f} -> {after:.0f} MiB, "
                f"{(after - before) * 1024 / args.dashboards:.0f} KiB per dashboard"
            )
            newest = f"bulk-{args.workloads}"
            for each in pages:
                await each.locator(f'tr[data-name="{newest}"]').wait_for()
                await each.evaluate(OBSERVE, newest)
            latencies: list[float] = []
            for n in range(args.changes):
                reason = f"Bench change {n}."
                await conn.execute(
                    "UPDATE workloads SET state = $2, state_reason = $3, updated_at = now() "
                    "WHERE project_id = (SELECT id FROM projects WHERE name = $4) "
                    "AND name = $1",
                    newest,
                    "FAILED" if n % 2 else "SUCCEEDED",
                    reason,
                    PROJECT,
                )
                committed = time.time() * 1000
                for each in pages:
                    seen = await each.wait_for_function(
                        "(reason) => window.__seen[reason]", arg=reason
                    )
                    latencies.append(float(await seen.json_value()) - committed)
                await asyncio.sleep(args.interval)
            print(
                f"state change -> every dashboard's DOM ({args.dashboards} pages x "
                f"{args.changes} changes): p50 {statistics.median(latencies):.0f} ms, p99 "
                f"{pct(latencies, 0.99):.0f} ms, max {max(latencies):.0f} ms"
            )
            await browser.close()
            await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default="postgresql://postgres:postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--workloads", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--renders", type=int, default=10)
    parser.add_argument("--dashboards", type=int, default=50)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.3)
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
