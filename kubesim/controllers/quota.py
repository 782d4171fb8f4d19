"""Kueue's view of quota: ClusterQueues, LocalQueues, ResourceFlavors and who uses what.

`QuotaBook` is what Kueue's cache is: built from watch events, updated at once for the
scheduler's own admissions ("assume") so that two admissions in a row never both count on the
same free quota. `assign()` is the flavor assigner for one Workload against one ClusterQueue,
producing either an admission or Kueue's own "couldn't assign flavors" message.

Simplified against Kueue: no cohorts or borrowing (quota is each ClusterQueue's
`nominalQuota`), no flavor fungibility knobs (the first flavor that fits wins), no
topology-aware scheduling, no partial admission.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim.controllers.podspec import pod_requests, untolerated_taint
from kubesim.controllers.quantity import format_resource, parse_milli

if TYPE_CHECKING:
    from collections.abc import Iterator

Obj = dict[str, Any]
WlKey = tuple[str, str]
FlavorResource = tuple[str, str]  # (flavor, resource)


@dataclass(frozen=True)
class PodSetDemand:
    name: str
    count: int
    per_pod: dict[str, int]  # milli-units
    tolerations: tuple[Obj, ...]
    node_selector: tuple[tuple[str, str], ...]

    def total(self) -> dict[str, int]:
        return {resource: milli * self.count for resource, milli in self.per_pod.items()}


@dataclass
class Pending:
    """A Workload waiting for quota, as the queue manager keeps it (no store read needed)."""

    key: WlKey
    local_queue: str
    priority: int
    created: str
    seq: int
    podsets: tuple[PodSetDemand, ...]
    message: str | None = None  # the QuotaReserved=False message last written
    uid: str = ""  # the Workload's: Kueue's order after priority and creation second
    # What the flavor assigner's answer depends on: equal signatures get equal answers.
    signature: tuple[object, ...] = field(init=False, repr=False)
    requests_anything: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.signature = tuple(
            (p.count, tuple(sorted(p.per_pod.items())), p.tolerations, p.node_selector)
            for p in self.podsets
        )
        self.requests_anything = any(p.per_pod and p.count for p in self.podsets)

    def order(self) -> tuple[int, str, str, int]:
        return (-self.priority, self.created, self.uid, self.seq)


def demands_of(workload: Obj) -> tuple[PodSetDemand, ...]:
    out = []
    for podset in (workload.get("spec") or {}).get("podSets") or []:
        spec = (podset.get("template") or {}).get("spec") or {}
        out.append(
            PodSetDemand(
                name=podset.get("name", "main"),
                count=int(podset.get("count", 1)),
                per_pod=pod_requests(spec),
                tolerations=tuple(spec.get("tolerations") or ()),
                node_selector=tuple(sorted((spec.get("nodeSelector") or {}).items())),
            )
        )
    return tuple(out)


@dataclass
class Admission:
    cluster_queue: str
    podset_assignments: list[Obj]
    usage: Counter[FlavorResource]


@dataclass
class Usage:
    cluster_queue: str
    local_queue: WlKey
    amounts: Counter[FlavorResource]
    priority: int = 0
    admitted_at: float = 0.0  # when this cluster saw the admission (newest are preempted first)
    evicted: bool = False  # Evicted=True written, quota held until the Job has stopped


def selector_matches(selector: Obj | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector semantics; None selects nothing (Kueue's namespaceSelector rule)."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


class QuotaBook:
    """Queues, flavors and namespaces as last seen, plus pending Workloads and admitted usage
    with per-queue aggregates kept incrementally (a cycle or a status write must not walk
    10,000 Workloads)."""

    def __init__(self) -> None:
        self.cluster_queues: dict[str, Obj] = {}
        self.local_queues: dict[WlKey, Obj] = {}
        self.flavors: dict[str, Obj] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.pending: dict[WlKey, Pending] = {}
        self.usage: dict[WlKey, Usage] = {}
        self._pending_by_lq: dict[WlKey, dict[WlKey, Pending]] = {}
        self._used_by_cq: dict[str, Counter[FlavorResource]] = {}
        self._used_by_lq: dict[WlKey, Counter[FlavorResource]] = {}
        self._admitted_by_cq: Counter[str] = Counter()
        self._admitted_by_lq: Counter[WlKey] = Counter()
        self._requesting_nothing = 0
        # Pending Workloads not yet told why they wait (no QuotaReserved=False message).
        self.unexplained: set[WlKey] = set()
        self._arrivals = 0  # bumped when an entry moves: sorted views go stale
        self._sorted: dict[str, tuple[tuple[object, ...], list[Pending]]] = {}

    # -- pending -------------------------------------------------------------------------
    def put_pending(self, entry: Pending) -> None:
        old = self.pop_pending(entry.key)
        if old is None:
            # A newcomer joins the sorted view in place: re-sorting 10,000 Workloads for each
            # of 10,000 arrivals would be quadratic. (A stale copy of the same key in the view
            # is harmless: the view yields what is pending when it gets there.)
            cq = self.cluster_queue_of(entry.key[0], entry.local_queue)
            cached = self._sorted.get(cq or "")
            if cached is not None:
                bisect.insort(cached[1], entry, key=Pending.order)
        elif old.order() != entry.order() or old.local_queue != entry.local_queue:
            self._arrivals += 1
        self.pending[entry.key] = entry
        self._requesting_nothing += not entry.requests_anything
        if entry.message is None:
            self.unexplained.add(entry.key)
        self._pending_by_lq.setdefault((entry.key[0], entry.local_queue), {})[entry.key] = entry

    def pop_pending(self, key: WlKey) -> Pending | None:
        entry = self.pending.pop(key, None)
        if entry is not None:
            self._requesting_nothing -= not entry.requests_anything
            self.unexplained.discard(key)
            bucket = self._pending_by_lq.get((key[0], entry.local_queue), {})
            bucket.pop(key, None)
            if not bucket:
                self._pending_by_lq.pop((key[0], entry.local_queue), None)
        return entry

    def pending_in(self, cq_name: str) -> Iterator[Pending]:
        """The ClusterQueue's pending Workloads by priority, then creation (lazily: a cycle
        that stops early does not pay for the rest)."""
        lqs = tuple(
            sorted(
                k
                for k, lq in self.local_queues.items()
                if (lq.get("spec") or {}).get("clusterQueue") == cq_name
            )
        )
        stamp = (self._arrivals, lqs)
        cached = self._sorted.get(cq_name)
        live = sum(len(self._pending_by_lq.get(lq, ())) for lq in lqs)
        # Rebuilt when an entry joined or moved, or when mostly stale (admitted ones linger).
        if cached is None or cached[0] != stamp or len(cached[1]) > 2 * live + 64:
            entries = [e for lq in lqs for e in self._pending_by_lq.get(lq, {}).values()]
            cached = (stamp, sorted(entries, key=Pending.order))
            self._sorted[cq_name] = cached
        # Entries admitted or gone since the sort are skipped; one updated in place (same
        # order, e.g. a new message) is taken as it is now.
        pending = self.pending
        for entry in cached[1]:
            current = pending.get(entry.key)
            if current is not None:
                yield current

    @property
    def pending_requesting_nothing(self) -> int:
        """How many pending Workloads request no resources at all (they fit a full queue)."""
        return self._requesting_nothing

    def pending_without_queue(self) -> list[Pending]:
        """Pending Workloads whose LocalQueue does not exist."""
        return [
            e
            for lq, bucket in self._pending_by_lq.items()
            if lq not in self.local_queues
            for e in bucket.values()
        ]

    def pending_count(self, *, cq: str | None = None, lq: WlKey | None = None) -> int:
        if lq is not None:
            return len(self._pending_by_lq.get(lq, {}))
        return sum(
            len(b) for key, b in self._pending_by_lq.items() if self.cluster_queue_of(*key) == cq
        )

    # -- usage ---------------------------------------------------------------------------
    def put_usage(self, key: WlKey, usage: Usage) -> None:
        self.pop_usage(key)
        self.usage[key] = usage
        self._used_by_cq.setdefault(usage.cluster_queue, Counter()).update(usage.amounts)
        self._used_by_lq.setdefault(usage.local_queue, Counter()).update(usage.amounts)
        self._admitted_by_cq[usage.cluster_queue] += 1
        self._admitted_by_lq[usage.local_queue] += 1

    def pop_usage(self, key: WlKey) -> Usage | None:
        usage = self.usage.pop(key, None)
        if usage is not None:
            self._used_by_cq[usage.cluster_queue].subtract(usage.amounts)
            self._used_by_lq[usage.local_queue].subtract(usage.amounts)
            self._admitted_by_cq[usage.cluster_queue] -= 1
            self._admitted_by_lq[usage.local_queue] -= 1
        return usage

    def used(self, cq_name: str) -> Counter[FlavorResource]:
        """A copy of what the ClusterQueue's admitted Workloads hold."""
        return Counter(self._used_by_cq.get(cq_name, Counter()))

    def used_by_local_queue(self, lq: WlKey) -> Counter[FlavorResource]:
        return Counter(self._used_by_lq.get(lq, Counter()))

    def admitted_count(self, *, cq: str | None = None, lq: WlKey | None = None) -> int:
        return self._admitted_by_lq[lq] if lq is not None else self._admitted_by_cq[cq or ""]

    # -- lookups -------------------------------------------------------------------------
    def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        lq = self.local_queues.get((namespace, local_queue))
        if lq is None:
            return None
        name = (lq.get("spec") or {}).get("clusterQueue")
        return name if isinstance(name, str) else None

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        return self.namespaces.get(namespace, {"kubernetes.io/metadata.name": namespace})

    def missing_flavors(self, cq_name: str) -> list[str]:
        cq = self.cluster_queues.get(cq_name) or {}
        names = [
            f["name"]
            for g in (cq.get("spec") or {}).get("resourceGroups") or []
            for f in g.get("flavors") or []
        ]
        return sorted({n for n in names if n not in self.flavors})

    def nominal(self, cq_name: str) -> dict[FlavorResource, int]:
        cq = self.cluster_queues.get(cq_name) or {}
        out: dict[FlavorResource, int] = {}
        for group in (cq.get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for resource in flavor.get("resources") or []:
                    try:
                        out[(flavor["name"], resource["name"])] = parse_milli(
                            resource.get("nominalQuota", 0)
                        )
                    except ValueError:
                        out[(flavor["name"], resource["name"])] = 0
        return out

    # -- the flavor assigner -------------------------------------------------------------
    def assign(
        self, cq_name: str, pending: Pending, used: Counter[FlavorResource]
    ) -> Admission | str:
        """Fit every pod set into the ClusterQueue's flavors, given `used`; return the
        admission, or Kueue's message saying what did not fit."""
        cq = self.cluster_queues[cq_name]
        groups = (cq.get("spec") or {}).get("resourceGroups") or []
        nominal = self.nominal(cq_name)
        assumed: Counter[FlavorResource] = Counter()
        assignments: list[Obj] = []
        messages: list[str] = []
        for demand in pending.podsets:
            total = demand.total()
            flavors_for: dict[str, str] = {}
            reasons: list[str] = []
            for resource in sorted(total):
                if not any(resource in (g.get("coveredResources") or []) for g in groups):
                    reasons.append(f"resource {resource} unavailable in ClusterQueue")
            for group in groups:
                wanted = sorted(r for r in total if r in (group.get("coveredResources") or []))
                if not wanted:
                    continue
                chosen = None
                for flavor in group.get("flavors") or []:
                    why = self._flavor_misfit(
                        flavor["name"], demand, wanted, total, nominal, used, assumed
                    )
                    if why is None:
                        chosen = flavor["name"]
                        break
                    reasons.append(why)
                if chosen is None:
                    continue
                for resource in wanted:
                    flavors_for[resource] = chosen
            if reasons and len(flavors_for) < len(total):
                detail = ", ".join(sorted(reasons))
                messages.append(f"couldn't assign flavors to pod set {demand.name}: {detail}")
                continue
            for resource, flavor_name in flavors_for.items():
                assumed[(flavor_name, resource)] += total[resource]
            assignments.append(
                {
                    "name": demand.name,
                    "flavors": dict(sorted(flavors_for.items())),
                    "resourceUsage": {r: format_resource(r, total[r]) for r in sorted(flavors_for)},
                    "count": demand.count,
                }
            )
        if messages:
            return "; ".join(messages)
        return Admission(cq_name, assignments, assumed)

    def _flavor_misfit(
        self,
        flavor_name: str,
        demand: PodSetDemand,
        wanted: list[str],
        total: dict[str, int],
        nominal: dict[FlavorResource, int],
        used: Counter[FlavorResource],
        assumed: Counter[FlavorResource],
    ) -> str | None:
        flavor = self.flavors.get(flavor_name)
        if flavor is None:
            return f"flavor {flavor_name} not found"
        spec = flavor.get("spec") or {}
        taint = untolerated_taint(
            list(demand.tolerations) + list(spec.get("tolerations") or []), spec.get("nodeTaints")
        )
        if taint is not None:
            return (
                f"untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}} "
                f"in flavor {flavor_name}"
            )
        labels = spec.get("nodeLabels") or {}
        for key, value in demand.node_selector:
            if key in labels and labels[key] != value:
                return f"flavor {flavor_name} doesn't match node affinity"
        for resource in wanted:
            fr = (flavor_name, resource)
            cap = nominal.get(fr, 0)
            request = total[resource]
            if assumed[fr] + request > cap:
                return (
                    f"insufficient quota for {resource} in flavor {flavor_name}, previously "
                    f"considered podsets requests ({format_resource(resource, assumed[fr])}) "
                    f"+ current podset request ({format_resource(resource, request)}) > "
                    f"maximum capacity ({format_resource(resource, cap)})"
                )
            missing = used[fr] + assumed[fr] + request - cap
            if missing > 0:
                return (
                    f"insufficient unused quota for {resource} in flavor {flavor_name}, "
                    f"{format_resource(resource, missing)} more needed"
                )
        return None
