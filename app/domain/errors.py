"""The one error hierarchy of aicp.

Every failure a caller can cause or observe is one of these; adapters wrap library errors
(asyncpg, kubernetes_asyncio) into them with ``raise ... from exc``, and exactly one HTTP
exception handler (``app.api.problems``) turns them into RFC 9457 problems. Each class carries
its problem ``slug`` and HTTP ``status``; its docstring is the default ``detail``.

::

    AicpError                                   500 internal-error
    ├── ValidationFailed                        422 validation-error   errors=[{field, message}]
    │   ├── ExceedsPoolCapacity                 422 exceeds-pool-capacity
    │   ├── ExceedsNodeCapacity                 422 exceeds-node-capacity  node_capacity
    │   ├── ExceedsProjectLimit                 422 exceeds-project-limit  project, exceeded
    │   ├── IdempotencyKeyReused                422 idempotency-key-reused
    │   └── UnstorableText                      422 validation-error   (NUL in a value)
    ├── MalformedJson                           400 malformed-json
    ├── Unauthorized                            401 unauthorized
    ├── Forbidden                               403 forbidden          required_role
    ├── CsrfRejected                            403 csrf-rejected      (dashboard session)
    ├── NotFound                                404 not-found
    ├── Conflict                                409
    │   ├── AlreadyExists                       409 already-exists
    │   ├── BeingDeleted                        409 being-deleted
    │   ├── InUse                               409 in-use             referenced_by
    │   ├── TokenLimitReached                   409 token-limit-reached limit
    │   ├── LimitBelowAllocation                409 limit-below-allocation project, exceeded
    │   └── ObjectNotOwned                      409 object-not-owned   object, manager
    ├── ResumeExpired                           410 resume-expired     (Last-Event-ID too old)
    ├── CreatedResourceGone                     410 created-resource-gone (Idempotency-Key replay)
    ├── GenerationMismatch                      412 generation-mismatch current_generation
    ├── PayloadTooLarge                         413 payload-too-large
    ├── UnsupportedMediaType                    415 unsupported-media-type
    ├── TooManyStreams                          429 too-many-streams   limit (Retry-After)
    ├── TooManyRequests                         429 too-many-requests  limit (Retry-After)
    └── ServiceUnavailable                      503 service-unavailable (Retry-After)
        └── StoreUnavailable                        the database did not answer
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import msgspec


class FieldError(msgspec.Struct, frozen=True):
    """One invalid field: ``field`` is a dotted path into the body or a query parameter name."""

    field: str
    message: str


class AicpError(Exception):
    """An internal error occurred."""

    slug: ClassVar[str] = "internal-error"
    status: ClassVar[int] = 500
    title: ClassVar[str] = "Internal error"

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail or (type(self).__doc__ or self.title).strip().splitlines()[0]
        super().__init__(self.detail)

    def extensions(self) -> dict[str, Any]:
        """Extension members of the problem document, beyond type/title/status/detail."""
        return {}

    def problem_title(self) -> str:
        """The problem document's ``title``: the class's, unless an instance knows better."""
        return self.title


class ValidationFailed(AicpError):
    """Request is invalid."""

    slug = "validation-error"
    status = 422
    title = "Request body is invalid"
    #: Where the invalid fields are, for the title: what the user has to fix.
    TITLES: ClassVar[dict[str, str]] = {
        "body": "Request body is invalid",
        "query": "Query parameters are invalid",
        "header": "Request headers are invalid",
        "path": "Path parameters are invalid",
        "request": "Request is invalid",
    }

    def __init__(
        self, errors: list[FieldError], detail: str | None = None, *, location: str = "body"
    ) -> None:
        self.errors = errors
        self.location = location if location in self.TITLES else "request"
        count = len(errors)
        super().__init__(
            detail or (f"{count} field is invalid" if count == 1 else f"{count} fields are invalid")
        )

    def extensions(self) -> dict[str, Any]:
        return {"errors": [{"field": e.field, "message": e.message} for e in self.errors]}

    def problem_title(self) -> str:
        if type(self).title != ValidationFailed.title:  # a subclass with a title of its own
            return self.title
        return self.TITLES[self.location]


class ExceedsPoolCapacity(ValidationFailed):
    """The workload can never fit its compute pool."""

    slug = "exceeds-pool-capacity"
    title = "Workload exceeds the compute pool's capacity"

    def __init__(
        self,
        *,
        compute_pool: str,
        accelerator_class: str,
        requested: dict[str, str],
        pool_capacity: dict[str, str],
        errors: list[FieldError],
        detail: str | None = None,
    ) -> None:
        self.compute_pool = compute_pool
        self.accelerator_class = accelerator_class
        self.requested = requested
        self.pool_capacity = pool_capacity
        super().__init__(errors, detail or type(self).__doc__)

    def extensions(self) -> dict[str, Any]:
        return {
            **super().extensions(),
            "compute_pool": self.compute_pool,
            "accelerator_class": self.accelerator_class,
            "requested": self.requested,
            "pool_capacity": self.pool_capacity,
        }


class ExceedsNodeCapacity(ValidationFailed):
    """One pod of the workload is larger than any node of its accelerator class."""

    slug = "exceeds-node-capacity"
    title = "Workload pod exceeds every node of its accelerator class"

    def __init__(
        self,
        *,
        compute_pool: str,
        accelerator_class: str,
        requested: dict[str, str],
        node_capacity: dict[str, str],
        largest_nodes: dict[str, str],
        errors: list[FieldError],
        detail: str | None = None,
    ) -> None:
        self.compute_pool = compute_pool
        self.accelerator_class = accelerator_class
        self.requested = requested
        self.node_capacity = node_capacity
        self.largest_nodes = largest_nodes
        super().__init__(errors, detail or type(self).__doc__)

    def extensions(self) -> dict[str, Any]:
        return {
            **super().extensions(),
            "compute_pool": self.compute_pool,
            "accelerator_class": self.accelerator_class,
            "requested": self.requested,
            "node_capacity": self.node_capacity,
            "largest_nodes": self.largest_nodes,
        }


def _exceeded(overruns: list[Any]) -> list[dict[str, str]]:
    return [
        {"limit": o.limit, "allowed": o.allowed, "allocated": o.allocated, "requested": o.requested}
        for o in overruns
    ]


class ExceedsProjectLimit(ValidationFailed):
    """The project's compute pools together would hold more than its limits allow."""

    slug = "exceeds-project-limit"
    title = "Compute pool exceeds the project's limits"

    def __init__(self, *, project: str, overruns: list[Any]) -> None:
        self.project = project
        self.overruns = overruns
        sentences = [
            f"project {project} may hold {o.limit} {o.allowed} in its pools; its other pools "
            f"hold {o.allocated} and this pool asks for {o.requested}"
            for o in overruns
        ]
        detail = "; ".join(sentences)
        super().__init__(
            [
                FieldError(f"quota.{o.limit.split('.')[0]}", sentence)
                for o, sentence in zip(overruns, sentences, strict=True)
            ],
            detail[:1].upper() + detail[1:] + ".",
        )

    def extensions(self) -> dict[str, Any]:
        return {
            **super().extensions(),
            "project": self.project,
            "exceeded": _exceeded(self.overruns),
        }


class IdempotencyKeyReused(ValidationFailed):
    """This Idempotency-Key was already used with a different request body."""

    slug = "idempotency-key-reused"
    title = "Idempotency key reused with a different request"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(
            [FieldError("Idempotency-Key", "already used with a different request body")],
            detail or type(self).__doc__,
        )


class MalformedJson(AicpError):
    """The request body is not valid JSON."""

    slug = "malformed-json"
    status = 400
    title = "Malformed JSON"


class Unauthorized(AicpError):
    """A valid bearer token is required."""

    slug = "unauthorized"
    status = 401
    title = "Unauthorized"


class Forbidden(AicpError):
    """The token's role does not allow this operation."""

    slug = "forbidden"
    status = 403
    title = "Forbidden"

    def __init__(self, required_role: str, detail: str | None = None) -> None:
        self.required_role = required_role
        super().__init__(detail or f"This operation requires the {required_role} role.")

    def extensions(self) -> dict[str, Any]:
        return {"required_role": self.required_role}


class CsrfRejected(AicpError):
    """A dashboard session's write must carry its X-CSRF-Token header."""

    slug = "csrf-rejected"
    status = 403
    title = "CSRF token missing or wrong"


class NotFound(AicpError):
    """No such resource is visible to this token."""

    slug = "not-found"
    status = 404
    title = "Not found"


class Conflict(AicpError):
    """The request conflicts with the current state of the resource."""

    status = 409
    slug = "conflict"
    title = "Conflict"


class AlreadyExists(Conflict):
    """A resource with this name already exists."""

    slug = "already-exists"
    title = "Already exists"


class BeingDeleted(Conflict):
    """A resource with this name is being deleted; retry once its deletion has finished."""

    slug = "being-deleted"
    title = "Being deleted"


class InUse(Conflict):
    """The resource is still referenced and cannot be deleted."""

    slug = "in-use"
    title = "In use"

    def __init__(self, referenced_by: list[str], detail: str | None = None) -> None:
        self.referenced_by = referenced_by
        super().__init__(detail or f"Still referenced by {', '.join(referenced_by)}.")

    def extensions(self) -> dict[str, Any]:
        return {"referenced_by": self.referenced_by}


class TokenLimitReached(Conflict):
    """The project has as many live tokens as it may; revoke one first."""

    slug = "token-limit-reached"
    title = "Token limit reached"

    def __init__(self, limit: int, detail: str | None = None) -> None:
        self.limit = limit
        super().__init__(detail)

    def extensions(self) -> dict[str, Any]:
        return {"limit": self.limit}


class LimitBelowAllocation(Conflict):
    """The project's compute pools already hold more than the new limits allow."""

    slug = "limit-below-allocation"
    title = "Limit below what the pools hold"

    def __init__(self, *, project: str, overruns: list[Any]) -> None:
        self.project = project
        self.overruns = overruns
        held = "; ".join(f"{o.limit} {o.allowed} (its pools hold {o.allocated})" for o in overruns)
        super().__init__(
            f"Project {project}'s pools hold more than the new limits allow: {held}. Shrink or "
            "delete pools first, then lower the limits."
        )

    def extensions(self) -> dict[str, Any]:
        return {"project": self.project, "exceeded": _exceeded(self.overruns)}


class ObjectNotOwned(Conflict):
    """A cluster object aicp would create exists and is someone else's: it is not taken over."""

    slug = "object-not-owned"
    title = "Cluster object not owned by aicp"

    def __init__(self, kind: str, name: str, manager: str) -> None:
        self.object = f"{kind}/{name}"
        self.manager = manager
        super().__init__(
            f"{kind} {name} exists and is managed by {manager}; aicp will not take it over. "
            "Choose another name, or remove that object first."
        )

    def extensions(self) -> dict[str, Any]:
        return {"object": self.object, "manager": self.manager}


class GenerationMismatch(AicpError):
    """The resource changed since you read it (If-Match does not match its generation)."""

    slug = "generation-mismatch"
    status = 412
    title = "Generation mismatch"

    def __init__(self, current_generation: int, detail: str | None = None) -> None:
        self.current_generation = current_generation
        super().__init__(
            detail or f"If-Match does not match the current generation {current_generation}."
        )

    def extensions(self) -> dict[str, Any]:
        return {"current_generation": self.current_generation}


def check_generation(expected: int | None, current: int) -> None:
    """412 generation-mismatch when the client read a different generation than stored.

    Call it with the generation of the row locked (``FOR UPDATE``) in the write's transaction,
    so no concurrent update can slip between the check and the write.
    """
    if expected is not None and expected != current:
        raise GenerationMismatch(current)


class PayloadTooLarge(AicpError):
    """The request body is larger than 256 KiB."""

    slug = "payload-too-large"
    status = 413
    title = "Payload too large"


class UnsupportedMediaType(AicpError):
    """The request body must be JSON, sent with Content-Type: application/json."""

    slug = "unsupported-media-type"
    status = 415
    title = "Unsupported media type"


class ResumeExpired(AicpError):
    """The stream cannot resume from that Last-Event-ID: the changes after it are no longer
    kept. Open the stream again without Last-Event-ID."""

    slug = "resume-expired"
    status = 410
    title = "Stream history expired"


class CreatedResourceGone(AicpError):
    """The resource this Idempotency-Key created has since been deleted; send the request with
    a new Idempotency-Key to create it again."""

    slug = "created-resource-gone"
    status = 410
    title = "Created resource gone"


class TooManyStreams(AicpError):
    """Too many streams are open; close one or retry later."""

    slug = "too-many-streams"
    status = 429
    title = "Too many open streams"
    retry_after_seconds: ClassVar[int] = 5

    def __init__(self, limit: int, detail: str) -> None:
        super().__init__(detail)
        self.limit = limit

    def extensions(self) -> dict[str, Any]:
        return {"limit": self.limit}


class TooManyRequests(AicpError):
    """Too many requests; retry after the time Retry-After says."""

    slug = "too-many-requests"
    status = 429
    title = "Too many requests"

    def __init__(self, limit: str, retry_after: float, detail: str) -> None:
        super().__init__(detail)
        self.limit = limit
        # Whole seconds, at least 1: a client that waits this long finds room again.
        self.retry_after_seconds = max(1, math.ceil(retry_after))

    def extensions(self) -> dict[str, Any]:
        return {"limit": self.limit}


class ServiceUnavailable(AicpError):
    """The service cannot answer right now; retry shortly."""

    slug = "service-unavailable"
    status = 503
    title = "Service unavailable"
    retry_after_seconds: int = 1  # an instance may say more (the identity provider's wait)


class StoreUnavailable(ServiceUnavailable):
    """The database is unreachable; retry shortly."""


class UnstorableText(ValidationFailed):
    """A path, query or body value contains the NUL character, which cannot be stored."""

    def __init__(self) -> None:
        super().__init__(
            [FieldError("request", "text must not contain the NUL character (\\u0000)")],
            detail=(type(self).__doc__ or "").strip(),
            location="request",
        )


def name_taken(noun: str, name: str, *, being_deleted: bool) -> Conflict:
    """The 409 for a create whose name is already held: by a resource still being deleted
    (`being-deleted`), or by a live one (`already-exists`)."""
    if being_deleted:
        return BeingDeleted(f"{noun} {name!r} is being deleted; create it again once it is gone.")
    return AlreadyExists(f"{noun} {name!r} already exists.")
