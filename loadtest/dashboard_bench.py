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
   moment - when the UPDATE returned (one clock: the same machine). In segments: when aicp's
   feed read the change and wrote it to each stream (its `aicp.streams.timing` DEBUG lines),
   when each page's EventSource dispatched it (a listener added before the page's own), when
   the row changed; and Chromium's CPU time per change beyond its idle pages'. The pages are
   asked for their timings after the last change (`--ask-pages`: after each one).
4. **Plain clients**: the same number of `/live` streams read by httpx in this process, and
   `--changes` more changes: aicp's fan-out without a browser.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.e2e_stack import ADMIN_TOKEN, DEFAULTS, POOL, PROJECT, REPO, e2e_stack
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

#: Every page, before its own script: when its EventSource dispatches each bench change (this
#: listener is the stream's first, so the moment is before the page's own handler runs).
ON_MESSAGE = """
window.__message = {};
const NativeEventSource = window.EventSource;
window.EventSource = class extends NativeEventSource {
  constructor(...args) {
    super(...args);
    this.addEventListener("MODIFIED", (event) => {
      const found = /Bench change (\\d+)\\./.exec(event.data);
      if (found && !(found[1] in window.__message)) window.__message[found[1]] = Date.now();
    });
  }
};
"""

#: When the page's row shows each bench change's reason (its DOM patched).
OBSERVE = """
(name) => {
  window.__seen = {};
  const row = document.querySelector(`tr[data-name="${name}"]`);
  new MutationObserver(() => {
    const found = /Bench change (\\d+)\\./.exec(row.cells[2].textContent);
    if (found && !(found[1] in window.__seen)) window.__seen[found[1]] = Date.now();
  }).observe(row, { childList: true, subtree: true, characterData: true });
}
"""

#: aicp's `aicp.streams.timing` lines: `change N read|written <epoch seconds>`.
TIMING = re.compile(r"change (\d+) (read|written) ([\d.]+)")
#: A plain client's event of change n.
PLAIN = re.compile(r"^data: .*Plain change (\d+)\.")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def browser_pids() -> list[int]:
    """This process's Chromium processes (Linux `/proc`)."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                comm, fields = (entry / "stat").read_text().rsplit(")", 1)
            except OSError:
                continue
            parents[int(entry.name)] = int(fields.split()[1])
            names[int(entry.name)] = comm.split("(", 1)[1]
    found = []
    for pid in parents:
        ancestor = parents[pid]
        while ancestor > 1 and ancestor != os.getpid():
            ancestor = parents.get(ancestor, 0)
        if ancestor == os.getpid() and names[pid].startswith("chrom"):
            found.append(pid)
    return found


def browser_cpu_seconds() -> float:
    """User + system CPU time used so far by this process's Chromium processes."""
    total = 0.0
    for pid in browser_pids():
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def renice_browser(niceness: int) -> None:
    """Every thread of every Chromium process at `niceness` (the renderers forked later inherit
    it): the browsers yield the cores to aicp, as browsers on their own machines would."""
    for pid in browser_pids():
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError):
                    os.setpriority(os.PRIO_PROCESS, int(task.name), niceness)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def signed_in_page(browser: Any, url: str) -> Any:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    await context.add_init_script(ON_MESSAGE)
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

    async with e2e_stack(
        args.pg, aicp_repo=args.aicp_repo, debug_loggers=("aicp.streams.timing",)
    ) as stack:
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
            if args.browser_nice:
                renice_browser(args.browser_nice)
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
            if args.browser_nice:
                renice_browser(args.browser_nice)
            shown = [
                await each.evaluate("() => [document.visibilityState, document.hasFocus()]")
                for each in pages
            ]
            print(
                f"  pages visible: {sum(v == 'visible' for v, _ in shown)}, focused: "
                f"{sum(bool(f) for _, f in shown)} of {len(pages)}"
            )
            newest = f"bulk-{args.workloads}"
            for each in pages:
                await each.locator(f'tr[data-name="{newest}"]').wait_for()
                await each.evaluate(OBSERVE, newest)
            idle = browser_cpu_seconds()
            await asyncio.sleep(2)
            idle = (browser_cpu_seconds() - idle) / 2
            commits = []
            browser_cpu, aicp_cpu = browser_cpu_seconds(), stack.cpu_seconds(stack.aicp_pid)
            started = time.monotonic()
            for n in range(args.changes):
                commits.append(await change(conn, newest, n, "Bench"))
                if args.ask_pages:
                    for each in pages:
                        await each.wait_for_function("(n) => window.__seen[n]", arg=n)
                await asyncio.sleep(args.interval)
            elapsed = time.monotonic() - started
            browser_cpu = browser_cpu_seconds() - browser_cpu - idle * elapsed
            aicp_cpu = stack.cpu_seconds(stack.aicp_pid) - aicp_cpu
            for each in pages:  # every page saw every change
                await each.wait_for_function(f"() => Object.keys(window.__seen).length >= {n + 1}")
            messages: list[float] = []
            patched: list[float] = []
            handling: list[float] = []
            for each in pages:
                seen = await each.evaluate("() => [window.__message, window.__seen]")
                for n, (_, committed) in enumerate(commits):
                    message, dom = seen[0][str(n)], seen[1][str(n)]
                    messages.append(message - committed)
                    patched.append(dom - committed)
                    handling.append(dom - message)
            print(
                f"state change -> {args.dashboards} dashboards ({args.changes} changes): "
                f"Chromium {browser_cpu * 1000 / args.changes:.0f} ms CPU a change beyond its "
                f"idle {idle * 1000:.0f} ms/s, aicp "
                f"{aicp_cpu * 1000 / args.changes:.0f} ms CPU a change"
            )
            server_segments(aicp_log(stack), commits, args.dashboards)
            show("commit -> the page's EventSource dispatches the event", messages)
            show("the event dispatched -> the row patched (the page's own work)", handling)
            show("commit -> every dashboard's DOM (the figure)", patched)
            for each in pages:
                await each.context.close()
            await browser.close()

        await plain_clients(stack, conn, newest, args)
        await conn.close()


async def change(conn: Any, name: str, n: int, label: str) -> tuple[int, float]:
    """One state change of workload `name`, committed (autocommit): its change number and the
    wall-clock time (ms) the UPDATE returned."""
    number = await conn.fetchval(
        "UPDATE workloads SET state = $2, state_reason = $3, updated_at = now() "
        "WHERE project_id = (SELECT id FROM projects WHERE name = $4) AND name = $1 "
        "RETURNING change_id",
        name,
        "FAILED" if n % 2 else "SUCCEEDED",
        f"{label} change {n}.",
        PROJECT,
    )
    return int(number), time.time() * 1000


def aicp_log(stack: Any) -> list[str]:
    return (stack.log_dir / "aicp.log").read_text(errors="replace").splitlines()


def server_segments(log: list[str], commits: list[tuple[int, float]], streams: int) -> None:
    """aicp's side, from its `aicp.streams.timing` lines: when the feed read each change, and
    when each stream's connection was written the chunk that carries it."""
    read: dict[int, float] = {}
    written: dict[int, list[float]] = {}
    for line in log:
        if found := TIMING.search(line):
            number, what, at = int(found[1]), found[2], float(found[3]) * 1000
            if what == "read":
                read[number] = at
            else:
                written.setdefault(number, []).append(at)
    if not read:
        print("  (aicp logs no stream timings: an older checkout's)")
        return
    woken = [read[number] - committed for number, committed in commits]
    fanned = [at - read[number] for number, _ in commits for at in written.get(number, [])]
    wrote = [at - committed for number, committed in commits for at in written.get(number, [])]
    counts = {len(written.get(number, [])) for number, _ in commits}
    show("commit -> the change feed has it (NOTIFY, one read)", woken)
    show(f"feed has it -> written to each of the streams ({sorted(counts)} a change)", fanned)
    show("commit -> written to each stream", wrote)
    if counts != {streams}:
        print(f"  (expected {streams} writes a change)")


async def plain_clients(stack: Any, conn: Any, name: str, args: argparse.Namespace) -> None:
    """The same streams without a browser: `--dashboards` httpx clients of `/live`."""
    headers = stack.headers
    async with httpx.AsyncClient(base_url=stack.aicp_url, headers=headers, timeout=60) as client:
        after = (await client.get(f"/projects/{PROJECT}/position")).json()["after"]
        received: list[dict[int, float]] = [{} for _ in range(args.dashboards)]
        opened = [asyncio.Event() for _ in range(args.dashboards)]
        arrived = asyncio.Condition()

        async def read(index: int) -> None:
            url = f"/projects/{PROJECT}/live?after={after}"
            async with client.stream("GET", url) as answer:
                opened[index].set()
                async for line in answer.aiter_lines():
                    if found := PLAIN.search(line):
                        received[index].setdefault(int(found[1]), time.time() * 1000)
                        async with arrived:
                            arrived.notify_all()

        readers = [asyncio.create_task(read(i)) for i in range(args.dashboards)]
        for event in opened:
            await asyncio.wait_for(event.wait(), 60)
        await asyncio.sleep(1)
        log_from = len(aicp_log(stack))
        commits = []
        for n in range(args.changes):
            commits.append(await change(conn, name, n, "Plain"))
            async with arrived:
                await asyncio.wait_for(
                    arrived.wait_for(lambda n=n: all(n in each for each in received)), 30
                )
            await asyncio.sleep(args.interval)
        for reader in readers:
            reader.cancel()
        latencies = [
            each[n] - committed for each in received for n, (_, committed) in enumerate(commits)
        ]
    print(f"the same, {args.dashboards} plain SSE clients (httpx, one process, no browser):")
    server_segments(aicp_log(stack)[log_from:], commits, args.dashboards)
    show("commit -> each client has the event", latencies)


def show(what: str, values: list[float]) -> None:
    print(
        f"  {what}: p50 {statistics.median(values):.0f} ms, p99 {pct(values, 0.99):.0f} ms, "
        f"max {max(values):.0f} ms ({len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default="postgresql://postgres:postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--workloads", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--renders", type=int, default=10)
    parser.add_argument("--dashboards", type=int, default=50)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.3)
    parser.add_argument(
        "--browser-nice",
        type=int,
        default=0,
        help="run Chromium at this niceness (e.g. 19), as if the pages were on other machines",
    )
    parser.add_argument(
        "--aicp-repo",
        type=Path,
        default=REPO,
        help="run aicp (and its dashboard) from this checkout, e.g. an older commit's",
    )
    parser.add_argument(
        "--ask-pages",
        action="store_true",
        help="ask every page whether it shows a change before the next (the browser then "
        "answers 50 DevTools calls during each change: slower figures)",
    )
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
