"""The comparison server of the side-by-side benchmark: aicp's submit and read, written the way
control planes usually are — FastAPI, Pydantic v2 models, SQLAlchemy 2's async ORM on asyncpg.

It serves the same two routes on the same schema (aicp's migrations, applied by the benchmark)
and does the same logical work per request:

- `POST /api/v1/projects/{project}/workloads`: bearer-token lookup (SHA-256 digest joined to
  its project, revoked and expired tokens refused), role check (editor), strict body validation
  (unknown fields and wrong types refused, the same limits as aicp), the pool read under
  `FOR KEY SHARE` and the capacity check (replicas x request against the pool's quota), the
  workload row and its `Accepted` event, a `NOTIFY` on `aicp_work`, commit; 202 with the
  workload.
- `GET /api/v1/projects/{project}/workloads/{name}`: token lookup, then the row; 200.

One session (one pooled connection, one transaction) per request, through FastAPI's dependency
injection, 10 connections like aicp's default. Errors answer `{"detail": ...}` as FastAPI does.

    DATABASE_URL=postgresql://postgres:postgres@127.0.0.1:5432/db \\
        .venv/bin/python loadtest/comparison_server.py --port 8090
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import re
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Annotated, Any, Literal

import uvicorn
from fastapi import Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import ForeignKey, func, select, text
from sqlalchemy.dialects.postgresql import BYTEA, JSONB
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ROLE_RANK = {"viewer": 1, "editor": 2, "admin": 3}
ACCEPTED_REASON = "Accepted; waiting for the controller to create the Job."


# ---- ORM models on aicp's tables (only the columns these routes use) ----


class Base(DeclarativeBase):
    pass


class Project(Base):
    __tablename__ = "projects"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    name: Mapped[str]


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    project_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("projects.id"))
    role: Mapped[str]
    secret_sha256: Mapped[bytes] = mapped_column(BYTEA)
    expires_at: Mapped[dt.datetime | None]
    revoked_at: Mapped[dt.datetime | None]
    project: Mapped[Project] = relationship(lazy="joined", innerjoin=True)


class ComputePool(Base):
    __tablename__ = "compute_pools"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    project_id: Mapped[uuid.UUID]
    name: Mapped[str]
    accelerator_class: Mapped[str]
    spec: Mapped[dict[str, Any]] = mapped_column(JSONB)
    deletion_requested_at: Mapped[dt.datetime | None]


class Workload(Base):
    __tablename__ = "workloads"
    __mapper_args__ = {"eager_defaults": True}  # server defaults come back in RETURNING

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    project_id: Mapped[uuid.UUID]
    pool_id: Mapped[uuid.UUID]
    name: Mapped[str]
    spec: Mapped[dict[str, Any]] = mapped_column(JSONB)
    generation: Mapped[int] = mapped_column(server_default=text("1"))
    observed_generation: Mapped[int] = mapped_column(server_default=text("0"))
    state: Mapped[str] = mapped_column(server_default=text("'PENDING'"))
    state_reason: Mapped[str | None]
    created_at: Mapped[dt.datetime] = mapped_column(server_default=func.clock_timestamp())
    updated_at: Mapped[dt.datetime] = mapped_column(server_default=func.now())
    created_by: Mapped[str]


class Event(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[uuid.UUID | None]
    kind: Mapped[str]
    resource_id: Mapped[uuid.UUID]
    resource_name: Mapped[str]
    type: Mapped[str]
    reason: Mapped[str | None]
    message: Mapped[str | None]
    generation: Mapped[int | None]
    actor: Mapped[str]


# ---- Pydantic models: the request body and the answer ----

Name = Annotated[str, Field(pattern=NAME, min_length=1, max_length=63)]
Quantity = Annotated[str, Field(min_length=1, max_length=64)]
Arg = Annotated[str, Field(max_length=4096)]


class WorkloadSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: Name
    compute_pool: Annotated[str, Field(pattern=NAME, min_length=1, max_length=30)]
    image: Annotated[str, Field(pattern=r"^\S+$", min_length=1, max_length=512)]
    command: Annotated[list[Arg], Field(max_length=64)] = []
    args: Annotated[list[Arg], Field(max_length=64)] = []
    env: Annotated[dict[str, Annotated[str, Field(max_length=32768)]], Field(max_length=64)] = {}
    accelerators: Annotated[int, Field(ge=0, le=64)] = 0
    cpu: Quantity = "1"
    memory: Quantity = "1Gi"
    replicas: Annotated[int, Field(ge=1, le=64)] = 1
    max_runtime_seconds: Annotated[int, Field(ge=60, le=30 * 86400)] = 86400
    retries: Annotated[int, Field(ge=0, le=10)] = 0
    priority: Literal["low", "normal", "high"] = "normal"
    labels: Annotated[dict[str, str], Field(max_length=16)] = {}


class WorkloadStatus(BaseModel):
    state: str
    reason: str | None
    observed_generation: int


class WorkloadOut(BaseModel):
    name: str
    project: str
    compute_pool: str
    uid: uuid.UUID
    generation: int
    spec: WorkloadSpec
    created_at: dt.datetime
    updated_at: dt.datetime
    created_by: str
    status: WorkloadStatus

    @classmethod
    def of(cls, row: Workload, project: str) -> WorkloadOut:
        return cls(
            name=row.name,
            project=project,
            compute_pool=row.spec["compute_pool"],
            uid=row.id,
            generation=row.generation,
            spec=WorkloadSpec.model_validate(row.spec, strict=False),
            created_at=row.created_at,
            updated_at=row.updated_at,
            created_by=row.created_by,
            status=WorkloadStatus(
                state=row.state,
                reason=row.state_reason,
                observed_generation=row.observed_generation,
            ),
        )


# ---- Quantities (the capacity check) ----

_SUFFIX = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")


def quantity(value: str, field: str) -> Decimal:
    match = _QUANTITY.match(value)
    if match is None:
        raise HTTPException(422, f"{field}: {value!r} is not a Kubernetes quantity")
    return Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""]


# ---- The application ----

engine = create_async_engine(
    os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1/postgres").replace(
        "postgresql://", "postgresql+asyncpg://", 1
    ),
    pool_size=10,
    max_overflow=0,
)
Session = async_sessionmaker(engine, expire_on_commit=False)
app = FastAPI(title="comparison stack")


async def session() -> AsyncIterator[AsyncSession]:
    async with Session() as s:
        yield s


class Caller(BaseModel):
    actor: str
    role: str
    project_id: uuid.UUID
    project: str


async def caller(request: Request, db: Annotated[AsyncSession, Depends(session)]) -> Caller:
    scheme, _, secret = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secret:
        raise HTTPException(401, "Send Authorization: Bearer <token>.")
    digest = hashlib.sha256(secret.encode()).digest()
    token = await db.scalar(select(ApiToken).where(ApiToken.secret_sha256 == digest))
    if token is None or token.revoked_at is not None:
        raise HTTPException(401, "The token is not valid.")
    if token.expires_at is not None and token.expires_at <= dt.datetime.now(dt.UTC):
        raise HTTPException(401, "The token has expired.")
    if token.project.name != request.path_params.get("project"):
        raise HTTPException(404, "Project not found.")
    return Caller(
        actor=f"token:{token.id}",
        role=token.role,
        project_id=token.project_id,
        project=token.project.name,
    )


DbDep = Annotated[AsyncSession, Depends(session)]
CallerDep = Annotated[Caller, Depends(caller)]


@app.post("/api/v1/projects/{project}/workloads", status_code=202)
async def create_workload(spec: WorkloadSpec, who: CallerDep, db: DbDep) -> WorkloadOut:
    if ROLE_RANK[who.role] < ROLE_RANK["editor"]:
        raise HTTPException(403, "This operation requires the editor role.")
    pool = await db.scalar(
        select(ComputePool)
        .where(ComputePool.project_id == who.project_id, ComputePool.name == spec.compute_pool)
        .with_for_update(key_share=True)
    )
    if pool is None or pool.deletion_requested_at is not None:
        raise HTTPException(422, f"compute_pool: {spec.compute_pool!r} does not exist")
    quota = pool.spec["quota"]
    for field, wanted, have in (
        ("accelerators", Decimal(spec.accelerators), Decimal(quota["accelerators"])),
        ("cpu", quantity(spec.cpu, "cpu"), quantity(quota["cpu"], "quota.cpu")),
        ("memory", quantity(spec.memory, "memory"), quantity(quota["memory"], "quota.memory")),
    ):
        if wanted * spec.replicas > have:
            raise HTTPException(422, f"{field}: exceeds the pool's capacity")
    workload = Workload(
        id=uuid.uuid4(),
        project_id=who.project_id,
        pool_id=pool.id,
        name=spec.name,
        spec=spec.model_dump(),
        state_reason=ACCEPTED_REASON,
        created_by=who.actor,
    )
    db.add(workload)
    db.add(
        Event(
            project_id=who.project_id,
            kind="workload",
            resource_id=workload.id,
            resource_name=spec.name,
            type="Accepted",
            reason="Created",
            message=f"Workload {spec.name} accepted at generation 1 in compute pool "
            f"{spec.compute_pool}.",
            generation=1,
            actor=who.actor,
        )
    )
    try:
        await db.flush()
    except IntegrityError:
        raise HTTPException(409, f"Workload {spec.name!r} already exists.") from None
    await db.execute(select(func.pg_notify("aicp_work", f"workload:{workload.id}")))
    await db.commit()
    return WorkloadOut.of(workload, who.project)


@app.get("/api/v1/projects/{project}/workloads/{name}")
async def get_workload(name: str, who: CallerDep, db: DbDep) -> WorkloadOut:
    row = await db.scalar(
        select(Workload).where(Workload.project_id == who.project_id, Workload.name == name)
    )
    if row is None:
        raise HTTPException(404, f"Workload {name!r} not found.")
    return WorkloadOut.of(row, who.project)


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def main() -> None:
    parser = argparse.ArgumentParser(description="FastAPI + SQLAlchemy comparison server")
    parser.add_argument("--port", type=int, default=8090)
    args = parser.parse_args()
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
