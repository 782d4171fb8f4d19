"""Rules for request bodies that msgspec annotations cannot express.

msgspec checks types, ranges, lengths and patterns while decoding (`app.domain.specs`), and
stops at the first error. The functions here run on an already-decoded struct and return
*every* violation they find as `(dotted_field, message)` pairs, so a user fixes a body in one
round trip. An empty list means the body is valid.

`check_fits_pool` is the one cross-resource rule: a workload whose total request can never fit
its pool's quota is refused up front (`exceeds-pool-capacity`) instead of waiting forever.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import msgspec
from docker_image.reference import InvalidReference, Reference

from app.domain.quantity import QuantityError, format_bytes, format_cpu, parse_quantity
from app.domain.render.rendezvous import RENDEZVOUS_ENV
from app.domain.service_specs import ServiceSpec
from app.domain.specs import (
    NAME_PATTERN,
    RESERVED_NAME_PREFIXES,
    BindingPut,
    PoolCreate,
    PoolPatch,
    ProjectCreate,
    ProjectLimits,
    Quota,
    Toleration,
    WorkloadSpec,
)
from app.domain.text import control_problem

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from app.domain.specs import PodRequest

Violation = tuple[str, str]

ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED_ENV_PREFIX = "AICP_"
MAX_LABELS = 16
MAX_ENV = 64
# Matched with `fullmatch` only: `$` would accept a trailing newline (`app.domain.text`).
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: Label domains Kubernetes, Kueue and aicp itself write on the objects aicp creates.
RESERVED_LABEL_DOMAINS = ("aicp.dev", "kubernetes.io", "k8s.io", "x-k8s.io")
#: Kueue's ResourceFlavor schema: at most 8 node labels and 8 tolerations.
MAX_FLAVOR_NODE_LABELS = 8
MAX_FLAVOR_TOLERATIONS = 8
_WHITESPACE = re.compile(r"\s")
_MILLI = Decimal("0.001")
# Bounds on every cpu and memory amount (per replica and per pool). Kueue sums a workload's
# pods in 64-bit integers (millicores for cpu, bytes for memory): 64 replicas of the largest
# request still fit, and no real node or pool comes near either bound.
MAX_CPU = Decimal(10**12)
MAX_CPU_TEXT = "1T"
MAX_MEMORY = Decimal(2**56)
MAX_MEMORY_TEXT = "64Pi"


_NAME = re.compile(NAME_PATTERN)


def is_name(text: str) -> bool:
    """True when `text` could name a project, pool or workload (a DNS-1123 label).

    Lookups by a name from a URL check this first: a name that cannot exist is simply not
    found, and text PostgreSQL would refuse (a NUL byte) never reaches it.
    """
    return len(text) <= 63 and _NAME.fullmatch(text) is not None


def check_name(field: str, name: str) -> list[Violation]:
    """Names of pools and workloads must not start with a reserved prefix."""
    for prefix in RESERVED_NAME_PREFIXES:
        if name.startswith(prefix):
            return [(field, f"must not start with the reserved prefix {prefix!r}")]
    return []


def check_plain_text(field: str, text: str | None) -> list[Violation]:
    """Text that is not free-form (a display name): no control characters."""
    problem = control_problem(text) if text else None
    return [(field, problem)] if problem else []


def _check_amount(
    field: str,
    text: str,
    *,
    allow_zero: bool,
    most: Decimal,
    most_text: str,
    whole: Callable[[Decimal], bool],
    not_whole: str,
) -> list[Violation]:
    """A Kubernetes quantity, above 0 unless `allow_zero`, at most `most`, and `whole`."""
    try:
        value = parse_quantity(text)
    except QuantityError as exc:
        return [(field, str(exc))]
    if value == 0 and not allow_zero:
        return [(field, "must be greater than 0")]
    if value > most:
        return [(field, f"must be at most {most_text}")]
    if not whole(value):
        return [(field, not_whole)]
    return []


def check_cpu(field: str, text: str, *, allow_zero: bool) -> list[Violation]:
    """A cpu amount: a Kubernetes quantity in whole millicores, at most `MAX_CPU`."""
    return _check_amount(
        field,
        text,
        allow_zero=allow_zero,
        most=MAX_CPU,
        most_text=f"{MAX_CPU_TEXT} ({MAX_CPU:,} cores)",
        whole=lambda value: value % _MILLI == 0,
        not_whole="must be a whole number of millicores (at least 1m)",
    )


def check_memory(field: str, text: str, *, allow_zero: bool) -> list[Violation]:
    """A memory amount: a Kubernetes quantity of whole bytes, at most `MAX_MEMORY`."""
    return _check_amount(
        field,
        text,
        allow_zero=allow_zero,
        most=MAX_MEMORY,
        most_text=f"{MAX_MEMORY_TEXT} ({MAX_MEMORY:,} bytes)",
        whole=lambda value: value == value.to_integral_value(),
        not_whole="must be a whole number of bytes",
    )


def check_env(field: str, env: Mapping[str, str]) -> list[Violation]:
    """Env keys are C identifiers; `AICP_` is reserved for variables aicp injects."""
    found: list[Violation] = []
    if len(env) > MAX_ENV:
        found.append((field, f"must have at most {MAX_ENV} entries"))
    for key in env:
        if not ENV_KEY.fullmatch(key):
            found.append((f"{field}.{key}", "must be a C identifier ([A-Za-z_][A-Za-z0-9_]*)"))
        elif key.upper().startswith(RESERVED_ENV_PREFIX):
            found.append((f"{field}.{key}", f"the prefix {RESERVED_ENV_PREFIX!r} is reserved"))
    return found


def _qualified_name_problem(key: str) -> str | None:
    """Kubernetes' qualified-name rule (label keys, taint keys, resource names), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "key prefix must not be empty"
    if not name:
        return "key name must not be empty"
    if len(name) > 63:
        return "key name must be at most 63 characters"
    if not _LABEL_NAME.fullmatch(name):
        return "key name must be alphanumeric, '-', '_' or '.', starting and ending alphanumeric"
    if not prefix:
        return None
    if len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix):
        return "key prefix must be a DNS subdomain of at most 253 characters"
    return None


def _label_key_problem(key: str) -> str | None:
    problem = _qualified_name_problem(key)
    if problem is not None:
        return problem
    prefix = key.rpartition("/")[0]
    for domain in RESERVED_LABEL_DOMAINS:
        if prefix == domain or prefix.endswith("." + domain):
            return f"key prefix {prefix!r} is reserved"
    return None


def _label_value_problem(value: str) -> str | None:
    if len(value) > 63:
        return "value must be at most 63 characters"
    if value and not _LABEL_NAME.fullmatch(value):
        return (
            "value must be empty or alphanumeric, '-', '_' or '.', starting and ending alphanumeric"
        )
    return None


def check_labels(
    field: str,
    labels: Mapping[str, str],
    *,
    limit: int = MAX_LABELS,
    reserved_domains: bool = True,
) -> list[Violation]:
    """At most `limit` labels, each with Kubernetes label key and value syntax.

    Labels a user puts on aicp's objects may not use the domains Kubernetes, Kueue and aicp
    write (`reserved_domains`); labels that select nodes (a binding's) may: nodes carry them.
    """
    found: list[Violation] = []
    if len(labels) > limit:
        found.append((field, f"must have at most {limit} entries"))
    key_problem = _label_key_problem if reserved_domains else _qualified_name_problem
    for key, value in labels.items():
        problem = key_problem(key)
        if problem is not None:
            found.append((f"{field}.{key}", problem))
        problem = _label_value_problem(value)
        if problem is not None:
            found.append((f"{field}.{key}", problem))
    return found


def check_resource_name(field: str, name: str) -> list[Violation]:
    """An accelerator's resource name must be a Kubernetes extended resource name.

    As kube-apiserver checks a container's resources: a qualified name with a domain prefix
    (``nvidia.com/gpu``), outside the ``kubernetes.io`` domain, not starting ``requests.``, and
    still a qualified name with ``requests.`` in front (the ResourceQuota form). Built-in
    resources (``cpu``, ``memory``, ``pods``, ``ephemeral-storage``, ``hugepages-*``) have no
    prefix, so they are refused: a Job would drop an accelerator request under such a name.
    """
    why = "must be an extended resource name like nvidia.com/gpu (a domain, '/', a name)"
    prefix, slash, _ = name.rpartition("/")
    if not slash:
        return [(field, f"{why}; built-in resources such as cpu or memory are not accelerators")]
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        return [(field, f"{why} outside the kubernetes.io domain, which is Kubernetes' own")]
    if name.startswith("requests."):
        return [(field, f"{why}, not starting with 'requests.'")]
    problem = _qualified_name_problem(name) or _qualified_name_problem("requests." + name)
    return [(field, f"{why}: {problem}")] if problem else []


def check_tolerations(field: str, tolerations: Sequence[Toleration]) -> list[Violation]:
    """Tolerations as Kubernetes and Kueue's ResourceFlavor schema accept them."""
    found: list[Violation] = []
    if len(tolerations) > MAX_FLAVOR_TOLERATIONS:
        found.append((field, f"must have at most {MAX_FLAVOR_TOLERATIONS} entries"))
    for index, toleration in enumerate(tolerations):
        at = f"{field}.{index}"
        exists = toleration.operator == "Exists"
        if not toleration.key:
            if not exists:
                found.append((f"{at}.operator", "must be Exists when key is empty (match all)"))
        elif problem := _qualified_name_problem(toleration.key):
            found.append((f"{at}.key", problem))
        if exists and toleration.value is not None:
            # Kueue's rule is `!has(value)`: even an empty string is refused.
            found.append((f"{at}.value", "must be omitted when operator is Exists"))
        elif (
            not exists and toleration.value and (problem := _label_value_problem(toleration.value))
        ):
            found.append((f"{at}.value", problem))
    return found


def check_binding(body: BindingPut) -> list[Violation]:
    """Every rule on an accelerator binding beyond its schema: what kube-apiserver and Kueue's
    ResourceFlavor schema would refuse once aicp rendered it."""
    return [
        *check_resource_name("resource_name", body.resource_name),
        *check_labels(
            "node_labels",
            body.node_labels,
            limit=MAX_FLAVOR_NODE_LABELS,
            reserved_domains=False,
        ),
        *check_tolerations("tolerations", body.tolerations),
    ]


def check_image(field: str, image: str) -> list[Violation]:
    """An image reference a registry accepts, read as the kubelet's container runtime reads it.

    ``[registry[:port]/]repository[:tag][@digest]`` by the distribution reference grammar
    (``docker-image-py``'s ``parse_normalized_named``): lowercase repository path components,
    tags of at most 128 word characters, ``algorithm:hex`` digests, a name of at most 255
    characters. At most 512 characters in all.
    """
    if not image:
        return [(field, "must not be empty")]
    if problem := control_problem(image):
        return [(field, problem)]
    if _WHITESPACE.search(image):
        return [(field, "must not contain whitespace")]
    if len(image) > 512:
        return [(field, "must be at most 512 characters")]
    try:
        Reference.parse_normalized_named(image)
    except InvalidReference as exc:
        return [(field, f"must be an image reference like ghcr.io/acme/train:1.4 ({exc})")]
    except (ValueError, TypeError):
        return [(field, "must be an image reference like ghcr.io/acme/train:1.4")]
    return []


def check_quota(field: str, quota: Quota) -> list[Violation]:
    """A pool quota: cpu and memory are quantities; zero is allowed (an empty pool)."""
    return [
        *check_cpu(f"{field}.cpu", quota.cpu, allow_zero=True),
        *check_memory(f"{field}.memory", quota.memory, allow_zero=True),
    ]


def check_limits(field: str, limits: ProjectLimits | None) -> list[Violation]:
    """A project's limits: accelerator classes are names, cpu and memory quantities."""
    if limits is None:
        return []
    found: list[Violation] = []
    if limits.cpu is not None:
        found += check_cpu(f"{field}.cpu", limits.cpu, allow_zero=True)
    if limits.memory is not None:
        found += check_memory(f"{field}.memory", limits.memory, allow_zero=True)
    return found


def check_pool_create(body: PoolCreate) -> list[Violation]:
    """Every rule on a new compute pool beyond its schema."""
    return [*check_name("name", body.name), *check_quota("quota", body.quota)]


def check_pool_patch(body: PoolPatch) -> list[Violation]:
    """Every rule on a pool update beyond its schema."""
    return check_quota("quota", body.quota)


def check_workload(spec: WorkloadSpec) -> list[Violation]:
    """Every rule on a workload spec beyond its schema (the pool is checked separately)."""
    return [
        *check_name("name", spec.name),
        *check_image("image", spec.image),
        *check_cpu("cpu", spec.cpu, allow_zero=False),
        *check_memory("memory", spec.memory, allow_zero=False),
        *check_env("env", spec.env),
        *check_labels("labels", spec.labels),
        *check_nodes(spec),
    ]


def check_service(spec: ServiceSpec) -> list[Violation]:
    """Every rule on a service spec beyond its schema (the pool is checked separately): the
    workload rules that apply to one replica, and an autoscaler whose bounds make sense."""
    found = [
        *check_name("name", spec.name),
        *check_image("image", spec.image),
        *check_cpu("cpu", spec.cpu, allow_zero=False),
        *check_memory("memory", spec.memory, allow_zero=False),
        *check_env("env", spec.env),
        *check_labels("labels", spec.labels),
    ]
    scaling = spec.autoscaling
    if scaling is not None and scaling.min_replicas > scaling.max_replicas:
        found.append(
            (
                "autoscaling.min_replicas",
                f"must be at most max_replicas ({scaling.max_replicas})",
            )
        )
    return found


def check_nodes(spec: WorkloadSpec) -> list[Violation]:
    """A multi-node workload is one pod per rank: `replicas` must stay 1, and its `env` may
    not set the rendezvous variables aicp injects (`app.domain.render.rendezvous`)."""
    if not spec.distributed:
        return []
    found: list[Violation] = []
    if spec.replicas != 1:
        found.append(
            (
                "replicas",
                f"must be 1 when nodes is {spec.nodes}: a multi-node workload runs one pod per "
                "rank (nodes); for independent copies use replicas with nodes 1",
            )
        )
    found.extend(
        (f"env.{key}", "is reserved: aicp sets it for every rank of a multi-node workload")
        for key in spec.env
        if key in RENDEZVOUS_ENV and not key.startswith(RESERVED_ENV_PREFIX)  # said already
    )
    return found


class CapacityShortfall(msgspec.Struct, frozen=True, kw_only=True):
    """A workload that cannot fit its pool even with the whole quota free.

    `requested` and `pool_capacity` carry the same keys (`accelerators`, `cpu`, `memory`) with
    Kubernetes quantity strings as values (as Kueue shows quotas), so the user can compare them
    side by side; `exceeded` lists the resources that do not fit, in that order.
    """

    compute_pool: str
    accelerator_class: str
    requested: dict[str, str]
    pool_capacity: dict[str, str]
    exceeded: list[str]
    #: A service's: one replica's request is compared (its replicas are admitted one by one).
    one_replica: bool = False

    @property
    def detail(self) -> str:
        parts = [
            f"{name} {self.requested[name]} > {self.pool_capacity[name]}" for name in self.exceeded
        ]
        if self.one_replica:
            return (
                f"One replica of the service asks for more than compute pool "
                f"{self.compute_pool!r} can ever provide ({', '.join(parts)}); lower the "
                "per-replica request, or raise the pool's quota."
            )
        return (
            f"The workload asks for more than compute pool {self.compute_pool!r} can ever "
            f"provide ({', '.join(parts)}); lower nodes, replicas or the per-pod request, "
            "or raise the pool's quota."
        )


def check_fits_pool(
    spec: PodRequest, quota: Quota, *, accelerator_class: str
) -> CapacityShortfall | None:
    """Return the shortfall when `replicas * per-replica request` exceeds `quota`, else None.

    Assumes `spec` and `quota` already passed `check_workload` / `check_quota` (quantities
    parse). Comparison is exact (Decimal), so `"2Ti"` against `2048Gi` fits.
    """
    replicas = spec.pods
    accelerators = spec.accelerators * replicas
    cpu = parse_quantity(spec.cpu) * replicas
    memory = parse_quantity(spec.memory) * replicas
    quota_cpu = parse_quantity(quota.cpu)
    quota_memory = parse_quantity(quota.memory)
    exceeded = [
        name
        for name, wanted, have in (
            ("accelerators", Decimal(accelerators), Decimal(quota.accelerators)),
            ("cpu", cpu, quota_cpu),
            ("memory", memory, quota_memory),
        )
        if wanted > have
    ]
    if not exceeded:
        return None
    return CapacityShortfall(
        compute_pool=spec.compute_pool,
        accelerator_class=accelerator_class,
        requested={
            "accelerators": str(accelerators),
            "cpu": format_cpu(cpu),
            "memory": format_bytes(memory),
        },
        pool_capacity={
            "accelerators": str(quota.accelerators),
            "cpu": quota.cpu,
            "memory": quota.memory,
        },
        exceeded=exceeded,
        one_replica=isinstance(spec, ServiceSpec),
    )


FieldRule = Callable[[str, Any], list[Violation]]

#: The rules above, by (struct, field), for a body that failed its schema elsewhere: each
#: field whose own type holds is still checked, so one answer lists every problem.
FIELD_RULES: dict[tuple[type, str], FieldRule] = {
    (ProjectCreate, "name"): check_name,
    (ProjectCreate, "labels"): check_labels,
    (ProjectCreate, "display_name"): check_plain_text,
    (PoolCreate, "name"): check_name,
    (Quota, "cpu"): lambda field, value: check_cpu(field, value, allow_zero=True),
    (Quota, "memory"): lambda field, value: check_memory(field, value, allow_zero=True),
    (WorkloadSpec, "name"): check_name,
    (WorkloadSpec, "image"): check_image,
    (WorkloadSpec, "cpu"): lambda field, value: check_cpu(field, value, allow_zero=False),
    (WorkloadSpec, "memory"): lambda field, value: check_memory(field, value, allow_zero=False),
    (WorkloadSpec, "env"): check_env,
    (WorkloadSpec, "labels"): check_labels,
    (ServiceSpec, "name"): check_name,
    (ServiceSpec, "image"): check_image,
    (ServiceSpec, "cpu"): lambda field, value: check_cpu(field, value, allow_zero=False),
    (ServiceSpec, "memory"): lambda field, value: check_memory(field, value, allow_zero=False),
    (ServiceSpec, "env"): check_env,
    (ServiceSpec, "labels"): check_labels,
    (BindingPut, "resource_name"): check_resource_name,
    (BindingPut, "node_labels"): lambda field, value: check_labels(
        field, value, limit=MAX_FLAVOR_NODE_LABELS, reserved_domains=False
    ),
    (BindingPut, "tolerations"): check_tolerations,
}
