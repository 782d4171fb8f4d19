"""``/api/v1/projects/{project}/tokens``: project API tokens (project admin or platform admin).

Lineage: a project token creates tokens only of its own role or lower (else 403), never one
that outlives it (else 422 on ``expires_in_days``), and never one that never expires (403:
only the platform admin may); the new token records its minter, and revoking a token revokes
every token it minted, recursively. A project holds at most ``AICP_TOKENS_PER_PROJECT`` live
tokens (409 ``token-limit-reached``). A person signed in through OpenID Connect (a project admin
by their groups) follows the same role and expiry rules; their tokens descend from no token.
"""

import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from litestar import Request, Response, delete, get, post
from litestar.params import FromPath

from app.api.auth import PLATFORM_ADMIN, Caller, requires
from app.api.deps import CallerDep, DbDep
from app.api.docs import CREATE, READ, json_body, problems, success
from app.api.dry_runs import DryRun, answer, create_dry
from app.api.idempotency import Created, IdempotencyKey, respond_once
from app.api.paging import DEFAULT_LIMIT, CursorParam, Limit, PagingDep
from app.domain.dry_runs import TokenDryRun
from app.domain.errors import FieldError, Forbidden, NotFound, ValidationFailed
from app.domain.resources import TokenCreated, TokenList
from app.domain.specs import TokenCreate
from app.domain.states import Role
from app.store import tokens
from app.store.db import Connection

if TYPE_CHECKING:
    from app.store.token_cache import TokenCache

TOKEN_BODY = json_body("A CI token", {"name": "ci", "role": "editor", "expires_in_days": 90})
TOKENS_PER_PROJECT_KEY = "tokens_per_project"


def check_lineage(caller: Caller, data: TokenCreate) -> tokens.Minter | None:
    """The minter of the token `caller` asks for, once the request keeps the lineage rules
    (module docstring); None for the platform admin, who may mint any token."""
    if caller.is_admin:
        return None
    assert caller.role is not None
    asked = Role(data.role)
    if asked.rank > caller.role.rank:
        raise Forbidden(
            asked.value,
            f"A token creates tokens of its own role or lower: this one is {caller.role.value} "
            f"and cannot create a {asked.value} token.",
        )
    if data.expires_in_days is None:
        raise Forbidden(
            PLATFORM_ADMIN,
            "Only the platform admin creates tokens that never expire; give expires_in_days.",
        )
    if caller.token_id is None:
        # A person (OpenID Connect): the token is no descendant of another, and the person's
        # short-lived access token does not bound its life.
        return None
    if caller.expires_at is not None:
        left = caller.expires_at - datetime.now(UTC)
        if timedelta(days=data.expires_in_days) > left:
            most = left.days
            allowed = f"at most {most}" if most >= 1 else "impossible: it expires within a day"
            raise ValidationFailed(
                [
                    FieldError(
                        "expires_in_days",
                        "a token cannot outlive the token that creates it, which expires at "
                        f"{caller.expires_at.isoformat(timespec='seconds')} ({allowed})",
                    )
                ]
            )
    return tokens.Minter(caller.token_id, caller.expires_at)


def _without_secret(created: TokenCreated) -> TokenCreated:
    return msgspec.structs.replace(created, token=None)


@post(
    "/projects/{project:str}/tokens",
    opt=requires(Role.ADMIN),
    status_code=201,
    summary="Create a project token",
    description="Project admin or platform admin. The `token` secret appears only in this "
    "response (an Idempotency-Key replay answers it as null); aicp keeps its SHA-256 only. "
    "A project token creates tokens of its own role or lower (else 403), that expire no later "
    "than itself (else 422 on `expires_in_days`); only the platform admin creates tokens that "
    "never expire (else 403). At most `AICP_TOKENS_PER_PROJECT` live tokens per project "
    "(409 token-limit-reached). `dry_run=true`: 200 with the token it would create (`token` "
    "null: no secret is made), nothing written.",
    responses={
        200: success(TokenDryRun, "Dry run: the token the request would create"),
        201: success(TokenCreated, "Created"),
        **problems(*CREATE),
    },
    tags=["tokens"],
)
async def create_token(
    request: Request[Any, Any, Any],
    data: Annotated[TokenCreate, TOKEN_BODY],
    caller: CallerDep,
    db: DbDep,
    idempotency_key_header: IdempotencyKey = None,
    dry_run: DryRun = False,
) -> Response[Any]:
    project = caller.require_project()
    minter = check_lineage(caller, data)
    max_live: int = request.app.state[TOKENS_PER_PROJECT_KEY]

    async def create(conn: Connection) -> Created:
        created = await tokens.create(
            conn,
            project_id=project.id,
            name=data.name,
            role=data.role,
            expires_in_days=data.expires_in_days,
            actor=caller.actor,
            minter=minter,
            max_live=max_live,
        )
        return Created(created, None, "token", created.id)

    if dry_run:
        made = await create_dry(request, db, create)
        return answer(TokenDryRun, _without_secret(made.resource), None, 201)
    return await respond_once(
        request, db, caller, status=201, create=create, redact=_without_secret
    )


@get(
    "/projects/{project:str}/tokens",
    opt=requires(Role.ADMIN),
    summary="List project tokens",
    description="Without secrets; revoked and expired tokens are listed with their times.",
    responses=problems(*READ, 403),
    tags=["tokens"],
)
async def list_tokens(
    caller: CallerDep,
    db: DbDep,
    paging: PagingDep,
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
) -> TokenList:
    project_id = caller.require_project().id
    page = paging.list("tokens", project_id)
    async with db.connection() as conn:
        items, position = await tokens.page(
            conn, project_id=project_id, after=page.after(cursor), limit=limit
        )
    return TokenList(items=items, next_cursor=page.next(position))


@delete(
    "/projects/{project:str}/tokens/{token_id:str}",
    opt=requires(Role.ADMIN),
    status_code=204,
    summary="Revoke a project token",
    description="Revokes the token and every token it created, recursively, in one "
    "transaction. Takes effect from the next request on the replica that answers, and on the "
    "others within milliseconds (the database notifies them). Revoking twice is fine.",
    responses=problems(401, 403, 404, 503),
    tags=["tokens"],
)
async def revoke_token(
    token_id: FromPath[str], caller: CallerDep, db: DbDep, request: Request[Any, Any, Any]
) -> None:
    try:
        parsed = uuid.UUID(token_id)
    except ValueError as exc:
        raise NotFound("No such token in this project.") from exc
    async with db.transaction() as conn:
        await tokens.revoke(
            conn, project_id=caller.require_project().id, token_id=parsed, actor=caller.actor
        )
    # Committed: this replica forgets its cached tokens before answering, so the next request
    # here is refused whatever the notification's delay (the others drop theirs on hearing it).
    cache: TokenCache | None = request.app.state.get("token_cache")
    if cache is not None:
        cache.drop_all()


ROUTES = [create_token, list_tokens, revoke_token]
