"""What users ask for when they run an inference service: the request bodies of docs/API.md
"Services" as msgspec structs.

A service is a long-running Deployment of identical replicas behind a ClusterIP Service, each
replica admitted by Kueue on its own against the compute pool's quota. Type and range rules
live in the annotations; the rules msgspec cannot express (quantities, env keys, label keys,
image references, the autoscaling bounds) are checked by
`app.domain.validation.check_service`.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from app.domain.specs import Arguments, Environment, Image, PoolName, Priority, Quantity
from app.domain.text import whole

#: A DNS-1035 label: a Kubernetes Service's name must start with a letter.
SERVICE_NAME_PATTERN = whole("[a-z]([-a-z0-9]*[a-z0-9])?")
#: The most replicas of one service (and the autoscaler's most).
MAX_SERVICE_REPLICAS = 64
#: An HTTP path: starts with `/`, no whitespace or control character.
HTTP_PATH_PATTERN = whole("/[^\\s\\x00-\\x1f\\x7f-\\x9f]*")

ServiceName = Annotated[
    str,
    msgspec.Meta(
        pattern=SERVICE_NAME_PATTERN,
        min_length=1,
        max_length=40,
        description="DNS-1035 label (starts with a letter), at most 40 characters: the "
        "Kubernetes Service of the same name answers at `<name>.<namespace>.svc`",
        examples=["llama-chat"],
    ),
]
ServiceReplicas = Annotated[int, msgspec.Meta(ge=0, le=MAX_SERVICE_REPLICAS)]


class _Body(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=False):
    """Base of every request body: unknown fields are an error."""


class Autoscaling(_Body):
    """A HorizontalPodAutoscaler on the replicas' CPU use. While it is set, the autoscaler owns
    the replica count: aicp never declares `spec.replicas` on the Deployment."""

    max_replicas: Annotated[int, msgspec.Meta(ge=1, le=MAX_SERVICE_REPLICAS, examples=[4])]
    min_replicas: Annotated[int, msgspec.Meta(ge=1, le=MAX_SERVICE_REPLICAS, examples=[1])] = 1
    target_cpu_percent: Annotated[int, msgspec.Meta(ge=1, le=100, examples=[70])] = 70


class ServiceSpec(_Body):
    """An inference service, as submitted, with docs/API.md's defaults filled in."""

    name: ServiceName
    compute_pool: PoolName
    image: Image
    command: Arguments = []
    args: Arguments = []
    env: Environment = {}
    accelerators: Annotated[int, msgspec.Meta(ge=0, le=64, description="per replica")] = 0
    cpu: Annotated[Quantity, msgspec.Meta(description="per replica")] = "1"
    memory: Annotated[Quantity, msgspec.Meta(description="per replica")] = "1Gi"
    replicas: Annotated[
        ServiceReplicas,
        msgspec.Meta(
            description="how many copies serve; 0 scales the service to zero. With "
            "`autoscaling` the autoscaler sets the count and this is ignored",
        ),
    ] = 1
    port: Annotated[
        int,
        msgspec.Meta(ge=1, le=65535, description="the container port the Service sends traffic to"),
    ] = 8000
    readiness_path: Annotated[
        str,
        msgspec.Meta(
            pattern=HTTP_PATH_PATTERN,
            max_length=1024,
            description="HTTP path answered with 2xx once a replica can take traffic",
            examples=["/healthz"],
        ),
    ] = "/healthz"
    autoscaling: Autoscaling | None = None
    priority: Priority = "normal"
    labels: Annotated[dict[str, str], msgspec.Meta(max_length=16)] = {}

    @property
    def pods(self) -> int:
        """What the pool and node checks count as one request: a single replica, since every
        replica is admitted on its own (a service larger than its pool waits, it is not
        refused)."""
        return 1


class ServiceScale(_Body):
    """A new replica count (`PATCH`): a new generation with only `replicas` changed."""

    replicas: ServiceReplicas
