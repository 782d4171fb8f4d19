"""What users ask for: the request bodies of docs/API.md as msgspec structs.

Type and range rules live in the annotations (msgspec checks them while decoding, and they
become the OpenAPI schema); rules msgspec cannot express (quantity syntax, env key syntax,
reserved prefixes) are checked by `check_*` functions in `app.domain.validation`.
Unknown fields are rejected (`forbid_unknown_fields`), so `replica` for `replicas` is an error
instead of a silently ignored typo.
"""

from __future__ import annotations

from typing import Annotated, Literal, Protocol

import msgspec

from app.domain.text import whole

#: A DNS-1123 label, the whole string (`app.domain.text.whole`).
NAME_PATTERN = whole("[a-z0-9]([-a-z0-9]*[a-z0-9])?")
#: A C identifier (env keys).
ENV_KEY_PATTERN = whole("[A-Za-z_][A-Za-z0-9_]*")
#: No whitespace and no control character (image references).
PRINTABLE_PATTERN = whole("[^\\s\\x00-\\x1f\\x7f-\\x9f]+")
RESERVED_NAME_PREFIXES = ("aicp-", "kube-", "system-")
#: The start deadline of a workload whose spec names none (`AICP_WORKLOAD_START_DEADLINE_SECONDS`).
DEFAULT_START_DEADLINE_SECONDS = 3600
MAX_START_DEADLINE_SECONDS = 30 * 86400
#: The most ranks (pods) of one distributed workload.
MAX_NODES = 64


def _name(max_length: int, description: str, example: str) -> msgspec.Meta:
    """The constraints of a DNS-1123 label name of at most `max_length` characters."""
    return msgspec.Meta(
        pattern=NAME_PATTERN,
        min_length=1,
        max_length=max_length,
        description=description,
        examples=[example],
    )


ProjectName = Annotated[str, _name(30, "DNS-1123 label, at most 30 characters", "research")]
PoolName = Annotated[str, _name(30, "DNS-1123 label, at most 30 characters", "h100-pool")]
WorkloadName = Annotated[str, _name(40, "DNS-1123 label, at most 40 characters", "train-7b")]
AcceleratorClass = Annotated[str, _name(63, "portable accelerator class", "h100-80g")]
Quantity = Annotated[
    str,
    msgspec.Meta(
        min_length=1, max_length=64, description="Kubernetes quantity", examples=["32", "256Gi"]
    ),
]
#: Who created a resource, as its responses show it.
CreatedBy = Annotated[
    str,
    msgspec.Meta(
        description="`admin` or `token:<id>`",
        examples=["token:6c1f0f1e-6b8e-4b53-9d7a-0d3b3f1e9a10"],
    ),
]
Priority = Literal["low", "normal", "high"]
TokenRole = Literal["viewer", "editor", "admin"]


class _Body(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=False):
    """Base of every request body: unknown fields are an error."""


PoolAccelerators = Annotated[int, msgspec.Meta(ge=0, le=100_000)]


class ProjectLimits(_Body):
    """Ceilings on what a project's compute pools may hold together, set by the platform admin.

    Each one that is null (or absent) is no ceiling. `accelerators` maps accelerator classes to
    the most accelerators of that class the project's pools may hold; once it is set, a class
    it does not name may have none. `cpu` and `memory` bound the sum of the pools' quotas."""

    accelerators: (
        Annotated[
            dict[AcceleratorClass, PoolAccelerators],
            msgspec.Meta(max_length=64, examples=[{"h100-80g": 16}]),
        ]
        | None
    ) = None
    cpu: Quantity | None = None
    memory: Quantity | None = None


class ProjectCreate(_Body):
    """A new project (tenant); its workloads will run in namespace `aicp-<name>`."""

    name: ProjectName
    display_name: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    labels: dict[str, str] = {}
    limits: ProjectLimits | None = None


class ProjectPatch(_Body):
    """New limits for a project (a new generation); null removes every ceiling."""

    limits: ProjectLimits | None


class TokenCreate(_Body):
    """A new project token with a role and an optional lifetime."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=63, pattern=NAME_PATTERN)]
    role: TokenRole
    expires_in_days: Annotated[int, msgspec.Meta(ge=1, le=3650)] | None = None


class Toleration(_Body):
    """A Kubernetes toleration added to the pods of workloads using the binding."""

    key: Annotated[str, msgspec.Meta(max_length=253)] | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: Annotated[str, msgspec.Meta(max_length=63)] | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None


class BindingPut(_Body):
    """How an accelerator class maps onto the cluster: resource name, Kueue flavor, node labels."""

    resource_name: Annotated[
        str, msgspec.Meta(min_length=1, max_length=253, examples=["nvidia.com/gpu"])
    ]
    flavor: Annotated[
        str, msgspec.Meta(pattern=NAME_PATTERN, min_length=1, max_length=63, examples=["h100-80g"])
    ]
    node_labels: dict[str, str] = {}
    tolerations: list[Toleration] = []
    description: Annotated[str, msgspec.Meta(max_length=500)] | None = None


class Quota(_Body):
    """A pool's quota: accelerators of its class, plus cpu and memory (Kubernetes quantities)."""

    accelerators: PoolAccelerators
    cpu: Quantity
    memory: Quantity


class PoolCreate(_Body):
    """A new compute pool: a quota of one accelerator class."""

    name: PoolName
    accelerator_class: AcceleratorClass
    quota: Quota


class PoolPatch(_Body):
    """A quota change for a pool (a new generation)."""

    quota: Quota


EnvKey = Annotated[str, msgspec.Meta(pattern=ENV_KEY_PATTERN, max_length=128)]
#: What a pod's container runs, as workloads and services name it.
Image = Annotated[
    str,
    msgspec.Meta(
        pattern=PRINTABLE_PATTERN,
        min_length=1,
        max_length=512,
        examples=["ghcr.io/acme/train:1.4"],
    ),
]
Arguments = Annotated[
    list[Annotated[str, msgspec.Meta(max_length=4096)]], msgspec.Meta(max_length=64)
]
Environment = Annotated[
    dict[EnvKey, Annotated[str, msgspec.Meta(max_length=32768)]], msgspec.Meta(max_length=64)
]


class WorkloadSpec(_Body):
    """A batch accelerator job, as submitted, with docs/API.md's defaults filled in."""

    name: WorkloadName
    compute_pool: PoolName
    image: Image
    command: Arguments = []
    args: Arguments = []
    env: Environment = {}
    accelerators: Annotated[int, msgspec.Meta(ge=0, le=64, description="per replica")] = 0
    cpu: Quantity = "1"
    memory: Quantity = "1Gi"
    replicas: Annotated[
        int,
        msgspec.Meta(
            ge=1,
            le=64,
            description="independent copies of one pod; must be 1 when nodes is above 1",
        ),
    ] = 1
    nodes: Annotated[
        int,
        msgspec.Meta(
            ge=1,
            le=MAX_NODES,
            description="pods of one distributed run (ranks 0..nodes-1), admitted and started "
            "together, each with accelerators, cpu and memory, that fail together and find "
            "each other through the rendezvous environment",
        ),
    ] = 1
    max_runtime_seconds: Annotated[int, msgspec.Meta(ge=60, le=30 * 86400)] = 86400
    start_deadline_seconds: (
        Annotated[
            int,
            msgspec.Meta(
                ge=1,
                le=MAX_START_DEADLINE_SECONDS,
                description="seconds the workload may hold its quota without a pod having "
                "started, counted from its admission; past it the workload fails and frees the "
                "quota. Absent or null: the installation's default, filled in on submission",
            ),
        ]
        | None
    ) = None
    retries: Annotated[int, msgspec.Meta(ge=0, le=10)] = 0
    priority: Priority = "normal"
    labels: Annotated[dict[str, str], msgspec.Meta(max_length=16)] = {}

    @property
    def distributed(self) -> bool:
        """A multi-node workload: an Indexed Job of `nodes` ranks with a headless Service."""
        return self.nodes > 1

    @property
    def pods(self) -> int:
        """How many pods the workload runs at once: its ranks, or its replicas."""
        return self.nodes if self.distributed else self.replicas


class PodRequest(Protocol):
    """What the pool and node checks read of a spec: the pool, one pod's request, and how many
    pods must fit the pool's quota at once (a workload's ranks or replicas; one replica of a
    service, whose replicas Kueue admits one by one)."""

    @property
    def compute_pool(self) -> str: ...

    @property
    def accelerators(self) -> int: ...

    @property
    def cpu(self) -> str: ...

    @property
    def memory(self) -> str: ...

    @property
    def pods(self) -> int: ...


BindingRole = Literal["platform-admin", "admin", "editor", "viewer"]


class RoleBindingCreate(_Body):
    """Give the members of an identity-provider group a role: `platform-admin` (no project),
    or `admin`, `editor` or `viewer` of one project."""

    group: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=512,
            pattern=PRINTABLE_PATTERN,
            description="a group name as the groups claim carries it",
            examples=["vision-team"],
        ),
    ]
    role: BindingRole
    project: ProjectName | None = None
