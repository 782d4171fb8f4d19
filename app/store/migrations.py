"""Numbered SQL migrations from ``sql/migrations/``, applied in order at startup.

Any number of processes may start at once against one database: each takes the same
session-level advisory lock before looking at ``schema_migrations``, so exactly one applies
what is missing while the others wait and then find nothing left to do. Each migration and
its bookkeeping row commit in one transaction. Migrations are never edited once landed.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.store.queries import QUERIES

if TYPE_CHECKING:
    from app.store.db import Database

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "sql" / "migrations"

# Arbitrary but fixed: every aicp process agrees on it ("aicp" in ASCII).
MIGRATION_LOCK_KEY = 0x61696370

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """All migration files, ordered by version; a file not named ``NNNN_name.sql`` is an error."""
    found: list[Migration] = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE.match(path.name)
        if match is None:
            raise ValueError(f"migration file {path.name!r} is not named NNNN_name.sql")
        found.append(Migration(int(match.group(1)), match.group(2), path.read_text("utf-8")))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ValueError("two migration files share a version number")
    return found


async def migrate(db: Database, directory: Path = MIGRATIONS_DIR) -> list[int]:
    """Apply every migration not yet recorded; return the versions applied by this call."""
    migrations = discover(directory)
    applied: list[int] = []
    async with db.connection() as conn:
        # Unbounded while migrating: a peer's migrations may hold the lock for a while.
        await conn.execute(QUERIES["migrations_unbounded"])
        # Session-level lock: held across the per-migration transactions below.
        await conn.execute(QUERIES["migrations_lock"], MIGRATION_LOCK_KEY)
        try:
            await conn.execute(QUERIES["migrations_create_table"])
            done = {row["version"] for row in await conn.fetch(QUERIES["migrations_applied"])}
            for migration in migrations:
                if migration.version in done:
                    continue
                async with conn.transaction():
                    await conn.execute(migration.sql)
                    await conn.execute(
                        QUERIES["migrations_record"], migration.version, migration.name
                    )
                log.info("applied migration %04d_%s", migration.version, migration.name)
                applied.append(migration.version)
        finally:
            await conn.execute(QUERIES["migrations_unlock"], MIGRATION_LOCK_KEY)
            await conn.execute(QUERIES["migrations_bounded"])
    return applied
