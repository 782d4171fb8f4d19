"""What the API answers: response bodies for projects, tokens and accelerator bindings.

These are the shapes of docs/API.md, and (through Litestar) the OpenAPI schemas. Times are
timezone-aware UTC datetimes, encoded as RFC 3339 strings.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from app.domain.specs import ProjectLimits, Toleration
from app.domain.states import ResourceState


class Status(msgspec.Struct, kw_only=True):
    """Where a reconciled resource is, and why, in whole sentences."""

    state: Annotated[ResourceState, msgspec.Meta(examples=[ResourceState.PENDING])]
    reason: Annotated[
        str | None,
        msgspec.Meta(
            description="A whole sentence explaining the state",
            examples=["Accepted; waiting for namespace aicp-research to be created."],
        ),
    ]
    observed_generation: Annotated[
        int,
        msgspec.Meta(
            description="The generation the state describes; below `generation` while converging"
        ),
    ]
    updated_at: datetime


class Project(msgspec.Struct, kw_only=True):
    """A tenant: its workloads run in their own namespace, `aicp-<name>`."""

    name: Annotated[str, msgspec.Meta(examples=["research"])]
    uid: Annotated[str, msgspec.Meta(examples=["0b7c3e0e-4f1c-4a4e-9d4b-6f1f8f7f2a10"])]
    display_name: str | None
    labels: dict[str, str]
    namespace: Annotated[str, msgspec.Meta(examples=["aicp-research"])]
    generation: int
    created_at: datetime
    updated_at: datetime
    created_by: Annotated[str, msgspec.Meta(examples=["admin", "token:0b7c3e0e-..."])]
    limits: Annotated[
        ProjectLimits | None,
        msgspec.Meta(description="ceilings on the project's pools together; null: none"),
    ] = None
    status: Status


class ProjectList(msgspec.Struct, kw_only=True):
    """A page of projects, newest first; pass `next_cursor` as `cursor` for the next page."""

    items: list[Project]
    next_cursor: str | None


class TokenCreated(msgspec.Struct, kw_only=True):
    """A new project token. `token` is shown only in this response: store it now.

    An idempotent replay of the create answers the same body with `token` null: the secret is
    kept only as a SHA-256 digest.
    """

    id: str
    name: str
    role: Annotated[str, msgspec.Meta(examples=["editor"])]
    token: Annotated[str | None, msgspec.Meta(examples=["aicp_3q2...Zk"])]
    created_at: datetime
    expires_at: datetime | None


class Token(msgspec.Struct, kw_only=True):
    """A project token, without its secret."""

    id: str
    name: str
    role: Annotated[str, msgspec.Meta(examples=["viewer"])]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    created_by: str
    minted_by: Annotated[
        str | None,
        msgspec.Meta(
            description="the token that created this one (revoking it revokes this one too); "
            "null: the platform admin"
        ),
    ] = None


class TokenList(msgspec.Struct, kw_only=True):
    """A page of tokens, newest first."""

    items: list[Token]
    next_cursor: str | None


class Binding(msgspec.Struct, kw_only=True):
    """An accelerator class mapped to a provider resource, a Kueue flavor and node labels."""

    accelerator_class: Annotated[str, msgspec.Meta(examples=["h100-80g"])]
    resource_name: Annotated[str, msgspec.Meta(examples=["nvidia.com/gpu"])]
    flavor: Annotated[str, msgspec.Meta(examples=["h100-80g"])]
    node_labels: dict[str, str]
    tolerations: list[Toleration]
    description: str | None
    created_at: datetime
    updated_at: datetime


class BindingList(msgspec.Struct, kw_only=True):
    """A page of accelerator bindings, newest first."""

    items: list[Binding]
    next_cursor: str | None


class FieldProblem(msgspec.Struct, kw_only=True):
    """One invalid field of a `validation-error` problem."""

    field: Annotated[
        str,
        msgspec.Meta(
            description="Where: a body field (`quota.cpu`, `env.PATH`), a query parameter or a "
            "header",
            examples=["dispaly_name"],
        ),
    ]
    message: Annotated[
        str, msgspec.Meta(description="What is wrong with it", examples=["unknown field"])
    ]


class Problem(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An RFC 9457 problem document; extension members depend on `type`."""

    type: Annotated[str, msgspec.Meta(examples=["https://aicp.dev/problems/validation-error"])]
    title: Annotated[str, msgspec.Meta(examples=["Request body is invalid"])]
    status: Annotated[int, msgspec.Meta(examples=[422])]
    detail: Annotated[str, msgspec.Meta(examples=["1 field is invalid"])]
    instance: Annotated[str | None, msgspec.Meta(examples=["/api/v1/projects"])] = None
    request_id: str | None = None
    errors: list[FieldProblem] | None = None
    required_role: str | None = None
    referenced_by: list[str] | None = None
    current_generation: int | None = None
    compute_pool: str | None = None
    accelerator_class: str | None = None
    requested: dict[str, str] | None = None
    pool_capacity: dict[str, str] | None = None


class RoleBinding(msgspec.Struct, kw_only=True):
    """Members of `group` have `role` (in `project`; none for platform-admin)."""

    id: str
    group: str
    role: Annotated[str, msgspec.Meta(examples=["editor"])]
    project: str | None
    created_at: datetime
    created_by: str


class RoleBindingList(msgspec.Struct, kw_only=True):
    """A page of role bindings, newest first."""

    items: list[RoleBinding]
    next_cursor: str | None


class ProjectGrant(msgspec.Struct, kw_only=True):
    """A role the caller has in one project, and the groups that give it."""

    project: str
    role: str
    groups: list[str]


class WhoAmI(msgspec.Struct, kw_only=True):
    """Who the bearer token names and what it may do."""

    kind: Annotated[
        str,
        msgspec.Meta(description="`admin` (the platform admin token), `token` or `oidc`"),
    ]
    actor: Annotated[str, msgspec.Meta(description="what events and audit rows record")]
    platform_admin: bool
    roles: list[ProjectGrant]
    subject: str | None = None
    username: str | None = None
    issuer: str | None = None
    groups: list[str] = []
    admin_groups: Annotated[
        list[str], msgspec.Meta(description="the groups that make the caller platform admin")
    ] = []
    expires_at: datetime | None = None


class SignOnInfo(msgspec.Struct, kw_only=True):
    """How to sign a person in through OpenID Connect."""

    issuer: str
    audience: str
    cli_client_id: str
