"""The sentences of workload reasons: user vocabulary, with the numbers that let them act.

Every function returns one or more whole sentences ending in a full stop. They speak of the
workload's pool, image, memory and runtime, the names a user submitted, not of Kueue
internals; Kubernetes' own message is quoted only where it adds a fact (which nodes lacked
what).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import TYPE_CHECKING

from app.domain.conditions import KueueReason
from app.domain.quantity import QuantityError, format_bytes, format_cpu, parse_quantity

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.classify.evidence import ClassifyContext

_QUOTA_RESOURCE = re.compile(r"quota for ([^\s,]+)")
_INSUFFICIENT = re.compile(r"Insufficient ([^\s,]+)")

#: Why Kueue preempted a workload (condition `Preempted`), in pool terms.
_PREEMPTED_BY = {
    "InClusterQueue": "a higher-priority workload in the same pool",
    "InCohortReclamation": "another pool reclaiming quota it had lent",
    "InCohortFairSharing": "fair sharing with other pools",
    "InCohortReclaimWhileBorrowing": "another pool while this pool was borrowing quota",
}

#: Why Kueue evicted a workload (condition `Evicted`), other than preemption.
_EVICTED_BECAUSE: dict[str, str] = {
    KueueReason.PODS_READY_TIMEOUT: "its pods did not become ready in time",
    KueueReason.ADMISSION_CHECK: "an admission check failed",
    KueueReason.CLUSTER_QUEUE_STOPPED: "the pool's queue was stopped",
    KueueReason.LOCAL_QUEUE_STOPPED: "the pool's queue in the project was stopped",
    KueueReason.DEACTIVATED: "it was deactivated",
    KueueReason.NODE_FAILURES: "a node it ran on failed",
    KueueReason.MAXIMUM_EXECUTION_TIME_EXCEEDED: "it ran past its maximum execution time",
}

#: How a user submits a changed spec again, in CLI and API terms alike.
APPLY_AGAIN = "apply the workload again (`aicp apply -f <file>`, or PUT of its spec)"
#: How a user submits an unchanged spec again (`aicp apply` leaves an identical one alone).
SUBMIT_AGAIN = (
    "submit it again (`aicp delete workload <name>`, then `aicp apply -f <file>`; or PUT of "
    "the same spec)"
)


def sentence(text: str) -> str:
    """`text` with exactly one closing full stop."""
    return text.rstrip().rstrip(".") + "."


def amount(resource: str, value: Decimal) -> str:
    """`8 nvidia.com/gpu`, `32 cpu`, `256Gi memory`."""
    if resource == "memory":
        return f"{format_bytes(value)} memory"
    if resource == "cpu":
        return f"{format_cpu(value)} cpu"
    return f"{format_cpu(value)} {resource}"


def requested(context: ClassifyContext, resource: str) -> Decimal:
    """The workload's total request of `resource` over all replicas."""
    per_replica: Decimal
    if resource == context.accelerator_resource:
        per_replica = Decimal(context.accelerators)
    elif resource in ("cpu", "memory"):
        try:
            per_replica = parse_quantity(context.cpu if resource == "cpu" else context.memory)
        except QuantityError:
            per_replica = Decimal(0)
    else:
        per_replica = Decimal(0)
    return per_replica * context.replicas


def duration(seconds: int) -> str:
    """`3600` → `1h`, `5400` → `1h 30m`, `59` → `59s`."""
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts)


def enumerate_names(names: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _short_resource(context: ClassifyContext, message: str) -> str:
    """The resource that is short: of those Kueue's message names, the accelerator first.

    When the message names none, the first one the pool's numbers show short.
    """
    candidates = [context.accelerator_resource, "cpu", "memory"]
    if context.accelerators <= 0:
        candidates.remove(context.accelerator_resource)
    named: list[str] = _QUOTA_RESOURCE.findall(message)
    for resource in [*candidates, *named]:
        if resource in named:
            return resource
    pool = context.pool
    if pool is not None:
        for resource in candidates:
            free = pool.quota.get(resource, Decimal(0)) - pool.in_use.get(resource, Decimal(0))
            if requested(context, resource) > free:
                return resource
    return candidates[0]


def waiting_for_quota(context: ClassifyContext, message: str) -> str:
    """Which pool, how much was asked, how much the pool has and how much is in use."""
    resource = _short_resource(context, message)
    asked = requested(context, resource)
    head = f"Waiting for quota in pool {context.pool_name}: asked for {amount(resource, asked)}"
    pool = context.pool
    if pool is None or resource not in pool.quota:
        return sentence(f"{head}; Kueue says: {message}" if message else head)
    total, used = pool.quota[resource], pool.in_use.get(resource, Decimal(0))
    number = amount(resource, total).split(" ")[0]
    if asked > total:
        return sentence(
            f"{head}, but the pool has only {number} in total, so it can never be admitted; "
            f"lower the request or raise the pool's quota"
        )
    in_use = amount(resource, used).split(" ")[0]
    return sentence(
        f"{head}, the pool has {number} with {in_use} in use by "
        f"{_plural(pool.workloads_admitted, 'workload')}"
    )


def not_admissible(context: ClassifyContext, message: str) -> str:
    """Kueue refuses to consider the workload for a reason other than quota."""
    return sentence(
        f"Queued in pool {context.pool_name}, but Kueue cannot admit it yet: "
        f"{message or 'no reason given'}"
    )


def queued(context: ClassifyContext) -> str:
    return sentence(f"Queued in pool {context.pool_name}, waiting for Kueue to consider it")


def pending() -> str:
    return "Accepted; the Job has not been created yet."


def evicted(context: ClassifyContext, reason: str, preempted_by: str | None, requeued: bool) -> str:
    """Preempted or evicted: by what, and whether it went back to the queue."""
    if reason == KueueReason.PREEMPTED:
        cause = _PREEMPTED_BY.get(preempted_by or "", "a higher-priority workload")
        what = f"Preempted by {cause}"
    else:
        what = f"Evicted because {_EVICTED_BECAUSE.get(reason, reason or 'Kueue stopped it')}"
    if requeued:
        return sentence(f"{what}; requeued in pool {context.pool_name}, waiting for quota again")
    return sentence(f"{what}; it was not requeued")


def _placement(nodes: Sequence[str], products: Sequence[str]) -> str:
    where = f"node {nodes[0]}" if len(nodes) == 1 else f"nodes {enumerate_names(nodes)}"
    return f"{where} ({', '.join(products)})" if products else where


def running(count: int, total: int, nodes: Sequence[str], products: Sequence[str]) -> str:
    """`1 of 1 pods running on node gpu-node-1 (NVIDIA-H100-80GB-HBM3).`"""
    return sentence(f"{count} of {total} pods running on {_placement(nodes, products)}")


def previous_attempt(
    attempt: int, allowed: int, code: int | None, node: str | None, oom: bool
) -> str:
    """`Attempt 2 of 3; the previous one exited with code 3 on node gpu-node-1.`"""
    if oom:
        how = "ran out of memory (OOMKilled)"
    elif code is not None:
        how = f"exited with code {code}"
    else:
        how = "failed"
    where = f" on node {node}" if node else ""
    return sentence(f"Attempt {attempt} of {allowed}; the previous one {how}{where}")


def finishing(failure: str | None) -> str:
    """The Job has decided its outcome and waits for its pods to stop."""
    if failure is None:
        return "All pods completed; the Job is finishing."
    return sentence(f"The Job is failing ({failure}); waiting for its pods to stop")


def succeeded(total: int, nodes: Sequence[str], products: Sequence[str], took: int | None) -> str:
    where = f" on {_placement(nodes, products)}" if nodes else ""
    after = f" in {duration(took)}" if took is not None else ""
    return sentence(f"Succeeded: {total} of {total} pods completed{where}{after}")


def admitted(cluster_queue: str | None, flavor: str | None, starting: int) -> str:
    where = f" on flavor {flavor}" if flavor else ""
    queue = f" by cluster queue {cluster_queue}" if cluster_queue else ""
    doing = f"starting {_plural(starting, 'pod')}" if starting else "waiting for its pods"
    return sentence(f"Admitted{queue}{where}; {doing}")


def _unschedulable_parts(context: ClassifyContext, message: str) -> tuple[str, str, str]:
    """(what no node had, the scheduler's words, advice) from the scheduler's message."""
    short = [m.rstrip(".") for m in _INSUFFICIENT.findall(message)]
    advice = ""
    if short:
        needs = [amount(r, requested(context, r) / max(context.replicas, 1)) for r in short]
        lack = f"no node has {enumerate_names(needs)} free for a pod"
    elif "affinity" in message or "selector" in message:
        lack = "no node carries the labels of the pool's accelerator flavor"
        # Kueue copies the flavor's node labels into the pods when it admits them; pods
        # admitted before the flavor changed keep the old ones and never schedule by themselves.
        advice = (
            "; if the accelerator binding's node labels changed since admission, "
            f"{SUBMIT_AGAIN} so it is admitted with the current ones"
        )
    elif "taint" in message:
        lack = "every node has a taint the pod does not tolerate"
    else:
        lack = "no node can run a pod"
    # Drop the scheduler's preemption post-scriptum; the first part says what was missing.
    said = message.split(" preemption:")[0].rstrip(".")
    return lack, said, advice


def unschedulable(context: ClassifyContext, message: str) -> str:
    """Which resource no node had (from the scheduler's `Insufficient <resource>`)."""
    lack, said, advice = _unschedulable_parts(context, message)
    return sentence(f"Admitted, but {lack} (the scheduler says: {said}){advice}")


def _until(context: ClassifyContext) -> str:
    """What ends a workload that never starts."""
    if context.start_deadline_seconds is None:
        return (
            f"The workload keeps waiting until its maximum runtime of "
            f"{duration(context.max_runtime_seconds)} ends it"
        )
    return (
        f"It fails, freeing its quota, if it has not started "
        f"{duration(context.start_deadline_seconds)} after admission (its start deadline)"
    )


def image_not_pulled(image: str, why: str, context: ClassifyContext) -> str:
    return sentence(
        f"The image {image} could not be pulled ({why}); check its name and tag and that the "
        f"cluster may pull it. {_until(context)}"
    )


def _not_started(context: ClassifyContext, cause: str, advice: str) -> str:
    limit = duration(context.start_deadline_seconds or 0)
    return sentence(
        f"Did not start within its start deadline of {limit} after admission: {cause}. The "
        f"workload failed and its quota was released; {advice}"
    )


def _said(why: str, message: str) -> str:
    return f"{why}: {message.rstrip('.')}" if message else why


def start_deadline_image(context: ClassifyContext, image: str, why: str, message: str) -> str:
    """Failed at the start deadline: the image could not be pulled (the kubelet's words)."""
    cause = f"the image {image} could not be pulled ({_said(why, message)})"
    return _not_started(context, cause, f"fix the image and {APPLY_AGAIN}")


def start_deadline_container(context: ClassifyContext, why: str, message: str) -> str:
    """Failed at the start deadline: the container could not be created."""
    cause = f"its container could not be created ({_said(why, message)})"
    return _not_started(context, cause, f"fix the spec and {APPLY_AGAIN}")


def start_deadline_unschedulable(context: ClassifyContext, message: str) -> str:
    """Failed at the start deadline: no node could hold a pod (the scheduler's words)."""
    lack, said, _ = _unschedulable_parts(context, message)
    cause = f"{lack} (the scheduler says: {said})"
    return _not_started(context, cause, f"once a node can hold its pods, {SUBMIT_AGAIN}")


def start_deadline_waiting(context: ClassifyContext, starting: int) -> str:
    """Failed at the start deadline for no reason the pods show (still starting, or none)."""
    cause = f"{_plural(starting, 'pod')} still starting" if starting else "no pod started"
    advice = f"if it needs longer to start, raise `start_deadline_seconds` and {APPLY_AGAIN}"
    return _not_started(context, cause, advice)


def container_not_created(why: str, message: str) -> str:
    return sentence(f"The container could not be created ({why}): {message or 'no details'}")


def out_of_memory(container: str, limit: str, node: str | None) -> str:
    where = f" on node {node}" if node else ""
    return sentence(
        f"Container {container} ran out of memory and was killed (OOMKilled){where}: its memory "
        f"limit is {limit}; raise `memory` to give it more"
    )


def deadline_exceeded(context: ClassifyContext, image: str | None) -> str:
    limit = context.max_runtime_seconds
    text = (
        f"Stopped after exceeding the maximum runtime of {limit} seconds ({duration(limit)}); "
        f"raise `max_runtime_seconds` if it needs longer"
    )
    if image:
        text += f". Its image {image} could never be pulled, so it never started"
    return sentence(text)


def exited(code: int, node: str | None, attempts: int) -> str:
    where = f" on node {node}" if node else ""
    tries = f" after {_plural(attempts, 'attempt')}" if attempts > 1 else ""
    return sentence(f"Failed{tries}: container main exited with code {code}{where}")


def failed(reason: str, message: str) -> str:
    return sentence(f"Failed ({reason or 'unknown reason'}): {message or 'no details'}")


def _rank_where(rank: int, pod: str | None, node: str | None) -> str:
    inside = " ".join(
        part for part in (f"pod {pod}" if pod else "", f"on {node}" if node else "") if part
    )
    return f"Rank {rank} ({inside})" if inside else f"Rank {rank}"


def _all_stopped(context: ClassifyContext, attempt: int) -> str:
    return f"all {context.nodes} ranks were stopped (attempt {attempt} of {context.retries + 1})"


def rank_exited(
    context: ClassifyContext, rank: int, pod: str | None, node: str | None, code: int, attempt: int
) -> str:
    """`Rank 2 (pod … on gpu-node-1) exited with code 1; all 4 ranks were stopped (attempt 1
    of 3).`"""
    return sentence(
        f"{_rank_where(rank, pod, node)} exited with code {code}; {_all_stopped(context, attempt)}"
    )


def rank_out_of_memory(
    context: ClassifyContext, rank: int, pod: str | None, node: str | None, limit: str, attempt: int
) -> str:
    """One rank was OOM-killed, which ends the attempt of all of them."""
    return sentence(
        f"{_rank_where(rank, pod, node)} ran out of memory and was killed (OOMKilled): its "
        f"memory limit is {limit}; {_all_stopped(context, attempt)}; raise `memory` to give "
        "each rank more"
    )


def gang_not_ready(running: int, total: int, waited: int | None) -> str:
    """Kueue's all-or-nothing start (`waitForPodsReady`) timed out and requeued the workload.

    `running` 0: the pods are gone already (Kueue suspended the Job), so how many ran is no
    longer known."""
    after = f" after {duration(waited)}" if waited is not None else ""
    how_many = f"{running} of {total}" if running else f"not all {total}"
    return sentence(
        f"Requeued: {how_many} pods were running{after}; the workload goes back to the queue"
    )


def next_attempt(reason: str, attempt: int) -> str:
    """A failed attempt of a multi-node workload whose retries are not used up."""
    return sentence(f"{reason.rstrip('.')}; aicp starts attempt {attempt}")
