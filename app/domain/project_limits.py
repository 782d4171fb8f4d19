"""A project's ceilings on what its compute pools hold together (docs/API.md, Projects).

The platform admin sets them (`ProjectLimits`); no limits, or a null ceiling, is no ceiling
(today's behaviour, so projects made before limits existed keep working). Every pool of the
project counts, a pool being deleted too: its Kueue ClusterQueue lends quota until it is gone.
The sum of every project's limits may exceed the cluster: limits are ceilings, not
reservations, and oversubscribing the cluster across projects is the platform admin's choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import msgspec

from app.domain.quantity import format_bytes, format_cpu, parse_quantity
from app.domain.specs import ProjectLimits, Quota

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

_ZERO = Decimal(0)


@dataclass(frozen=True)
class Holding:
    """What one pool's quota holds, in numbers."""

    accelerator_class: str
    accelerators: int
    cpu: Decimal
    memory: Decimal

    @classmethod
    def of(cls, accelerator_class: str, quota: Mapping[str, Any] | Quota) -> Holding:
        """From a Quota, or from a pool row's stored quota (the same three keys)."""
        if isinstance(quota, Quota):
            quota = {"accelerators": quota.accelerators, "cpu": quota.cpu, "memory": quota.memory}
        return cls(
            accelerator_class,
            int(quota["accelerators"]),
            parse_quantity(str(quota["cpu"])),
            parse_quantity(str(quota["memory"])),
        )


class Overrun(msgspec.Struct, frozen=True, kw_only=True):
    """One ceiling a change would pass: `limit` names it (`accelerators.h100-80g`, `cpu`,
    `memory`); `allocated` is what the project's other pools hold, `requested` what the pool
    asks for (for a lowered limit: what every pool holds, and nothing)."""

    limit: str
    allowed: str
    allocated: str
    requested: str


def limits_from(stored: Mapping[str, Any] | None) -> ProjectLimits | None:
    """The limits as the projects table keeps them (jsonb, NULL: none)."""
    return None if stored is None else msgspec.convert(stored, ProjectLimits)


def limits_to_json(limits: ProjectLimits | None) -> dict[str, Any] | None:
    return None if limits is None else msgspec.to_builtins(limits)


def overruns(
    limits: ProjectLimits | None, others: Iterable[Holding], new: Holding | None
) -> list[Overrun]:
    """Every ceiling of `limits` that the pools `others` plus `new` together pass."""
    if limits is None:
        return []
    held = list(others)
    found: list[Overrun] = []
    if limits.accelerators is not None:
        classes = {h.accelerator_class for h in held if h.accelerators}
        if new is not None:
            classes = {new.accelerator_class} if new.accelerators else set()
        for name in sorted(classes):
            allowed = limits.accelerators.get(name, 0)
            allocated = sum(h.accelerators for h in held if h.accelerator_class == name)
            requested = new.accelerators if new is not None else 0
            if allocated + requested > allowed:
                found.append(
                    Overrun(
                        limit=f"accelerators.{name}",
                        allowed=str(allowed),
                        allocated=str(allocated),
                        requested=str(requested),
                    )
                )
    for name, ceiling, fmt in (
        ("cpu", limits.cpu, format_cpu),
        ("memory", limits.memory, format_bytes),
    ):
        if ceiling is None:
            continue
        allowed_value = parse_quantity(ceiling)
        allocated_value = sum((getattr(h, name) for h in held), _ZERO)
        requested_value = getattr(new, name) if new is not None else _ZERO
        if allocated_value + requested_value > allowed_value:
            found.append(
                Overrun(
                    limit=name,
                    allowed=ceiling,
                    allocated=fmt(allocated_value),
                    requested=fmt(requested_value),
                )
            )
    return found


def describe(limits: ProjectLimits | None) -> str:
    """The limits in words, for events: `accelerators h100-80g=16, cpu 256, memory 2Ti`."""
    if limits is None:
        return "no limits"
    parts = []
    if limits.accelerators is not None:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(limits.accelerators.items()))
        parts.append(f"accelerators {shown or 'none'}")
    if limits.cpu is not None:
        parts.append(f"cpu {limits.cpu}")
    if limits.memory is not None:
        parts.append(f"memory {limits.memory}")
    return ", ".join(parts) or "no limits"
