"""PostgreSQL adapter: the asyncpg pool, migrations, named queries and one module per table.

Store functions take an ``asyncpg`` connection that the caller got from
``Database.transaction()``, so a request's writes, its event row and its doorbell commit
together. Library errors leave this package as ``app.domain.errors`` exceptions.
"""
