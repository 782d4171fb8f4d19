"""Request-time check that the cluster objects a create would render are free or aicp's own.

A project's namespace, a pool's queues and a binding's ResourceFlavor have names known before
the reconciler runs; when an object of that name exists and is someone else's, the create is
refused with 409 `object-not-owned` naming it and its manager, instead of a resource that
could only go DEGRADED. Without a cluster client (tests of the HTTP layer alone), or when the
cluster does not answer, the request goes on: the reconciler checks again before every write.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from app.domain.errors import ObjectNotOwned
from app.domain.ownership import foreign_owner
from app.kube.apply import get
from app.kube.errors import KubeError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from litestar import Request

    from app.kube.resources import Resource

log = logging.getLogger("aicp.api")


async def refuse_foreign(
    request: Request[Any, Any, Any],
    resource: Resource,
    namespace: str | None,
    name: str,
    expected: Mapping[str, str],
) -> None:
    """Raise `ObjectNotOwned` when `resource` `name` exists and is not aicp's for `expected`
    (`app.domain.ownership.foreign_owner`)."""
    kube = request.app.state.get("kube")
    if kube is None:
        return
    try:
        found = await get(kube, resource, namespace, name)
    except KubeError as exc:
        log.info("ownership of %s %s not checked at request time: %s", resource.kind, name, exc)
        return
    manager = foreign_owner(found, expected)
    if manager is not None:
        raise ObjectNotOwned(resource.kind, name, manager)
