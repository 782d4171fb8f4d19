"""Where a server's time goes, from py-spy's collapsed stacks (`side_by_side.py --profile DIR`).

    .venv/bin/python loadtest/profile_summary.py DIR/aicp-get.txt [DIR/aicp-post.txt ...]

py-spy (without `--idle`, as side_by_side.py runs it) records a sample only while a thread is
running, so the shares are of the time the server's process was busy, not of wall time. Each
sample goes to the first category, in the order below, that any frame of its stack belongs to:
asyncpg time inside authentication counts as authentication, any request stack not in a more
specific category counts as the framework's. Prints, per file, each category's share, then the
functions that were on top of the stack most often (self time).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# (category, pattern on one frame "function (file:line)"): the first category that matches wins.
CATEGORIES: list[tuple[str, re.Pattern[str]]] = [
    ("idle: event loop waiting (select/epoll)", re.compile(r"\bselect \(selectors\.py|epoll")),
    (
        "reconciler (steps, engine, informers, Kubernetes client)",
        re.compile(r"\(app/(?:reconcile|kube)/|kubernetes_asyncio/|aiohttp/"),
    ),
    (
        "authentication (token lookup)",
        re.compile(
            r"/api/auth\.py|/store/tokens\.py|"
            r"authenticate|token_cache"
        ),
    ),
    ("asyncpg (queries, pool, protocol)", re.compile(r"asyncpg/")),
    ("SQLAlchemy (ORM, engine, greenlet bridge)", re.compile(r"sqlalchemy/|greenlet")),
    (
        "logging and metrics",
        re.compile(r"logging/|structlog/|prometheus_client/|/observability/"),
    ),
    (
        "msgspec / pydantic (decode, validate, encode)",
        re.compile(r"msgspec|pydantic|/domain/validation|/api/bodies"),
    ),
    (
        "Litestar / FastAPI (routing, middleware, DI)",
        re.compile(r"litestar/|fastapi/|starlette/|\(app/api/"),
    ),
    ("uvicorn / httptools (HTTP)", re.compile(r"uvicorn/|httptools|h11")),
    ("asyncio (tasks, timeouts, scheduling)", re.compile(r"asyncio/|uvloop")),
]
OTHER = "other"


def parse(path: Path) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


def category(stack: tuple[str, ...]) -> str:
    for name, pattern in CATEGORIES:
        if any(pattern.search(frame) for frame in stack):
            return name
    return OTHER


def summarize(path: Path, top: int) -> None:
    stacks = parse(path)
    total = sum(stacks.values())
    by_category: Counter[str] = Counter()
    by_self: Counter[str] = Counter()
    for stack, count in stacks.items():
        by_category[category(stack)] += count
        by_self[stack[-1]] += count
    print(f"## {path.name}: {total} samples")
    for name, count in by_category.most_common():
        print(f"  {count / total:6.1%}  {name}")
    print("  top self frames:")
    for frame, count in by_self.most_common(top):
        print(f"  {count / total:6.1%}  {frame}")
    print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profiles", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=12)
    arguments = parser.parse_args()
    for profile in arguments.profiles:
        summarize(profile, arguments.top)
