"""A Deployment's status as its controller computes it (`sync.go`, `progress.go`): the counts
over its ReplicaSets, `Available`, the `Progressing` condition with the progress deadline, a
ReplicaSet's `ReplicaFailure` copied, and when to look again for the deadline. Pure functions;
the controller writes the result."""

from __future__ import annotations

from typing import Any

from kubesim.controllers import rollout
from kubesim.controllers.podstatus import parse_time
from kubesim.controllers.rollout import spec_replicas, status_count
from kubesim.controllers.status import Conditions

Obj = dict[str, Any]
NO_DEADLINE = 2147483647


def has_deadline(d: Obj) -> bool:
    return d["spec"].get("progressDeadlineSeconds") not in (None, NO_DEADLINE)


def calculate(d: Obj, everything: list[Obj], new: Obj | None, now: str) -> Obj:
    """`calculateStatus`: the counts over the ReplicaSets (zeros left out, as the API leaves
    them out) and the Available condition."""
    available = sum(status_count(rs, "availableReplicas") for rs in everything)
    total = sum(spec_replicas(rs) for rs in everything)
    counts = {
        "observedGeneration": d["metadata"].get("generation", 1),
        "replicas": sum(status_count(rs, "replicas") for rs in everything),
        "updatedReplicas": status_count(new, "replicas"),
        "readyReplicas": sum(status_count(rs, "readyReplicas") for rs in everything),
        "availableReplicas": available,
        "unavailableReplicas": max(total - available, 0),
        "collisionCount": (d.get("status") or {}).get("collisionCount"),
    }
    status: Obj = {k: v for k, v in counts.items() if v}
    conds = Conditions(d, now)
    if available >= spec_replicas(d) - rollout.max_unavailable(d):
        message = "Deployment has minimum availability."
        conds.set("Available", "True", "MinimumReplicasAvailable", message)
    else:
        message = "Deployment does not have minimum availability."
        conds.set("Available", "False", "MinimumReplicasUnavailable", message)
    status["conditions"] = conds.items
    return status


def complete(d: Obj, status: Obj) -> bool:
    """`DeploymentComplete`: every replica updated and available, the generation observed."""
    desired = spec_replicas(d)
    return (
        int(status.get("updatedReplicas") or 0) == desired
        and int(status.get("replicas") or 0) == desired
        and int(status.get("availableReplicas") or 0) == desired
        and int(status.get("observedGeneration") or 0) >= d["metadata"].get("generation", 1)
    )


def _progressing(before: Obj, after: Obj) -> bool:
    """`DeploymentProgressing`: more updated, ready or available pods, or fewer old ones."""

    def count(status: Obj, field: str) -> int:
        return int(status.get(field) or 0)

    old_before = count(before, "replicas") - count(before, "updatedReplicas")
    old_after = count(after, "replicas") - count(after, "updatedReplicas")
    return (
        count(after, "updatedReplicas") > count(before, "updatedReplicas")
        or old_after < old_before
        or count(after, "readyReplicas") > count(before, "readyReplicas")
        or count(after, "availableReplicas") > count(before, "availableReplicas")
    )


def _deadline_in(d: Obj, condition: Obj, now: float) -> float:
    updated = parse_time(condition.get("lastUpdateTime")) or now
    return updated + int(d["spec"]["progressDeadlineSeconds"]) - now


def _timed_out(d: Obj, conds: Conditions, now: float) -> bool:
    found = conds.find("Progressing")
    if found is None or found.get("reason") == "NewReplicaSetAvailable":
        return False
    if found.get("reason") == "ProgressDeadlineExceeded":
        return True
    return _deadline_in(d, found, now) < 0


def rollout_status(d: Obj, everything: list[Obj], new: Obj | None, now: float, now_s: str) -> Obj:
    """`syncRolloutStatus`: the status with the Progressing condition brought up to date."""
    status = calculate(d, everything, new, now_s)
    current = Conditions(d, now_s).find("Progressing")
    done = (
        int(status.get("replicas") or 0) == int(status.get("updatedReplicas") or 0)
        and current is not None
        and current.get("reason") == "NewReplicaSetAvailable"
    )
    conds = Conditions({"status": status}, now_s)
    if new is not None:
        subject = f'ReplicaSet "{new["metadata"]["name"]}"'
    else:
        subject = f'Deployment "{d["metadata"]["name"]}"'
    if has_deadline(d) and not done:
        if complete(d, status):
            message = f"{subject} has successfully progressed."
            conds.set("Progressing", "True", "NewReplicaSetAvailable", message)
        elif _progressing(d.get("status") or {}, status):
            message = f"{subject} is progressing."
            conds.replace("Progressing", "True", "ReplicaSetUpdated", message)
        elif _timed_out(d, conds, now):
            message = f"{subject} has timed out progressing."
            conds.set("Progressing", "False", "ProgressDeadlineExceeded", message)
    failure = _replica_failure(everything, new)
    if failure is not None:
        conds.put(failure)
    else:
        conds.remove("ReplicaFailure")
    status["conditions"] = conds.items
    return status


def _replica_failure(everything: list[Obj], new: Obj | None) -> Obj | None:
    """`getReplicaFailures`: the new ReplicaSet's `ReplicaFailure`, else an old one's, as a
    Deployment condition (both times the ReplicaSet condition's transition)."""
    found = Conditions(new, "").find("ReplicaFailure") if new is not None else None
    for rs in everything:
        found = found or Conditions(rs, "").find("ReplicaFailure")
    if found is None:
        return None
    since = found.get("lastTransitionTime")
    return {
        "type": "ReplicaFailure",
        "status": found.get("status"),
        "lastUpdateTime": since,
        "lastTransitionTime": since,
        "reason": found.get("reason"),
        "message": found.get("message"),
    }


def stuck_requeue(d: Obj, status: Obj, now: float) -> float | None:
    """`requeueStuckDeployment`: when to look again, one second after the progress deadline
    would pass; None when the rollout is complete or already timed out."""
    found = Conditions({"status": status}, "").find("Progressing")
    if not has_deadline(d) or found is None or complete(d, status):
        return None
    if found.get("reason") in ("ProgressDeadlineExceeded", "NewReplicaSetAvailable"):
        return None
    return max(_deadline_in(d, found, now), 0.0) + 1.0
