"""The cluster's own account of every Job, read from kubesim's `GET /_sim/history/jobs`.

What aicp says about its Jobs proves nothing about what it did to the cluster; these checks
count from the simulated apiserver's record of every committed change instead (unbounded, and
untouched by the faults a scenario injects — the watch window is neither): how many distinct
Jobs (uids) were created for each workload, whether any Job was suspended again after it had
run unsuspended, and whether the evidence finalizer ever came back to a Job after it had been
removed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

FINALIZER = "aicp.dev/evidence"
UID_LABEL = "aicp.dev/uid"


@dataclass
class JobHistory:
    url: str
    changes: list[dict[str, Any]] = field(default_factory=list)

    async def start(self) -> None:
        await self.refresh()
        assert not self.changes, "the history must start before the first Job"

    async def stop(self) -> None:
        """Nothing to release: every refresh opens and closes its own client."""

    async def refresh(self) -> list[dict[str, Any]]:
        async with httpx.AsyncClient(base_url=self.url, timeout=30) as client:
            response = await client.get("/_sim/history/jobs")
        response.raise_for_status()
        self.changes = response.json()["items"]
        return self.changes

    # -- what the history says (call `refresh()` first) -------------------------------------

    def created(self) -> int:
        return sum(1 for c in self.changes if c["event"] == "ADDED")

    def by_workload(self) -> dict[str, set[str]]:
        """Workload id (the Job's `aicp.dev/uid` label) → the Job uids created for it."""
        found: dict[str, set[str]] = defaultdict(set)
        for change in self.changes:
            workload = change["labels"].get(UID_LABEL)
            if change["event"] == "ADDED" and workload:
                found[workload].add(change["uid"])
        return dict(found)

    def first_deleting(self) -> dict[str, float]:
        """Workload id → when (host monotonic clock) one of its Jobs first began to go."""
        found: dict[str, float] = {}
        for change in self.changes:
            workload = change["labels"].get(UID_LABEL)
            if workload and (change["event"] == "DELETED" or change["deleting"]):
                found.setdefault(workload, change["monotonic"])
        return found

    def resuspended(self) -> list[str]:
        """Jobs set back to `suspend: true` after having run unsuspended."""
        last: dict[str, bool] = {}
        bad: list[str] = []
        for change in self.changes:
            uid = change["uid"]
            if change["event"] == "MODIFIED" and last.get(uid) is False and change["suspend"]:
                bad.append(f"{change['name']} ({uid}) at {change['resource_version']}")
            last[uid] = change["suspend"]
        return bad

    def finalizer_returned(self) -> list[str]:
        """Jobs that got the evidence finalizer back after it had been removed."""
        had: dict[str, bool] = {}
        bad: list[str] = []
        for change in self.changes:
            uid = change["uid"]
            has = FINALIZER in change["finalizers"]
            if had.get(uid) is False and has:
                bad.append(f"{change['name']} ({uid}) at {change['resource_version']}")
            had[uid] = has
        return bad
