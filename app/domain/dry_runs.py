"""What a dry run answers (`?dry_run=true` on a create or replace): the object as the same
request would store it, the status it would answer, and what it would change.

Like Kubernetes' server-side dry run, the request runs every check the real one runs and is
then rolled back; `changes` lists each field the write would change, by its dotted path in
the object (`spec.image`, `quota.cpu`), with the stored value (`before`, null on a create)
and the new one (`after`). An empty list is a write that changes nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from app.domain.planning.what_if import AdmissionForecast
from app.domain.pool_resources import PoolResource
from app.domain.resources import Binding, Project, TokenCreated
from app.domain.service_resources import ServiceResource
from app.domain.workload_resources import WorkloadResource


class Change(msgspec.Struct, kw_only=True):
    """One field a write would change: its path in the object, the value stored, the new one."""

    field: Annotated[str, msgspec.Meta(examples=["spec.image"])]
    before: Annotated[Any, msgspec.Meta(description="null when nothing is stored (a create)")]
    after: Any


_STATUS = msgspec.Meta(
    description="the status the same request without dry_run answers (a binding: 201 created, "
    "200 replaced)",
    examples=[202],
)
_CHANGES = msgspec.Meta(description="every field the write would change; empty when none")


class WorkloadDryRun(msgspec.Struct, kw_only=True):
    """A dry run of a workload create or replace: nothing was written."""

    dry_run: bool = True
    status_code: Annotated[int, _STATUS]
    object: WorkloadResource
    changes: Annotated[list[Change], _CHANGES]
    admission: Annotated[
        AdmissionForecast | None,
        msgspec.Meta(
            description="what Kueue would do with it now: admit it, preempt for it, or queue "
            "it (position and estimated start); an estimate, not a reservation"
        ),
    ] = None


class ServiceDryRun(msgspec.Struct, kw_only=True):
    """A dry run of a service create, replace or scale: nothing was written."""

    dry_run: bool = True
    status_code: Annotated[int, _STATUS]
    object: ServiceResource
    changes: Annotated[list[Change], _CHANGES]


class PoolDryRun(msgspec.Struct, kw_only=True):
    """A dry run of a compute pool create or quota change: nothing was written."""

    dry_run: bool = True
    status_code: Annotated[int, _STATUS]
    object: PoolResource
    changes: Annotated[list[Change], _CHANGES]


class ProjectDryRun(msgspec.Struct, kw_only=True):
    """A dry run of a project create or limits change: nothing was written."""

    dry_run: bool = True
    status_code: Annotated[int, _STATUS]
    object: Project
    changes: Annotated[list[Change], _CHANGES]


class BindingDryRun(msgspec.Struct, kw_only=True):
    """A dry run of an accelerator binding create or replace: nothing was written."""

    dry_run: bool = True
    status_code: Annotated[int, _STATUS]
    object: Binding
    changes: Annotated[list[Change], _CHANGES]


class TokenDryRun(msgspec.Struct, kw_only=True):
    """A dry run of a token create: nothing was written and no secret exists (`token` null)."""

    dry_run: bool = True
    status_code: Annotated[int, _STATUS]
    object: TokenCreated
    changes: Annotated[list[Change], _CHANGES]


#: The fields of each kind a client writes; the rest (ids, times, generation, status) the
#: server keeps. A field ending in `.*` is a struct whose fields are compared one by one; any
#: other is compared whole (a mapping of labels or env is one value: its keys may hold dots).
WRITTEN_FIELDS: dict[type, tuple[str, ...]] = {
    WorkloadDryRun: ("spec.*",),
    ServiceDryRun: ("spec.*",),
    PoolDryRun: ("accelerator_class", "quota.*"),
    ProjectDryRun: ("display_name", "labels", "limits.*"),
    BindingDryRun: ("resource_name", "flavor", "node_labels", "tolerations", "description"),
    TokenDryRun: ("name", "role", "expires_at"),
}


def changes_between(before: Any, after: Any, fields: tuple[str, ...]) -> list[Change]:
    """Each of `fields` that differs between the stored object (None: nothing stored) and the
    new one, by dotted path (`spec.image`)."""
    old = msgspec.to_builtins(before) if before is not None else {}
    new = msgspec.to_builtins(after)
    found: list[Change] = []
    for field in fields:
        name = field.removesuffix(".*")
        was, now = old.get(name), new.get(name)
        if field.endswith(".*") and (isinstance(was, dict) or isinstance(now, dict)):
            was_fields = was if isinstance(was, dict) else {}
            now_fields = now if isinstance(now, dict) else {}
            for key in sorted(was_fields.keys() | now_fields.keys()):
                _compare(f"{name}.{key}", was_fields.get(key), now_fields.get(key), found)
        else:
            _compare(name, was, now, found)
    return found


def _compare(path: str, old: Any, new: Any, found: list[Change]) -> None:
    if old != new:
        found.append(Change(field=path, before=old, after=new))
