"""What a ClusterQueue change costs the event router: finding the pool's waiting Jobs.

    .venv/bin/python loadtest/fanout_bench.py --jobs 6000 --waiting 50

Every usage change of a pool's ClusterQueue wakes the pool's suspended Jobs (their "waiting for
quota" sentence follows the queue's numbers). Fills a Job cache as the informer would, with
`--jobs` Jobs of one pool's LocalQueue of which `--waiting` are still suspended, and times the
lookup both ways, in µs per ClusterQueue change:

- scan: every Job carrying the queue's label, then the suspended ones of the namespace among
  them (how the router found them before the index: O(every Job the pool ever ran));
- index: the Jobs cache's waiting-Jobs index (`Informers.queued_jobs`: O(waiting)).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.domain.kube_objects import namespace_of
from app.domain.labels import QUEUE_NAME_LABEL
from app.kube.cache import ObjectCache
from app.kube.informers import queued_in

NAMESPACE = "aicp-bench"
POOL = "h100-pool"


def job(index: int, *, suspended: bool) -> dict[str, Any]:
    labels = {"aicp.dev/uid": f"uid-{index}", QUEUE_NAME_LABEL: POOL}
    return {
        "metadata": {"name": f"train-{index}", "namespace": NAMESPACE, "labels": labels},
        "spec": {"suspend": suspended},
    }


def per_call_us(lookup: Any, rounds: int) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        lookup()
    return (time.perf_counter() - started) / rounds * 1e6


def main(args: argparse.Namespace) -> None:
    cache = ObjectCache()
    cache.index_by_label(QUEUE_NAME_LABEL)
    cache.index_by("queued", queued_in)
    for number in range(args.jobs):
        cache.put(job(number, suspended=number >= args.jobs - args.waiting))

    def scan() -> list[Any]:
        return [
            j
            for j in cache.by_label(QUEUE_NAME_LABEL, POOL)
            if namespace_of(j) == NAMESPACE and (j.get("spec") or {}).get("suspend")
        ]

    def index() -> list[Any]:
        return cache.by_index("queued", f"{NAMESPACE}/{POOL}")

    assert scan() == index() and len(index()) == args.waiting
    print(f"{args.jobs} Jobs of the pool, {args.waiting} waiting; per ClusterQueue change:")
    for name, lookup in (("scan", scan), ("index", index)):
        print(f"  {name:5}  {per_call_us(lookup, args.rounds):10.1f} µs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=6000)
    parser.add_argument("--waiting", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=200)
    main(parser.parse_args())
