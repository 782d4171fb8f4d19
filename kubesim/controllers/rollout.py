"""The Deployment controller's arithmetic, after `pkg/controller/deployment/util` and
`rolling.go`: surge and unavailability fenceposts, how far a new ReplicaSet may grow, how many
old pods may go, proportional scaling, the pod-template-hash, and the revision and replicas
annotations. Pure functions over the objects as dicts; the controller (`deployments.py`) does
the writes.
"""

from __future__ import annotations

import json
from typing import Any

from kubesim.naming import ALPHABET
from kubesim.workloads import int_or_percent

Obj = dict[str, Any]
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
#: Deployment annotations never copied to its ReplicaSets (`annotationsToSkip`).
NOT_COPIED = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION,
        REVISION_HISTORY,
        DESIRED,
        MAX_REPLICAS,
        "deprecated.deployment.rollback.to",
    }
)


def spec_replicas(obj: Obj | None) -> int:
    return int(((obj or {}).get("spec") or {}).get("replicas") or 0)


def status_count(obj: Obj | None, field: str) -> int:
    return int(((obj or {}).get("status") or {}).get(field) or 0)


def rolling(deployment: Obj) -> bool:
    return (deployment["spec"].get("strategy") or {}).get("type") == "RollingUpdate"


def fenceposts(deployment: Obj) -> tuple[int, int]:
    """`ResolveFenceposts`: (max surge rounded up, max unavailable rounded down); when both
    come to 0, unavailable is 1."""
    rolling_update = (deployment["spec"].get("strategy") or {}).get("rollingUpdate") or {}
    desired = spec_replicas(deployment)
    surge = int_or_percent(rolling_update.get("maxSurge"), desired, round_up=True)
    unavailable = int_or_percent(rolling_update.get("maxUnavailable"), desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(deployment: Obj) -> int:
    return fenceposts(deployment)[0] if rolling(deployment) else 0


def max_unavailable(deployment: Obj) -> int:
    """`MaxUnavailable`: 0 for Recreate or no replicas, else at most `replicas`."""
    desired = spec_replicas(deployment)
    if not rolling(deployment) or desired == 0:
        return 0
    return min(fenceposts(deployment)[1], desired)


def new_rs_replicas(deployment: Obj, all_rss: list[Obj], new_rs: Obj) -> int:
    """`NewRSNewReplicas`: the size the new ReplicaSet may grow to now."""
    desired = spec_replicas(deployment)
    if not rolling(deployment):
        return desired
    current = sum(spec_replicas(rs) for rs in all_rss)
    most = desired + max_surge(deployment)
    if current >= most:
        return spec_replicas(new_rs)
    grow = min(most - current, desired - spec_replicas(new_rs))
    return spec_replicas(new_rs) + grow


def unhealthy_cleanup(old_rss: list[Obj], allowed: int) -> dict[str, int]:
    """`cleanupUnhealthyReplicas`: old ReplicaSets' unavailable replicas that may go at once,
    oldest ReplicaSet first, at most `allowed` in all; name -> new size."""
    sizes: dict[str, int] = {}
    removed = 0
    for rs in sorted(old_rss, key=_created):
        if removed >= allowed:
            break
        size, available = spec_replicas(rs), status_count(rs, "availableReplicas")
        if size == 0 or size <= available:
            continue
        cut = min(allowed - removed, size - available)
        sizes[rs["metadata"]["name"]] = size - cut
        removed += cut
    return sizes


def old_scale_down(deployment: Obj, all_rss: list[Obj], old_rss: list[Obj]) -> dict[str, int]:
    """`scaleDownOldReplicaSetsForRollingUpdate`: shrink the oldest old ReplicaSets while the
    available pods stay at least `replicas - maxUnavailable`; name -> new size."""
    least = spec_replicas(deployment) - max_unavailable(deployment)
    available = sum(status_count(rs, "availableReplicas") for rs in all_rss)
    if available <= least:
        return {}
    total, done = available - least, 0
    sizes: dict[str, int] = {}
    for rs in sorted(old_rss, key=_created):
        if done >= total:
            break
        size = spec_replicas(rs)
        if size == 0:
            continue
        cut = min(size, total - done)
        sizes[rs["metadata"]["name"]] = size - cut
        done += cut
    return sizes


def proportional(deployment: Obj, active: list[Obj]) -> dict[str, int]:
    """`scale()` with several active ReplicaSets during a rollout: the change of `replicas`
    shared out in proportion to each one's size (leftovers to the largest); name -> size."""
    desired = spec_replicas(deployment)
    allowed = desired + max_surge(deployment) if desired > 0 else 0
    to_add = allowed - sum(spec_replicas(rs) for rs in active)
    if to_add == 0:
        return {}
    # Scale up the largest (newest on a tie) first; scale down the largest (oldest) first.
    ordered = sorted(active, key=_created, reverse=to_add > 0)
    ordered.sort(key=spec_replicas, reverse=True)
    added = 0
    sizes: dict[str, int] = {}
    for rs in ordered:
        share = _proportion(deployment, rs, to_add, added)
        sizes[rs["metadata"]["name"]] = spec_replicas(rs) + share
        added += share
    first = ordered[0]["metadata"]["name"]
    sizes[first] = max(0, sizes[first] + to_add - added)
    return sizes


def _proportion(deployment: Obj, rs: Obj, to_add: int, added: int) -> int:
    """`GetProportion`."""
    size = spec_replicas(rs)
    if size == 0 or to_add == 0 or to_add == added:
        return 0
    desired = spec_replicas(deployment)
    if desired == 0:
        fraction = -size
    else:
        annotated = (rs["metadata"].get("annotations") or {}).get(MAX_REPLICAS)
        base = int(annotated) if annotated else status_count(deployment, "replicas")
        target = size * (desired + max_surge(deployment)) / base if base else size
        fraction = int(target + 0.5) - size  # RoundToInt32
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def _created(rs: Obj) -> tuple[str, str]:
    return (str(rs["metadata"].get("creationTimestamp", "")), rs["metadata"]["name"])


def revision(rs: Obj) -> int:
    value = (rs["metadata"].get("annotations") or {}).get(REVISION)
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


def _semantic(value: Any) -> Any:
    """`value` as apimachinery's semantic equality sees it: null, empty objects and empty
    lists are the same as absent (kubectl sends `resources: {}` and `creationTimestamp: null`
    where other clients send nothing)."""
    if isinstance(value, dict):
        pruned = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def without_hash(template: Obj) -> Obj:
    """The template with the `pod-template-hash` label dropped, for `EqualIgnoreHash`
    (compared semantically)."""
    meta = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != HASH_LABEL}
    meta["labels"] = labels
    out: Obj = _semantic({**template, "metadata": meta})
    return out


def template_hash(template: Obj, collision_count: int | None) -> str:
    """The pod-template-hash: FNV-32a of the template (and the collision count), its decimal
    digits written in the apiserver's name alphabet (`rand.SafeEncodeString`), like `5d8f9c7b6d`.
    The real controller hashes Go's printout of the template, so the values differ."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":"))
    if collision_count is not None:
        data += str(collision_count)
    value = 0x811C9DC5
    for byte in data.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(ALPHABET[ord(digit) % len(ALPHABET)] for digit in str(value))


def set_revision(d: Obj, revision: str | None) -> bool:
    """`SetDeploymentRevision` (in memory; written with the status)."""
    annotations = d["metadata"].setdefault("annotations", {})
    if revision is None or annotations.get(REVISION) == revision:
        return False
    annotations[REVISION] = revision
    return True


def set_new_annotations(d: Obj, rs: Obj, revision: str, *, exists: bool) -> bool:
    """`SetNewReplicaSetAnnotations`: the Deployment's annotations copied, the revision raised
    to `revision` (the previous one kept in `revision-history`), and on create the replicas
    annotations. True when anything changed."""
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for key, value in (d["metadata"].get("annotations") or {}).items():
        if key not in NOT_COPIED and annotations.get(key) != value:
            annotations[key] = value
            changed = True
    previous = annotations.get(REVISION)
    if int(previous or 0) < int(revision):
        annotations[REVISION] = revision
        changed = True
        if previous is not None:
            history = annotations.get(REVISION_HISTORY)
            annotations[REVISION_HISTORY] = f"{history},{previous}" if history else previous
    if not exists:
        desired = spec_replicas(d)
        annotations[DESIRED] = str(desired)
        annotations[MAX_REPLICAS] = str(desired + max_surge(d))
        changed = True
    return changed
