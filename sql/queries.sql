-- Every SQL statement aicp runs, by name (loaded once by app/store/queries.py).
-- Parameters are positional ($1, $2, ...).
-- List queries page newest first by (created_at, id): their last three parameters are always
-- (cursor_created_at, cursor_id, limit); the first page passes ('infinity', any id).

-- ===== section: schema migrations =====

-- name: migrations_unbounded
-- Migrations may wait for a peer's migrations and run long: lift this session's lock and
-- statement bounds until migrations_bounded puts them back.
SELECT set_config('lock_timeout', '0', false), set_config('statement_timeout', '0', false);

-- name: migrations_bounded
-- Back to the bounds the session was opened with (its connection's server settings).
SELECT set_config(name, reset_val, false) FROM pg_settings
WHERE name IN ('lock_timeout', 'statement_timeout');

-- name: migrations_lock
-- Session-level: held across the migration transactions, released by migrations_unlock.
SELECT pg_advisory_lock($1);

-- name: migrations_unlock
SELECT pg_advisory_unlock($1);

-- name: migrations_create_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    int PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migrations_applied
SELECT version FROM schema_migrations ORDER BY version;

-- name: migrations_record
INSERT INTO schema_migrations (version, name) VALUES ($1, $2);

-- ===== section: health =====

-- name: ping
SELECT 1;

-- ===== section: audit and doorbell =====

-- name: insert_event
-- $10 once_key: NULL for an ordinary event; otherwise the fact the event records, which is
-- recorded at most once per resource (a repeat is skipped, see migration 0005).
INSERT INTO events (project_id, kind, resource_id, resource_name, type, reason, message,
                    generation, actor, once_key)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (kind, resource_id, once_key) WHERE once_key IS NOT NULL DO NOTHING;

-- name: ring_doorbell
-- NOTIFY only wakes a reconciler; the payload is '<kind>:<uuid>' and never carries state.
SELECT pg_notify('aicp_work', $1);

-- ===== section: projects =====

-- name: insert_project
-- Nothing is returned when the name is taken: the caller then reads the holder to tell
-- already-exists from being-deleted. A concurrent insert of the same name waits for the
-- first transaction and then conflicts, so exactly one create wins.
-- One clock reading for both times, so a new row never shows updated_at before created_at.
WITH clock AS (SELECT clock_timestamp() AS at)
INSERT INTO projects (id, name, display_name, labels, spec, state_reason, created_by,
                      created_at, updated_at, limits)
SELECT $1::uuid, $2::text, $3::text, $4::jsonb, $5::jsonb, $6::text, $7::text, clock.at, clock.at,
       $8::jsonb
FROM clock
ON CONFLICT (name) DO NOTHING
RETURNING id, name, display_name, labels, generation, observed_generation, state, state_reason,
          deletion_requested_at, created_at, updated_at, created_by, limits;

-- name: project_by_name
SELECT id, name, display_name, labels, generation, observed_generation, state, state_reason,
       deletion_requested_at, created_at, updated_at, created_by, limits
FROM projects
WHERE name = $1;

-- name: project_id_by_name
SELECT id FROM projects WHERE name = $1;

-- name: list_projects
SELECT id, name, display_name, labels, generation, observed_generation, state, state_reason,
       deletion_requested_at, created_at, updated_at, created_by, limits
FROM projects
WHERE (created_at, id) < ($1, $2)
ORDER BY created_at DESC, id DESC
LIMIT $3;

-- name: list_projects_by_id
-- A project token sees exactly its own project, a person those their groups are bound to.
SELECT id, name, display_name, labels, generation, observed_generation, state, state_reason,
       deletion_requested_at, created_at, updated_at, created_by, limits
FROM projects
WHERE id = ANY($1::uuid[]) AND (created_at, id) < ($2, $3)
ORDER BY created_at DESC, id DESC
LIMIT $4;

-- name: lock_project_for_delete
-- FOR UPDATE conflicts with the FOR KEY SHARE lock that inserting a pool or workload takes on
-- its project row, so the reference check below sees every child committed before it.
SELECT generation FROM projects WHERE id = $1 FOR UPDATE;

-- name: lock_live_project
-- Creates of pools and workloads call this first: FOR SHARE waits for a concurrent deletion
-- request to commit and then re-checks the row, so no child is created in a DELETING project.
SELECT deletion_requested_at IS NULL AS live FROM projects WHERE id = $1 FOR SHARE;

-- name: lock_project_for_limits
-- A limits change: FOR NO KEY UPDATE waits for pool creates and quota changes under way (they
-- hold FOR SHARE, lock_live_project) and makes later ones wait for this transaction.
SELECT generation, deletion_requested_at IS NULL AS live, spec
FROM projects WHERE id = $1 FOR NO KEY UPDATE;

-- name: set_project_limits
-- A new generation, so the project's step observes it (it re-applies the namespace).
UPDATE projects
SET limits = $2::jsonb, spec = $3::jsonb, generation = generation + 1, updated_at = now()
WHERE id = $1
RETURNING id, name, display_name, labels, generation, observed_generation, state, state_reason,
          deletion_requested_at, created_at, updated_at, created_by, limits;

-- name: project_limits_for_pools
-- A pool create or quota change, under the project's FOR SHARE lock (lock_live_project).
SELECT limits FROM projects WHERE id = $1;

-- name: lock_project_quota
-- Serializes pool creates and quota changes of one project while it has limits: the second
-- of two at once counts the first's pool. Released at commit.
SELECT pg_advisory_xact_lock(hashtextextended('aicp-quota:' || $1::uuid::text, 0));

-- name: project_pool_quotas
-- Every pool of the project but $2 (the one being changed; NIL for a new one), those being
-- deleted too: their ClusterQueues hold quota until they are gone.
SELECT accelerator_class, spec -> 'quota' AS quota
FROM compute_pools WHERE project_id = $1 AND id <> $2;

-- name: project_references
(SELECT 'compute-pool/' || name AS ref FROM compute_pools WHERE project_id = $1
 ORDER BY name LIMIT 20)
UNION ALL
(SELECT 'workload/' || name AS ref FROM workloads WHERE project_id = $1
 ORDER BY name LIMIT 20)
UNION ALL
(SELECT 'service/' || name AS ref FROM services WHERE project_id = $1
 ORDER BY name LIMIT 20);

-- name: request_project_deletion
-- Soft delete: the row stays readable (DELETING) until the reconciler observes cleanup.
-- Returns nothing when deletion was already requested.
UPDATE projects
SET deletion_requested_at = now(), state = 'DELETING', state_reason = $2, updated_at = now()
WHERE id = $1 AND deletion_requested_at IS NULL
RETURNING id, name, display_name, labels, generation, observed_generation, state, state_reason,
          deletion_requested_at, created_at, updated_at, created_by, limits;

-- ===== section: tokens =====

-- name: authenticate_token
-- One indexed lookup, for a token the replica's cache does not hold (app/store/token_cache.py:
-- dropped on every change of api_tokens, which notifies aicp_tokens, migration 0008).
SELECT t.id, t.project_id, p.name AS project_name, t.role, t.expires_at,
       t.revoked_at IS NOT NULL AS revoked,
       t.expires_at IS NOT NULL AND t.expires_at <= now() AS expired
FROM api_tokens t
JOIN projects p ON p.id = t.project_id
WHERE t.secret_sha256 = $1;

-- name: insert_token
-- $8 minted_by (NULL: the platform admin); $9 the minter's expiry, which the new token's never
-- passes (the API refuses a longer life first; LEAST keeps the rule against clock skew).
INSERT INTO api_tokens (id, project_id, name, role, secret_sha256, expires_at, created_by,
                        minted_by)
VALUES ($1, $2, $3, $4, $5,
        CASE WHEN $6::int IS NULL THEN $9::timestamptz
             ELSE LEAST(now() + make_interval(days => $6::int), $9::timestamptz) END,
        $7, $8)
ON CONFLICT (project_id, name) DO NOTHING
RETURNING id, name, role, created_at, expires_at, revoked_at, created_by, minted_by;

-- name: lock_project_tokens
-- Serializes token creates of one project (the live-token cap), without a row lock on the
-- project that would queue workload creates behind them. Released at commit.
SELECT pg_advisory_xact_lock(hashtextextended('aicp-tokens:' || $1::uuid::text, 0));

-- name: live_tokens_of_project
SELECT count(*) FROM api_tokens
WHERE project_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now());

-- name: list_tokens
SELECT id, name, role, created_at, expires_at, revoked_at, created_by, minted_by
FROM api_tokens
WHERE project_id = $1 AND (created_at, id) < ($2, $3)
ORDER BY created_at DESC, id DESC
LIMIT $4;

-- name: revoke_token
-- The token and every token it minted, recursively (through already revoked ones too), in one
-- statement. Returns the tokens this call revoked (none when all already were); `root` marks
-- the one named.
WITH RECURSIVE tree AS (
    SELECT id FROM api_tokens WHERE id = $1 AND project_id = $2
    UNION
    SELECT child.id FROM api_tokens child JOIN tree ON child.minted_by = tree.id
)
UPDATE api_tokens SET revoked_at = now()
WHERE id IN (SELECT id FROM tree) AND revoked_at IS NULL
RETURNING id, name, id = $1 AS root;

-- name: token_exists
SELECT EXISTS (SELECT 1 FROM api_tokens WHERE id = $1 AND project_id = $2);

-- name: notify_token_revoked
-- Every replica closes the revoked tokens' open streams at once (app/streams/changefeed.py); one
-- notification per token, its id the payload. Revocations are rare: the NOTIFY commit lock
-- costs nothing here.
SELECT pg_notify('aicp_tokens', id::text) FROM unnest($1::uuid[]) AS id;

-- ===== section: accelerator bindings =====

-- name: upsert_binding
-- xmax = 0 only on a freshly inserted row: it tells 201 (created) from 200 (replaced).
-- One clock reading for both times on insert; a replace moves only updated_at.
WITH clock AS (SELECT clock_timestamp() AS at)
INSERT INTO accelerator_bindings (accelerator_class, resource_name, flavor, node_labels,
                                  tolerations, description, created_at, updated_at)
SELECT $1::text, $2::text, $3::text, $4::jsonb, $5::jsonb, $6::text, clock.at, clock.at
FROM clock
ON CONFLICT (accelerator_class) DO UPDATE
SET resource_name = EXCLUDED.resource_name,
    flavor = EXCLUDED.flavor,
    node_labels = EXCLUDED.node_labels,
    tolerations = EXCLUDED.tolerations,
    description = EXCLUDED.description,
    updated_at = EXCLUDED.updated_at
RETURNING accelerator_class, resource_name, flavor, node_labels, tolerations, description,
          created_at, updated_at, (xmax = 0) AS inserted;

-- name: binding_lock_flavor
-- The lock the pool steps take around a ResourceFlavor (steps_lock_flavor), taken by a binding
-- write too: two bindings naming one flavor are checked against each other one at a time.
SELECT pg_advisory_xact_lock(hashtextextended('aicp-flavor:' || $1::text, 0));

-- name: binding_flavor_sharers
-- Other accelerator classes whose binding names flavor $1 (what that flavor must look like).
SELECT accelerator_class, node_labels, tolerations
FROM accelerator_bindings
WHERE flavor = $1 AND accelerator_class <> $2
ORDER BY accelerator_class;

-- name: binding_for_update
-- The binding as it is, locked until the replacement commits.
SELECT resource_name, flavor, node_labels, tolerations
FROM accelerator_bindings
WHERE accelerator_class = $1
FOR UPDATE;

-- name: binding_unfinished_workloads
-- Workloads not finished in pools of class $1: their pods were (or will be) admitted with the
-- binding's flavor, node labels and resource name as they are now.
SELECT 'workload/' || p.name || '/' || w.name AS ref
FROM workloads w
JOIN compute_pools c ON c.id = w.pool_id
JOIN projects p ON p.id = w.project_id
WHERE c.accelerator_class = $1 AND w.state NOT IN ('SUCCEEDED', 'FAILED')
ORDER BY p.name, w.name
LIMIT 20;

-- name: binding_by_class
SELECT accelerator_class, resource_name, flavor, node_labels, tolerations, description,
       created_at, updated_at
FROM accelerator_bindings
WHERE accelerator_class = $1;

-- name: list_bindings
SELECT accelerator_class, resource_name, flavor, node_labels, tolerations, description,
       created_at, updated_at
FROM accelerator_bindings
WHERE (created_at, accelerator_class) < ($1, $2)
ORDER BY created_at DESC, accelerator_class DESC
LIMIT $3;

-- name: lock_binding_for_delete
-- FOR UPDATE conflicts with the FOR KEY SHARE lock a pool insert takes through its foreign
-- key, so binding_references sees every pool committed before the delete.
SELECT accelerator_class FROM accelerator_bindings WHERE accelerator_class = $1 FOR UPDATE;

-- name: binding_references
SELECT 'compute-pool/' || p.name || '/' || c.name AS ref
FROM compute_pools c
JOIN projects p ON p.id = c.project_id
WHERE c.accelerator_class = $1
ORDER BY p.name, c.name
LIMIT 20;

-- name: delete_binding
DELETE FROM accelerator_bindings WHERE accelerator_class = $1;

-- name: ring_pools_of_binding
-- A replaced binding changes what its pools render (flavor, node labels): wake each of them.
SELECT pg_notify('aicp_work', 'pool:' || id::text) FROM compute_pools
WHERE accelerator_class = $1 AND deletion_requested_at IS NULL;

-- ===== section: idempotency keys =====

-- name: claim_idempotency_key
-- Returns a row only when this transaction now owns (identity, key): a new key, or one whose
-- last use is older than 24 h. A concurrent request with the same key blocks on the primary
-- key until this transaction ends, then finds the committed response (or, after a rollback,
-- claims the key itself).
INSERT INTO idempotency_keys AS k (identity, key, request_sha256, status, body, location)
VALUES ($1, $2, $3, 0, '', NULL)
ON CONFLICT (identity, key) DO UPDATE
SET request_sha256 = EXCLUDED.request_sha256, status = 0, body = '', location = NULL,
    created_at = now()
WHERE k.created_at < now() - interval '24 hours'
RETURNING k.identity;

-- name: idempotent_response
SELECT request_sha256, status, body, location, resource_kind, resource_id
FROM idempotency_keys
WHERE identity = $1 AND key = $2;

-- name: store_idempotent_response
UPDATE idempotency_keys
SET status = $3, body = $4, location = $5, resource_kind = $6, resource_id = $7
WHERE identity = $1 AND key = $2;

-- name: idempotent_resource_state
-- What became of the resource a key created: 'live', 'deleting' (deletion requested; for a
-- token: revoked), or NULL when it is gone.
SELECT CASE $1::text
    WHEN 'project' THEN (SELECT CASE WHEN deletion_requested_at IS NULL THEN 'live'
                                     ELSE 'deleting' END FROM projects WHERE id = $2)
    WHEN 'pool' THEN (SELECT CASE WHEN deletion_requested_at IS NULL THEN 'live'
                                  ELSE 'deleting' END FROM compute_pools WHERE id = $2)
    WHEN 'workload' THEN (SELECT CASE WHEN deletion_requested_at IS NULL THEN 'live'
                                      ELSE 'deleting' END FROM workloads WHERE id = $2)
    WHEN 'service' THEN (SELECT CASE WHEN deletion_requested_at IS NULL THEN 'live'
                                     ELSE 'deleting' END FROM services WHERE id = $2)
    WHEN 'token' THEN (SELECT CASE WHEN revoked_at IS NULL THEN 'live'
                                   ELSE 'deleting' END FROM api_tokens WHERE id = $2)
END AS state;

-- name: purge_idempotency_keys
DELETE FROM idempotency_keys WHERE created_at < now() - interval '24 hours';

-- ===== section: retention =====
-- app/store/retention.py: old events, tombstones and start estimates go in bounded batches
-- (0004, 0023).

-- name: purge_events_before
-- Of the $2 oldest events (by id: the primary key, in the order events were written), delete
-- those older than $1. Reads at most $2 index entries, so a purge with nothing to do is cheap.
DELETE FROM events
WHERE id = ANY (ARRAY (SELECT id FROM events ORDER BY id LIMIT $2))
  AND at < $1;

-- name: purge_tombstones_before
-- Up to $2 tombstones older than $1, oldest first (index tombstones_by_age).
DELETE FROM tombstones t
WHERE (t.kind, t.resource_id) IN (
    SELECT kind, resource_id FROM tombstones WHERE deleted_at < $1 ORDER BY deleted_at LIMIT $2
);

-- name: purge_forecasts_before
-- Up to $2 estimates made before $1, oldest first (index workload_forecasts_by_age), that are
-- either scored before $1 or will never be: an estimate of a generation still waiting for its
-- admission stays until it is scored, however old.
DELETE FROM workload_forecasts
WHERE id IN (
    SELECT f.id FROM workload_forecasts f
    WHERE f.made_at < $1
      AND (f.started_at < $1
           OR (f.started_at IS NULL AND NOT EXISTS (
                   SELECT 1 FROM workloads w
                   WHERE w.id = f.workload_id AND w.generation = f.generation
                     AND w.state IN ('PENDING', 'QUEUED'))))
    ORDER BY f.made_at LIMIT $2
);

-- ===== section: pools and workloads =====
-- app/store/pools.py and app/store/workloads.py. Pool reads carry usage counted from the
-- workloads that reference the pool and are not being deleted (index workloads_by_pool).
--
-- Lock order that keeps "DELETE pool -> 409 in-use" honest: a workload create or move reads
-- its pool FOR KEY SHARE (the same lock its foreign key takes anyway, so concurrent creates do
-- not block each other); a pool delete locks the row FOR UPDATE, which waits for those creates
-- to commit, and only then lists the workloads still using the pool, in a new statement that
-- sees them. A create that comes after the delete re-reads the row and finds it deleting.

-- name: pool_insert
-- Unless the name is taken in the project (the constraint decides: of concurrent creates of
-- one name exactly one row is inserted). A missing binding is a foreign-key violation.
-- created_at and updated_at are one clock reading, so a new pool never looks updated before
-- it was created.
WITH clock AS (SELECT clock_timestamp() AS at)
INSERT INTO compute_pools (id, project_id, name, accelerator_class, spec, state_reason,
                           created_by, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, (SELECT at FROM clock), (SELECT at FROM clock))
ON CONFLICT (project_id, name) DO NOTHING
RETURNING *, 0::bigint AS accelerators_admitted, 0::bigint AS workloads_admitted,
          0::bigint AS workloads_pending;

-- name: pool_by_name
SELECT p.*, u.accelerators_admitted, u.workloads_admitted, u.workloads_pending
FROM compute_pools p
CROSS JOIN LATERAL (
    SELECT coalesce(sum((w.spec->>'accelerators')::bigint * (w.spec->>'replicas')::bigint)
                    FILTER (WHERE w.state IN ('ADMITTED', 'RUNNING')), 0)::bigint
               AS accelerators_admitted,
           count(*) FILTER (WHERE w.state IN ('ADMITTED', 'RUNNING')) AS workloads_admitted,
           count(*) FILTER (WHERE w.state IN ('PENDING', 'QUEUED')) AS workloads_pending
    FROM workloads w
    WHERE w.pool_id = p.id AND w.deletion_requested_at IS NULL
      AND w.state IN ('PENDING', 'QUEUED', 'ADMITTED', 'RUNNING')
) u
WHERE p.project_id = $1 AND p.name = $2;

-- name: list_pools
SELECT p.*, u.accelerators_admitted, u.workloads_admitted, u.workloads_pending
FROM compute_pools p
CROSS JOIN LATERAL (
    SELECT coalesce(sum((w.spec->>'accelerators')::bigint * (w.spec->>'replicas')::bigint)
                    FILTER (WHERE w.state IN ('ADMITTED', 'RUNNING')), 0)::bigint
               AS accelerators_admitted,
           count(*) FILTER (WHERE w.state IN ('ADMITTED', 'RUNNING')) AS workloads_admitted,
           count(*) FILTER (WHERE w.state IN ('PENDING', 'QUEUED')) AS workloads_pending
    FROM workloads w
    WHERE w.pool_id = p.id AND w.deletion_requested_at IS NULL
      AND w.state IN ('PENDING', 'QUEUED', 'ADMITTED', 'RUNNING')
) u
WHERE p.project_id = $1 AND (p.created_at, p.id) < ($2, $3::uuid)
ORDER BY p.created_at DESC, p.id DESC
LIMIT $4;

-- name: pool_for_workload
-- The pool a workload goes into, FOR KEY SHARE (see the lock order above), with its class's
-- binding (not locked; NULLs when there is none) for the node-capacity check.
SELECT c.id, c.accelerator_class, c.spec, c.deletion_requested_at, b.resource_name,
       b.node_labels
FROM compute_pools c
LEFT JOIN accelerator_bindings b ON b.accelerator_class = c.accelerator_class
WHERE c.project_id = $1 AND c.name = $2
FOR KEY SHARE OF c;

-- name: lock_pool_for_update
-- Before a quota change: NO KEY UPDATE does not wait for workload creates.
SELECT id, generation, deletion_requested_at, accelerator_class
FROM compute_pools
WHERE project_id = $1 AND name = $2
FOR NO KEY UPDATE;

-- name: lock_pool_for_delete
-- Before a deletion: FOR UPDATE waits for every workload create holding the key-share lock.
SELECT id, generation, deletion_requested_at
FROM compute_pools
WHERE project_id = $1 AND name = $2
FOR UPDATE;

-- name: pool_update_quota
-- A new generation for the reconciler to converge to.
UPDATE compute_pools
SET spec = jsonb_set(spec, '{quota}', $2::jsonb), generation = generation + 1, updated_at = now()
WHERE id = $1
RETURNING generation;

-- name: pool_users
-- Workloads and services (not being deleted) that keep a pool in use; a bounded sample for
-- the 409.
(SELECT 'workload/' || name AS ref FROM workloads
 WHERE pool_id = $1 AND deletion_requested_at IS NULL
 ORDER BY name
 LIMIT 20)
UNION ALL
(SELECT 'service/' || name AS ref FROM services
 WHERE pool_id = $1 AND deletion_requested_at IS NULL
 ORDER BY name
 LIMIT 20);

-- name: pool_finished_workloads_delete
-- A pool's deletion takes its finished (SUCCEEDED, FAILED) workloads along: each becomes
-- DELETING and, once its Job is gone, a tombstone with its history. Unfinished ones still block.
UPDATE workloads
SET deletion_requested_at = now(), state = 'DELETING', state_reason = $2, updated_at = now()
WHERE pool_id = $1 AND deletion_requested_at IS NULL AND state IN ('SUCCEEDED', 'FAILED')
RETURNING id, name, generation;

-- name: request_pool_deletion
UPDATE compute_pools
SET deletion_requested_at = now(), state = 'DELETING', state_reason = $2, updated_at = now()
WHERE id = $1
RETURNING generation;

-- name: insert_workload
-- Unless the name is taken in the project (constraint-decided, as for pools); with it, its
-- generation-1 event ($8 type, $9 reason, $10 message) in the same round trip.
WITH clock AS (SELECT clock_timestamp() AS at),
inserted AS (
    INSERT INTO workloads (id, project_id, pool_id, name, spec, state_reason, created_by,
                           created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, (SELECT at FROM clock), (SELECT at FROM clock))
    ON CONFLICT (project_id, name) DO NOTHING
    RETURNING *
),
accepted AS (
    INSERT INTO events (project_id, kind, resource_id, resource_name, type, reason, message,
                        generation, actor)
    SELECT project_id, 'workload', id, name, $8, $9, $10, 1, created_by FROM inserted
)
SELECT * FROM inserted;

-- name: workload_by_name
SELECT * FROM workloads WHERE project_id = $1 AND name = $2;

-- name: lock_workload
-- Before a replacement or deletion request.
SELECT * FROM workloads WHERE project_id = $1 AND name = $2 FOR NO KEY UPDATE;

-- name: list_workloads
-- One statement per filter combination, each walking the index in list order on exactly the
-- columns it filters (0004): a generic plan of one statement with optional filters could not.
-- `row_bytes` (the row's text size) lets a page of large specs stop early (app.store.paging).
-- The last filter of each, `name_contains`, is an escaped ILIKE pattern (NULL: any name),
-- checked on the rows the index walk reaches.
SELECT w.*, octet_length(w::text) AS row_bytes FROM workloads w
WHERE project_id = $1
  AND ($2::text IS NULL OR name ILIKE $2 ESCAPE '\')
  AND (created_at, id) < ($3, $4::uuid)
ORDER BY created_at DESC, id DESC
LIMIT $5;

-- name: list_workloads_in_state
SELECT w.*, octet_length(w::text) AS row_bytes FROM workloads w
WHERE project_id = $1 AND state = $2
  AND ($3::text IS NULL OR name ILIKE $3 ESCAPE '\')
  AND (created_at, id) < ($4, $5::uuid)
ORDER BY created_at DESC, id DESC
LIMIT $6;

-- name: pool_id_by_name
SELECT id FROM compute_pools WHERE project_id = $1 AND name = $2;

-- name: list_workloads_in_pool
-- $2 the pool's id (resolved from its name in the project beforehand).
SELECT w.*, octet_length(w::text) AS row_bytes FROM workloads w
WHERE pool_id = $2 AND project_id = $1
  AND ($3::text IS NULL OR name ILIKE $3 ESCAPE '\')
  AND (created_at, id) < ($4, $5::uuid)
ORDER BY created_at DESC, id DESC
LIMIT $6;

-- name: list_workloads_in_pool_in_state
SELECT w.*, octet_length(w::text) AS row_bytes FROM workloads w
WHERE pool_id = $2 AND project_id = $1 AND state = $3
  AND ($4::text IS NULL OR name ILIKE $4 ESCAPE '\')
  AND (created_at, id) < ($5, $6::uuid)
ORDER BY created_at DESC, id DESC
LIMIT $7;

-- name: replace_workload
-- Immutable replacement: the new spec is the next generation, PENDING until the reconciler
-- replaces the Job. `observed` is kept: it names the old Job the reconciler must remove.
UPDATE workloads
SET spec = $2, pool_id = $3, generation = generation + 1, state = 'PENDING',
    state_reason = $4, updated_at = now(), generation_at = clock_timestamp()
WHERE id = $1
RETURNING *;

-- name: request_workload_deletion
UPDATE workloads
SET deletion_requested_at = now(), state = 'DELETING', state_reason = $2, updated_at = now()
WHERE id = $1
RETURNING *;

-- ===== section: services =====
-- app/store/services.py: inference services, written like workloads (one row per service,
-- generation per spec change, soft delete).

-- name: insert_service
-- Unless the name is taken in the project (constraint-decided, as for workloads).
WITH clock AS (SELECT clock_timestamp() AS at)
INSERT INTO services (id, project_id, pool_id, name, spec, state_reason, created_by,
                      created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, (SELECT at FROM clock), (SELECT at FROM clock))
ON CONFLICT (project_id, name) DO NOTHING
RETURNING *;

-- name: service_by_name
SELECT * FROM services WHERE project_id = $1 AND name = $2;

-- name: lock_service
-- Before a replacement, a scale or a deletion request.
SELECT * FROM services WHERE project_id = $1 AND name = $2 FOR NO KEY UPDATE;

-- name: list_services
-- Newest first, in keyset pages; every filter optional: $2 state, $3 pool id, $4 an escaped
-- ILIKE pattern of the name. A project holds few services, so one statement serves them all.
SELECT s.*, octet_length(s::text) AS row_bytes FROM services s
WHERE project_id = $1
  AND ($2::text IS NULL OR state = $2)
  AND ($3::uuid IS NULL OR pool_id = $3)
  AND ($4::text IS NULL OR name ILIKE $4 ESCAPE '\')
  AND (created_at, id) < ($5, $6::uuid)
ORDER BY created_at DESC, id DESC
LIMIT $7;

-- name: replace_service
-- The new spec is the next generation. The state stays as it is (the replicas keep serving)
-- until the reconciler has applied the new generation and observed it.
UPDATE services
SET spec = $2, pool_id = $3, generation = generation + 1, state_reason = $4, updated_at = now()
WHERE id = $1
RETURNING *;

-- name: request_service_deletion
UPDATE services
SET deletion_requested_at = now(), state = 'DELETING', state_reason = $2, updated_at = now()
WHERE id = $1
RETURNING *;

-- ===== end section: services =====

-- ===== section: events =====
-- app/store/events.py: a resource's trail, newest first by id (index events_by_resource).

-- name: resource_events_page
-- With the name of the project token that acted (`token:<id>` actors), by its primary key.
SELECT e.*, t.name AS actor_token_name
FROM events e
LEFT JOIN api_tokens t
  ON t.id = CASE WHEN e.actor ~ '^token:[0-9a-f-]{36}$' THEN substr(e.actor, 7)::uuid END
 AND t.project_id = e.project_id
WHERE e.kind = $1 AND e.resource_id = $2 AND e.id < $3
ORDER BY e.id DESC
LIMIT $4;

-- ===== section: streams =====
-- app/store/changes.py: the change log of workloads and services (migrations 0006, 0025) that
-- the live streams read, and the bookkeeping of who watches.

-- name: changes_after
-- The change feed's one read: up to $2 changes after change_id $1, in order, and the horizon of
-- the snapshot they were read in (xmin: every transaction older is over; xmax: every
-- transaction that can have numbered a change seen missing here is older). Always at least one
-- row: with no change after $1 the change columns are NULL.
SELECT pg_snapshot_xmin(s.snap)::text::bigint AS xmin,
       pg_snapshot_xmax(s.snap)::text::bigint AS xmax,
       c.*
FROM (SELECT pg_current_snapshot() AS snap) s
LEFT JOIN LATERAL (
    SELECT * FROM workload_changes WHERE change_id > $1 ORDER BY change_id LIMIT $2
) c ON true
ORDER BY c.change_id;

-- name: changes_newest
-- The newest change number handed out (where a replica's feed starts; 0 before the first: a
-- sequence not yet called hands out last_value next), and the oldest change still kept (a
-- resume point before it is too old).
SELECT (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END
        FROM workload_changes_change_id_seq) AS newest,
       (SELECT min(change_id) FROM workload_changes) AS oldest;

-- name: changes_of_project
-- Resuming a project's stream of kind $6 ('workload', 'service'): its changes in ($2, $3] (of
-- name $5 only, unless NULL), oldest first, $4 at most (index workload_changes_by_project_kind);
-- `row_bytes` sizes the next read (app.streams.opening).
SELECT c.*, octet_length(c::text) AS row_bytes FROM workload_changes c
WHERE project_id = $1 AND kind = $6 AND change_id > $2 AND change_id <= $3
  AND ($5::text IS NULL OR name = $5)
ORDER BY change_id
LIMIT $4;

-- name: changes_count_of_project
-- How many changes a resume would replay (those of changes_of_project), counted up to $4.
SELECT count(*) FROM (
    SELECT 1 FROM workload_changes
    WHERE project_id = $1 AND kind = $6 AND change_id > $2 AND change_id <= $3
      AND ($5::text IS NULL OR name = $5)
    LIMIT $4
) replayed;

-- name: changes_purge
-- Forget changes older than $1 seconds: everything before the first one that is younger (a
-- walk of the primary key over exactly the rows that go).
DELETE FROM workload_changes
WHERE change_id < coalesce(
    (SELECT change_id FROM workload_changes
     WHERE at >= now() - make_interval(secs => $1::float8)
     ORDER BY change_id LIMIT 1),
    (SELECT max(change_id) + 1 FROM workload_changes));

-- name: watched_now
-- A stream's first events: the project's current resources of kind $9 ('workload' or
-- 'service'; the view reads only that kind's table), optionally one name $2, one state $3,
-- one pool by id $4, names matching the escaped ILIKE pattern $8, each with its newest change
-- number (`change_id`). Oldest first, a page of $7 after ($5, $6); `row_bytes` sizes the next
-- read (app.streams.opening).
SELECT r.*, octet_length(r::text) AS row_bytes FROM watched_now r
WHERE kind = $9 AND project_id = $1
  AND ($2::text IS NULL OR name = $2)
  AND ($3::text IS NULL OR state = $3)
  AND ($4::uuid IS NULL OR pool_id = $4)
  AND ($8::text IS NULL OR name ILIKE $8 ESCAPE '\')
  AND (created_at, id) > ($5, $6::uuid)
ORDER BY created_at, id
LIMIT $7;

-- name: stream_interest_renew
-- Replica $1 has streams open on the projects $2: (re)mark them watched for $3 seconds, drop
-- its other marks, and clear marks left long expired by replicas that are gone.
WITH dropped AS (
    DELETE FROM stream_interest
    WHERE (replica = $1 AND NOT (project_id = ANY ($2::uuid[])))
       OR expires_at < now() - interval '1 hour'
)
INSERT INTO stream_interest (project_id, replica, expires_at)
SELECT p, $1, now() + make_interval(secs => $3::float8) FROM unnest($2::uuid[]) AS p
ON CONFLICT (project_id, replica) DO UPDATE SET expires_at = excluded.expires_at;

-- name: stream_interest_drop
-- Replica $1 closes: its streams are gone.
DELETE FROM stream_interest WHERE replica = $1;

-- name: tokens_still_valid
-- Of the token ids $1 (those with open streams), the ones that still authenticate.
SELECT id FROM api_tokens
WHERE id = ANY ($1::uuid[]) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now());

-- name: projects_still_live
-- Of the project ids $1 (those with open streams), the ones whose deletion was not requested.
SELECT id FROM projects WHERE id = ANY ($1::uuid[]) AND deletion_requested_at IS NULL;

-- ===== section: reconcile steps =====
-- app/store/reconciling.py: what the project, pool and workload steps read and write.
-- Fenced statements follow app/reconcile/fencing.py: $1 owner, $2 epoch, then their own
-- parameters. Status writes answer two questions in one statement: is the lease still ours
-- (`held`; false means drop the resource) and did the row take the write (`written`; false
-- means the row moved on to a newer generation or a deletion, and the step runs again).

-- name: steps_project_load
SELECT id, name, generation, observed_generation, state, state_reason, observed,
       deletion_requested_at
FROM projects
WHERE id = $1;

-- name: steps_pool_load
-- The pool with what rendering needs: its project's name and its accelerator binding.
SELECT c.id, c.project_id, c.name, c.accelerator_class, c.spec, c.generation,
       c.observed_generation, c.state, c.state_reason, c.observed, c.deletion_requested_at,
       p.name AS project_name, p.observed_generation AS project_observed_generation,
       b.resource_name, b.flavor, b.node_labels, b.tolerations, b.description
FROM compute_pools c
JOIN projects p ON p.id = c.project_id
JOIN accelerator_bindings b ON b.accelerator_class = c.accelerator_class
WHERE c.id = $1;

-- name: steps_workload_load
-- The workloads $1 (ids; one, or the many of a batch, app/store/batching.py) with their
-- project's and pool's names, whether both have been reconciled at least once (the namespace
-- and the LocalQueue exist), and the binding's resource name.
SELECT w.id, w.project_id, w.pool_id, w.name, w.spec, w.generation, w.observed_generation,
       w.state, w.state_reason, w.observed, w.deletion_requested_at, w.created_at,
       p.name AS project_name, p.observed_generation AS project_observed_generation,
       c.name AS pool_name, c.observed_generation AS pool_observed_generation,
       b.resource_name AS accelerator_resource
FROM workloads w
JOIN projects p ON p.id = w.project_id
JOIN compute_pools c ON c.id = w.pool_id
JOIN accelerator_bindings b ON b.accelerator_class = c.accelerator_class
WHERE w.id = ANY($1::uuid[]);

-- name: steps_service_load
-- The service with its project's and pool's names, whether both have been reconciled at least
-- once (the namespace and the LocalQueue exist), and the binding's resource name.
SELECT s.id, s.project_id, s.pool_id, s.name, s.spec, s.generation, s.observed_generation,
       s.state, s.state_reason, s.observed, s.deletion_requested_at, s.created_at,
       p.name AS project_name, p.observed_generation AS project_observed_generation,
       c.name AS pool_name, c.observed_generation AS pool_observed_generation,
       b.resource_name AS accelerator_resource
FROM services s
JOIN projects p ON p.id = s.project_id
JOIN compute_pools c ON c.id = s.pool_id
JOIN accelerator_bindings b ON b.accelerator_class = c.accelerator_class
WHERE s.id = $1;

-- name: steps_pool_routes
-- Every pool's ClusterQueue address (project and pool name), for routing informer events.
SELECT c.id, p.name AS project_name, c.name AS pool_name
FROM compute_pools c
JOIN projects p ON p.id = c.project_id;

-- name: steps_project_namespaces
-- Every live project whose namespace has been applied: what the first lists after a start are
-- compared with (a cluster that lost the namespace, e.g. one replaced under this database).
SELECT id, name FROM projects
WHERE observed_generation > 0 AND deletion_requested_at IS NULL;

-- name: steps_live_workload_jobs
-- Every workload reported as having a Job (QUEUED, ADMITTED, RUNNING) with the Job's name, for
-- the same comparison. The NOT IN repeats the partial index workloads_live_by_state's predicate.
SELECT w.id, p.name AS project_name, w.name, w.state,
       w.observed -> 'job' ->> 'name' AS job_name, w.observed -> 'job' ->> 'uid' AS job_uid
FROM workloads w
JOIN projects p ON p.id = w.project_id
WHERE w.state NOT IN ('SUCCEEDED', 'FAILED')
  AND w.state IN ('QUEUED', 'ADMITTED', 'RUNNING')
  AND w.deletion_requested_at IS NULL;

-- name: steps_workloads_still_on_jobs
-- How many of the workloads $1 are still reported as having one of the Jobs $2 (gone from the
-- cluster): QUEUED, ADMITTED or RUNNING with that Job recorded.
SELECT count(*) AS n FROM workloads
WHERE id = ANY($1::uuid[])
  AND state IN ('QUEUED', 'ADMITTED', 'RUNNING')
  AND observed -> 'job' ->> 'uid' = ANY($2::text[]);

-- name: steps_project_set_status
-- $3 id, $4 the generation the status describes, $5 state, $6 reason, $7 observed;
-- the events of the change: $8 project id, $9 name, $10 actor, and one array element
-- per event in $11 types, $12 reasons, $13 messages, $14 once_keys. One statement (its
-- own transaction when run alone): the lease lock holds until the events are in.
WITH
-- the caller's lease, if it is still live now (not just when the transaction began), locked
-- until the transaction ends: a peer's takeover waits, so the check still holds at commit
lease AS (
    SELECT 1 FROM leases l
    WHERE l.kind = 'project' AND l.resource_id = $3 AND l.owner = $1 AND l.epoch = $2
      AND l.expires_at > clock_timestamp()
    FOR SHARE OF l
),
-- the write, only onto the generation it was computed from and never over a deletion
updated AS (
    UPDATE projects p
    SET state = $5, state_reason = $6, observed = $7, observed_generation = $4,
        updated_at = now()
    WHERE p.id = $3 AND p.generation = $4 AND p.deletion_requested_at IS NULL
      AND EXISTS (SELECT 1 FROM lease)
    RETURNING p.id
),
-- its events, only with the write; a repeated once_key is skipped (see insert_event)
recorded AS (
    INSERT INTO events (project_id, kind, resource_id, resource_name, type, reason, message,
                        generation, actor, once_key)
    SELECT $8, 'project', $3, $9, e.type, e.reason, e.message, $4, $10, e.once_key
    FROM unnest($11::text[], $12::text[], $13::text[], $14::text[])
         WITH ORDINALITY AS e(type, reason, message, once_key, n)
    WHERE EXISTS (SELECT 1 FROM updated)
    ORDER BY e.n
    ON CONFLICT (kind, resource_id, once_key) WHERE once_key IS NOT NULL DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM lease) AS held, EXISTS (SELECT 1 FROM updated) AS written;

-- name: steps_pool_set_status
-- $3 id, $4 the generation the status describes, $5 state, $6 reason, $7 observed;
-- the events of the change: $8 project id, $9 name, $10 actor, and one array element
-- per event in $11 types, $12 reasons, $13 messages, $14 once_keys. One statement (its
-- own transaction when run alone): the lease lock holds until the events are in.
WITH
-- the caller's lease, if it is still live now (not just when the transaction began), locked
-- until the transaction ends: a peer's takeover waits, so the check still holds at commit
lease AS (
    SELECT 1 FROM leases l
    WHERE l.kind = 'pool' AND l.resource_id = $3 AND l.owner = $1 AND l.epoch = $2
      AND l.expires_at > clock_timestamp()
    FOR SHARE OF l
),
-- the write, only onto the generation it was computed from and never over a deletion
updated AS (
    UPDATE compute_pools c
    SET state = $5, state_reason = $6, observed = $7, observed_generation = $4,
        updated_at = now()
    WHERE c.id = $3 AND c.generation = $4 AND c.deletion_requested_at IS NULL
      AND EXISTS (SELECT 1 FROM lease)
    RETURNING c.id
),
-- its events, only with the write; a repeated once_key is skipped (see insert_event)
recorded AS (
    INSERT INTO events (project_id, kind, resource_id, resource_name, type, reason, message,
                        generation, actor, once_key)
    SELECT $8, 'pool', $3, $9, e.type, e.reason, e.message, $4, $10, e.once_key
    FROM unnest($11::text[], $12::text[], $13::text[], $14::text[])
         WITH ORDINALITY AS e(type, reason, message, once_key, n)
    WHERE EXISTS (SELECT 1 FROM updated)
    ORDER BY e.n
    ON CONFLICT (kind, resource_id, once_key) WHERE once_key IS NOT NULL DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM lease) AS held, EXISTS (SELECT 1 FROM updated) AS written;

-- name: steps_workload_set_status
-- Status writes of many workloads in one statement (one, or a batch: app/store/batching.py),
-- each exactly as it would be alone. $1 owner, $2 actor; one array element per write in
-- $3 ids, $4 lease epochs, $5 the generation each status describes, $6 states, $7 reasons,
-- $8 observed, $9 project ids, $10 names; one array element per event in $11 the write it
-- belongs to (its position in $3, from 1), $12 types, $13 reasons, $14 messages, $15
-- once_keys. One statement (its own transaction when run alone): the lease locks hold until
-- the events are in. Returns per write, in order, whether its lease was held, whether it was
-- written, and the workload's age by the database clock (lifecycle latency metrics).
WITH
input AS (
    SELECT * FROM unnest($3::uuid[], $4::bigint[], $5::bigint[], $6::text[], $7::text[],
                         $8::jsonb[], $9::uuid[], $10::text[])
         WITH ORDINALITY AS i(id, epoch, generation, state, reason, observed, project_id,
                              name, n)
),
-- each caller's lease, if it is still live now (not just when the transaction began), locked
-- until the transaction ends: a peer's takeover waits, so the check still holds at commit
lease AS (
    SELECT l.resource_id FROM leases l
    JOIN input i ON l.resource_id = i.id AND l.epoch = i.epoch
    WHERE l.kind = 'workload' AND l.owner = $1 AND l.expires_at > clock_timestamp()
    ORDER BY l.resource_id
    FOR SHARE OF l
),
-- each write, only onto the generation it was computed from (invariant 6) and never over a
-- deletion request that committed after the step read the row
updated AS (
    UPDATE workloads w
    SET state = i.state, state_reason = i.reason, observed = i.observed,
        observed_generation = i.generation, updated_at = now()
    FROM input i
    WHERE w.id = i.id AND w.generation = i.generation AND w.deletion_requested_at IS NULL
      AND i.id IN (SELECT resource_id FROM lease)
    RETURNING w.id, extract(epoch FROM clock_timestamp() - w.created_at)::float8 AS age
),
-- the events of each write, only with it, in order; a repeated once_key is skipped (see
-- insert_event)
recorded AS (
    INSERT INTO events (project_id, kind, resource_id, resource_name, type, reason, message,
                        generation, actor, once_key)
    SELECT i.project_id, 'workload', i.id, i.name, e.type, e.reason, e.message, i.generation,
           $2, e.once_key
    FROM unnest($11::int[], $12::text[], $13::text[], $14::text[], $15::text[])
         WITH ORDINALITY AS e(write, type, reason, message, once_key, n)
    JOIN input i ON i.n = e.write
    WHERE i.id IN (SELECT id FROM updated)
    ORDER BY e.n
    ON CONFLICT (kind, resource_id, once_key) WHERE once_key IS NOT NULL DO NOTHING
)
SELECT i.id IN (SELECT resource_id FROM lease) AS held, u.id IS NOT NULL AS written, u.age
FROM input i
LEFT JOIN updated u ON u.id = i.id
ORDER BY i.n;

-- name: steps_service_set_status
-- $3 id, $4 the generation the status describes, $5 state, $6 reason, $7 observed;
-- the events of the change: $8 project id, $9 name, $10 actor, and one array element
-- per event in $11 types, $12 reasons, $13 messages, $14 once_keys. One statement (its
-- own transaction when run alone): the lease lock holds until the events are in.
WITH
-- the caller's lease, if it is still live now (not just when the transaction began), locked
-- until the transaction ends: a peer's takeover waits, so the check still holds at commit
lease AS (
    SELECT 1 FROM leases l
    WHERE l.kind = 'service' AND l.resource_id = $3 AND l.owner = $1 AND l.epoch = $2
      AND l.expires_at > clock_timestamp()
    FOR SHARE OF l
),
-- the write, only onto the generation it was computed from and never over a deletion
updated AS (
    UPDATE services s
    SET state = $5, state_reason = $6, observed = $7, observed_generation = $4,
        updated_at = now()
    WHERE s.id = $3 AND s.generation = $4 AND s.deletion_requested_at IS NULL
      AND EXISTS (SELECT 1 FROM lease)
    RETURNING s.id
),
-- its events, only with the write; a repeated once_key is skipped (see insert_event)
recorded AS (
    INSERT INTO events (project_id, kind, resource_id, resource_name, type, reason, message,
                        generation, actor, once_key)
    SELECT $8, 'service', $3, $9, e.type, e.reason, e.message, $4, $10, e.once_key
    FROM unnest($11::text[], $12::text[], $13::text[], $14::text[])
         WITH ORDINALITY AS e(type, reason, message, once_key, n)
    WHERE EXISTS (SELECT 1 FROM updated)
    ORDER BY e.n
    ON CONFLICT (kind, resource_id, once_key) WHERE once_key IS NOT NULL DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM lease) AS held, EXISTS (SELECT 1 FROM updated) AS written;

-- name: steps_workload_set_observed
-- Evidence only (state, reason and generation untouched): the facts of a Job that is going
-- away, during deletion or replacement. $3 id, $4 observed. No row: the lease moved.
UPDATE workloads w SET observed = $4, updated_at = now()
FROM leases l
WHERE w.id = $3
  AND l.kind = 'workload' AND l.resource_id = w.id
  AND l.owner = $1 AND l.epoch = $2 AND l.expires_at > now()
RETURNING w.id;

-- name: steps_insert_tombstone
-- Finalization (inside a fenced transaction): what remains of a resource once its row is gone.
-- $1 kind, $2 id, $3 project id, $4 name, $5 final status.
INSERT INTO tombstones (kind, resource_id, project_id, name, final)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (kind, resource_id) DO UPDATE SET final = EXCLUDED.final, deleted_at = now();

-- name: steps_delete_workload
DELETE FROM workloads WHERE id = $1 AND deletion_requested_at IS NOT NULL;

-- name: steps_delete_service
DELETE FROM services WHERE id = $1 AND deletion_requested_at IS NOT NULL;

-- name: steps_delete_pool
DELETE FROM compute_pools WHERE id = $1 AND deletion_requested_at IS NOT NULL;

-- name: steps_delete_project
DELETE FROM projects WHERE id = $1 AND deletion_requested_at IS NOT NULL;

-- name: steps_pool_has_workloads
-- Any workload or service row, even one being deleted, still references the pool (foreign
-- key).
SELECT EXISTS (SELECT 1 FROM workloads WHERE pool_id = $1)
    OR EXISTS (SELECT 1 FROM services WHERE pool_id = $1);

-- name: steps_project_has_children
SELECT EXISTS (SELECT 1 FROM compute_pools WHERE project_id = $1)
    OR EXISTS (SELECT 1 FROM workloads WHERE project_id = $1)
    OR EXISTS (SELECT 1 FROM services WHERE project_id = $1);

-- name: steps_lock_flavor
-- Serializes every apply and delete of one ResourceFlavor across replicas (invariant 9), for
-- the rest of the caller's transaction.
SELECT pg_advisory_xact_lock(hashtextextended('aicp-flavor:' || $1::text, 0));

-- name: steps_flavor_other_users
-- Pools other than $2, not being deleted, whose binding names flavor $1.
SELECT count(*) FROM compute_pools c
JOIN accelerator_bindings b ON b.accelerator_class = c.accelerator_class
WHERE b.flavor = $1 AND c.id <> $2 AND c.deletion_requested_at IS NULL;

-- name: steps_workload_state_counts
-- Live workloads by state, every few seconds: an index-only scan of workloads_live_by_state
-- (0009), whose predicate is this WHERE clause, so the cost follows the live rows only.
SELECT state, count(*) AS count FROM workloads
WHERE state NOT IN ('SUCCEEDED', 'FAILED')
GROUP BY state;

-- name: steps_workload_finished_counts
-- Finished workloads by state: a count of every finished row (index-only), so it runs rarely.
SELECT state, count(*) AS count FROM workloads
WHERE state IN ('SUCCEEDED', 'FAILED')
GROUP BY state;

-- name: steps_stuck_deleting_counts
-- Resources whose deletion was requested more than a minute ago and is not finished.
SELECT 'project' AS kind, count(*) AS count FROM projects
WHERE deletion_requested_at < now() - interval '1 minute'
UNION ALL
SELECT 'pool', count(*) FROM compute_pools
WHERE deletion_requested_at < now() - interval '1 minute'
UNION ALL
SELECT 'workload', count(*) FROM workloads
WHERE deletion_requested_at < now() - interval '1 minute'
UNION ALL
SELECT 'service', count(*) FROM services
WHERE deletion_requested_at < now() - interval '1 minute';

-- ===== end section: reconcile steps =====

-- ===== section: reconcile engine =====
-- Leases (docs/DESIGN.md §5). Every claim, renewal and release is one statement with the lease
-- predicate inside it; "0 rows" always means "not yours". Kinds are 'project', 'pool', 'workload'.

-- name: lease_claim_keys
-- Doorbell path: take the leases of the given resources. Per key, one of: insert a new lease,
-- take over an expired one (epoch + 1), or extend one this owner already holds (same epoch).
-- A key missing from the result is held by a live peer, or its resource no longer exists.
-- $1 kinds text[], $2 resource ids uuid[] (parallel arrays, no duplicates), $3 owner, $4 ttl s,
-- $5 the owner's incarnation.
WITH
-- the keys asked for, one row each
wanted AS (
    SELECT k.kind, k.resource_id
    FROM unnest($1::text[], $2::uuid[]) AS k (kind, resource_id)
),
-- only resources that still exist: a doorbell that arrives after finalization must not leave a
-- lease behind for a row that is gone
present AS (
    SELECT w.kind, w.resource_id FROM wanted w
    JOIN projects p ON w.kind = 'project' AND p.id = w.resource_id
    UNION ALL
    SELECT w.kind, w.resource_id FROM wanted w
    JOIN compute_pools c ON w.kind = 'pool' AND c.id = w.resource_id
    UNION ALL
    SELECT w.kind, w.resource_id FROM wanted w
    JOIN workloads wl ON w.kind = 'workload' AND wl.id = w.resource_id
    UNION ALL
    SELECT w.kind, w.resource_id FROM wanted w
    JOIN services sv ON w.kind = 'service' AND sv.id = w.resource_id
)
-- in key order, as the sweep does: two claims over overlapping keys then lock rows in the same
-- order and cannot deadlock
INSERT INTO leases AS l (kind, resource_id, owner, epoch, expires_at, incarnation)
SELECT kind, resource_id, $3::text, 1, now() + make_interval(secs => $4::float8), $5::text
FROM present
ORDER BY kind, resource_id
ON CONFLICT (kind, resource_id) DO UPDATE
SET owner = excluded.owner,
    -- epoch counts changes of owner (or of its incarnation): extending one's own lease keeps
    -- in-flight fenced writes valid
    epoch = CASE WHEN l.owner = excluded.owner AND l.incarnation = excluded.incarnation
                 THEN l.epoch ELSE l.epoch + 1 END,
    expires_at = excluded.expires_at,
    incarnation = excluded.incarnation
-- a live lease of a peer is left alone (the row drops out of RETURNING)
WHERE l.expires_at <= now() OR (l.owner = excluded.owner AND l.incarnation = excluded.incarnation)
RETURNING l.kind, l.resource_id, l.epoch;

-- name: lease_take_new
-- Inside the API transaction that creates a resource: lease it to the accepting replica, which
-- enqueues it locally after the commit, so no doorbell (and no NOTIFY commit lock) is needed.
-- clock_timestamp(), not now(): the expiry counts from this statement, not from the start of
-- the transaction, so the replica's local deadline (taken before sending) is never later.
-- Zero rows: already leased. $1 kind, $2 resource id, $3 owner, $4 ttl seconds, $5 incarnation.
INSERT INTO leases (kind, resource_id, owner, epoch, expires_at, incarnation)
VALUES ($1, $2, $3, 1, clock_timestamp() + make_interval(secs => $4::float8), $5)
ON CONFLICT (kind, resource_id) DO NOTHING
RETURNING epoch;

-- name: lease_claim_due
-- The sweep: claim up to $3 resources per kind that need work and have no live lease.
-- $1 owner, $2 ttl seconds, $3 batch size per kind, $4 the owner's incarnation.
-- Each "no live lease" is a probe of leases_pkey per candidate, whatever the statistics say:
-- OFFSET 0 keeps the planner from turning it into an anti-join, which, with statistics taken
-- before a burst (leases estimated at a row or two), it ran as a nested loop over a scan of
-- every lease: 9,000 leased workloads took 3.2 s a sweep instead of milliseconds
-- (tests/integration/store/test_read_plans.py).
WITH
-- projects with an unobserved spec or a pending deletion (index projects_needing_work).
-- FOR NO KEY UPDATE SKIP LOCKED: two sweeping replicas split the candidates instead of queueing
-- behind each other; a row an API transaction is writing is skipped (that write rings a doorbell).
-- NO KEY (not FOR UPDATE) so a concurrent insert of a child row, which key-share locks its
-- parent through the foreign key, is not blocked by the sweep.
due_projects AS (
    SELECT 'project'::text AS kind, p.id AS resource_id FROM projects p
    WHERE (p.generation <> p.observed_generation OR p.deletion_requested_at IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM leases l
                      WHERE l.kind = 'project' AND l.resource_id = p.id AND l.expires_at > now()
                      OFFSET 0)
    ORDER BY p.updated_at
    LIMIT $3
    FOR NO KEY UPDATE OF p SKIP LOCKED
),
-- pools, the same way (index compute_pools_needing_work)
due_pools AS (
    SELECT 'pool'::text AS kind, c.id AS resource_id FROM compute_pools c
    WHERE (c.generation <> c.observed_generation OR c.deletion_requested_at IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM leases l
                      WHERE l.kind = 'pool' AND l.resource_id = c.id AND l.expires_at > now()
                      OFFSET 0)
    ORDER BY c.updated_at
    LIMIT $3
    FOR NO KEY UPDATE OF c SKIP LOCKED
),
-- workloads also need work while they are not finished (index workloads_needing_work)
due_workloads AS (
    SELECT 'workload'::text AS kind, w.id AS resource_id FROM workloads w
    WHERE (w.generation <> w.observed_generation
           OR w.deletion_requested_at IS NOT NULL
           OR w.state NOT IN ('SUCCEEDED', 'FAILED'))
      AND NOT EXISTS (SELECT 1 FROM leases l
                      WHERE l.kind = 'workload' AND l.resource_id = w.id AND l.expires_at > now()
                      OFFSET 0)
    -- ordered by the index key so the planner walks the partial index rather than the table
    ORDER BY w.id
    LIMIT $3
    FOR NO KEY UPDATE OF w SKIP LOCKED
),
-- services need work as long as they exist: they never finish (index services_needing_work)
due_services AS (
    SELECT 'service'::text AS kind, s.id AS resource_id FROM services s
    WHERE NOT EXISTS (SELECT 1 FROM leases l
                      WHERE l.kind = 'service' AND l.resource_id = s.id AND l.expires_at > now()
                      OFFSET 0)
    ORDER BY s.id
    LIMIT $3
    FOR NO KEY UPDATE OF s SKIP LOCKED
),
-- every candidate, whatever its kind
due AS (
    SELECT * FROM due_projects
    UNION ALL SELECT * FROM due_pools
    UNION ALL SELECT * FROM due_workloads
    UNION ALL SELECT * FROM due_services
)
-- take each lease: new, or an expired one taken over. The conflict re-check makes this safe even
-- when two sweeps saw the same expired lease: the second one's update finds it live and skips it.
INSERT INTO leases AS l (kind, resource_id, owner, epoch, expires_at, incarnation)
SELECT kind, resource_id, $1::text, 1, now() + make_interval(secs => $2::float8), $4::text
FROM due
ORDER BY kind, resource_id  -- the doorbell claim's lock order (no deadlock between them)
ON CONFLICT (kind, resource_id) DO UPDATE
SET owner = excluded.owner,
    epoch = CASE WHEN l.owner = excluded.owner AND l.incarnation = excluded.incarnation
                 THEN l.epoch ELSE l.epoch + 1 END,
    expires_at = excluded.expires_at,
    incarnation = excluded.incarnation
WHERE l.expires_at <= now()
RETURNING l.kind, l.resource_id, l.epoch;

-- name: lease_next_expiry
-- The sweep's alarm: seconds until the soonest live lease of another owner (or of an earlier
-- incarnation of this one) on a resource that needs work expires; NULL when there is none. The
-- sweep wakes then instead of at its next tick, so a dead replica's leases are taken over as
-- they expire. A live peer renews every TTL / 3, so its leases never come due sooner than two
-- thirds of the TTL: in steady state this adds no sweeps. $1 owner, $2 incarnation.
-- Each arm walks the partial index of resources needing work (the sweep's own) in key order and
-- looks each one's lease up by key, over the first 10,000 per kind: the planner walks a partial
-- index only under a LIMIT (it cannot estimate `generation <> observed_generation`), and the
-- bound caps the cost. Beyond it the alarm only samples: a dead replica's leases share the
-- expiry of its last renewal, so any one in the sample wakes the sweep, which then claims them
-- all; what the sample misses waits for the next tick, as without the alarm.
SELECT extract(epoch FROM min(soonest) - now())::float8 AS seconds FROM (
    SELECT min(soonest) AS soonest FROM (
        SELECT (SELECT l.expires_at FROM leases l
                WHERE l.kind = 'workload' AND l.resource_id = w.id AND l.expires_at > now()
                  AND (l.owner <> $1 OR l.incarnation <> $2)) AS soonest
        FROM workloads w
        WHERE w.generation <> w.observed_generation
           OR w.deletion_requested_at IS NOT NULL
           OR w.state NOT IN ('SUCCEEDED', 'FAILED')
        ORDER BY w.id
        LIMIT 10000
    ) AS workload_leases
    UNION ALL
    SELECT min(soonest) FROM (
        SELECT (SELECT l.expires_at FROM leases l
                WHERE l.kind = 'pool' AND l.resource_id = c.id AND l.expires_at > now()
                  AND (l.owner <> $1 OR l.incarnation <> $2)) AS soonest
        FROM compute_pools c
        WHERE c.generation <> c.observed_generation OR c.deletion_requested_at IS NOT NULL
        ORDER BY c.updated_at
        LIMIT 10000
    ) AS pool_leases
    UNION ALL
    SELECT min(soonest) FROM (
        SELECT (SELECT l.expires_at FROM leases l
                WHERE l.kind = 'project' AND l.resource_id = p.id AND l.expires_at > now()
                  AND (l.owner <> $1 OR l.incarnation <> $2)) AS soonest
        FROM projects p
        WHERE p.generation <> p.observed_generation OR p.deletion_requested_at IS NOT NULL
        ORDER BY p.updated_at
        LIMIT 10000
    ) AS project_leases
    UNION ALL
    SELECT min(soonest) FROM (
        SELECT (SELECT l.expires_at FROM leases l
                WHERE l.kind = 'service' AND l.resource_id = s.id AND l.expires_at > now()
                  AND (l.owner <> $1 OR l.incarnation <> $2)) AS soonest
        FROM services s
        ORDER BY s.id
        LIMIT 10000
    ) AS service_leases
) AS per_kind;

-- name: lease_renew_all
-- The lease keeper: extend every live lease of this owner. A lease missing from the result
-- expired or moved to a peer, and is dropped locally. Expired leases are not revived: this owner
-- may have stopped acting on them already. Only this incarnation's: a lease of a dead
-- predecessor under the same owner is not renewed. $1 owner, $2 ttl seconds, $3 incarnation.
-- A lease row locked by a transaction in flight (this replica's own step holds it FOR SHARE
-- until its commit: steps_*_set_status, fenced_transaction) is skipped, not waited for, and
-- comes back with renewed = false: waiting would queue the renewal of every lease behind each
-- step in turn, and under load that made renewals arrive after the leases' local deadlines.
-- The keeper keeps such a lease at its current deadline and renews it at the next tick.
WITH mine AS (
    SELECT l.kind, l.resource_id, l.epoch FROM leases l
    WHERE l.owner = $1 AND l.incarnation = $3 AND l.expires_at > now()
),
free AS (
    SELECT l.kind, l.resource_id FROM leases l
    WHERE l.owner = $1 AND l.incarnation = $3 AND l.expires_at > now()
    FOR NO KEY UPDATE SKIP LOCKED
),
renewed AS (
    UPDATE leases l SET expires_at = now() + make_interval(secs => $2::float8)
    FROM free f
    WHERE l.kind = f.kind AND l.resource_id = f.resource_id
    RETURNING l.kind, l.resource_id, l.epoch
)
SELECT r.kind, r.resource_id, r.epoch, true AS renewed FROM renewed r
UNION ALL
-- NOT IN, not NOT EXISTS: a hashed subplan of the renewed keys whatever the statistics say.
-- As an anti-join, with statistics taken before a burst, the planner chose a nested loop over
-- the renewed rows: 9,000 leases took 4.8 s a renewal (every ttl/3) instead of milliseconds
-- (tests/integration/store/test_read_plans.py). No key is NULL, so NOT IN means NOT EXISTS.
SELECT m.kind, m.resource_id, m.epoch, false AS renewed FROM mine m
WHERE (m.kind, m.resource_id) NOT IN (SELECT r.kind, r.resource_id FROM renewed r);

-- name: lease_release
-- Let one lease go now (the resource needs no more attention from this replica); keeps the row
-- and its epoch so the next owner's epoch is higher. $1 kind, $2 resource id, $3 owner, $4 epoch.
-- The owner becomes '' (nobody): a finished resource's released lease stays behind for good, and
-- the owner's periodic queries (renewal, resync, count) walk leases_by_owner, which must not
-- collect every lease the owner ever let go (0007). Any claim of it is then a change of owner
-- (epoch + 1), even by the replica that released it.
UPDATE leases SET expires_at = now(), owner = ''
WHERE kind = $1 AND resource_id = $2 AND owner = $3 AND epoch = $4 AND expires_at > now();

-- name: lease_release_all
-- Graceful shutdown: expire every live lease of this owner and ring the doorbell for each so a
-- peer claims it at once instead of at its next sweep. Returns how many were released. $1 owner,
-- $2 incarnation.
WITH
-- the leases let go, expired as of now
released AS (
    UPDATE leases SET expires_at = now()
    WHERE owner = $1 AND incarnation = $2 AND expires_at > now()
    RETURNING kind, resource_id
)
SELECT count(pg_notify('aicp_work', kind || ':' || resource_id::text)) AS released FROM released;

-- name: lease_release_predecessors
-- At start: expire the live leases a dead process left under this same owner (a container
-- restarted under its pod name) and ring the doorbell for each, so they are taken over now
-- instead of after their TTL. Instance ids are unique among live processes, so another
-- incarnation of this owner is dead. Returns how many. $1 owner, $2 this incarnation.
WITH
-- the predecessor's leases, expired as of now
released AS (
    UPDATE leases SET expires_at = now()
    WHERE owner = $1 AND incarnation <> $2 AND expires_at > now()
    RETURNING kind, resource_id
)
SELECT count(pg_notify('aicp_work', kind || ':' || resource_id::text)) AS released FROM released;

-- name: leases_held_changed
-- After a LISTEN gap: the resources this owner holds whose spec changed or whose deletion was
-- requested without it having acted on it (their doorbells may have rung while nobody listened).
-- Each arm starts from this owner's leases (leases_by_owner) and looks up each resource by its
-- key: one probe per held lease, whatever else the tables hold. $1 owner, $2 incarnation.
SELECT l.kind, l.resource_id FROM leases l
JOIN workloads w ON w.id = l.resource_id
WHERE l.owner = $1 AND l.incarnation = $2 AND l.expires_at > now() AND l.kind = 'workload'
  AND (w.generation <> w.observed_generation OR w.deletion_requested_at IS NOT NULL)
UNION ALL
SELECT l.kind, l.resource_id FROM leases l
JOIN compute_pools c ON c.id = l.resource_id
WHERE l.owner = $1 AND l.incarnation = $2 AND l.expires_at > now() AND l.kind = 'pool'
  AND (c.generation <> c.observed_generation OR c.deletion_requested_at IS NOT NULL)
UNION ALL
SELECT l.kind, l.resource_id FROM leases l
JOIN projects p ON p.id = l.resource_id
WHERE l.owner = $1 AND l.incarnation = $2 AND l.expires_at > now() AND l.kind = 'project'
  AND (p.generation <> p.observed_generation OR p.deletion_requested_at IS NOT NULL);

-- name: lease_lock_fenced
-- First statement of a fenced transaction: lock this owner's live lease row for the rest of the
-- transaction (a peer's takeover waits behind it). No row: the lease moved.
-- $1 kind, $2 resource id, $3 owner, $4 epoch.
-- clock_timestamp(): the lease must be live when the lock is granted, not merely when the
-- transaction began (it may have waited for the lock).
SELECT epoch FROM leases
WHERE kind = $1 AND resource_id = $2 AND owner = $3 AND epoch = $4
  AND expires_at > clock_timestamp()
FOR UPDATE;

-- name: lease_delete_fenced
-- Finalization: remove the lease with the resource (same transaction). $1 kind, $2 resource id,
-- $3 owner, $4 epoch.
DELETE FROM leases
WHERE kind = $1 AND resource_id = $2 AND owner = $3 AND epoch = $4 AND expires_at > now();

-- name: leases_held_count
-- Live leases of one owner (a cross-check of the in-memory view). $1 owner.
SELECT count(*) AS held FROM leases WHERE owner = $1 AND expires_at > now();

-- name: reconcile_lag_seconds
-- Per kind, the age of the oldest unconverged resource (unobserved spec or pending deletion),
-- 0 when none. Each arm reads the first entry of a partial index on updated_at.
SELECT 'project' AS kind, coalesce(extract(epoch FROM now() - (
           SELECT updated_at FROM projects
           WHERE generation <> observed_generation OR deletion_requested_at IS NOT NULL
           ORDER BY updated_at LIMIT 1)), 0)::float8 AS lag
UNION ALL
SELECT 'pool', coalesce(extract(epoch FROM now() - (
           SELECT updated_at FROM compute_pools
           WHERE generation <> observed_generation OR deletion_requested_at IS NOT NULL
           ORDER BY updated_at LIMIT 1)), 0)::float8
UNION ALL
SELECT 'workload', coalesce(extract(epoch FROM now() - (
           SELECT updated_at FROM workloads
           WHERE generation <> observed_generation OR deletion_requested_at IS NOT NULL
           ORDER BY updated_at LIMIT 1)), 0)::float8;

-- ===== end section: reconcile engine =====


-- ---------------------------------------------------------------------------------------------
-- Planning (app/store/planning.py, docs/PLANNING.md)
-- ---------------------------------------------------------------------------------------------

-- name: planning_pool
-- A pool's quota and project, by id.
SELECT id, project_id, name, spec FROM compute_pools WHERE id = $1;

-- name: planning_pool_by_name
SELECT id, project_id, name, spec FROM compute_pools WHERE project_id = $1 AND name = $2;

-- name: planning_live_workloads
-- The queue and what holds the quota ($1 the pool): the partial index workloads_live_by_pool.
SELECT id, name, spec, state, observed, generation, observed_generation, generation_at
FROM workloads
WHERE pool_id = $1 AND deletion_requested_at IS NULL
  AND state IN ('PENDING', 'QUEUED', 'ADMITTED', 'RUNNING');

-- name: workload_by_name_with_pool_depth
-- The workload (as workload_by_name) and, when it is QUEUED, how many live workloads its pool
-- has, counted up to $3 (`pool_live`, NULL otherwise): a GET's one round trip. CASE evaluates
-- the count only for a QUEUED row, and the LIMIT stops the walk of workloads_live_by_pool.
SELECT w.*,
       CASE WHEN w.state = 'QUEUED' THEN (
         SELECT count(*) FROM (
           SELECT 1 FROM workloads l
           WHERE l.pool_id = w.pool_id
             AND l.deletion_requested_at IS NULL
             AND l.state IN ('PENDING', 'QUEUED', 'ADMITTED', 'RUNNING')
           LIMIT $3
         ) AS live
       ) END AS pool_live
FROM workloads w
WHERE w.project_id = $1 AND w.name = $2;

-- name: planning_finished_workloads
-- The project's newest finished workloads that were admitted ($2 how many): their durations.
SELECT name, pool_id, spec -> 'labels' AS labels, observed
FROM workloads
WHERE project_id = $1 AND state IN ('SUCCEEDED', 'FAILED')
  AND observed ? 'admission' AND observed ? 'finished_at'
ORDER BY updated_at DESC
LIMIT $2;

-- name: planning_recent_arrivals
-- The pool's ($1) newest $2 submissions, newest first (index workloads_by_pool_newest_first):
-- the rate and the kinds of the work to come.
SELECT id, name, spec, created_at
FROM workloads
WHERE pool_id = $1
ORDER BY created_at DESC, id DESC
LIMIT $2;

-- name: planning_record_forecast
-- $5-$7 the band shown, $9-$11 the replay's own (before calibration).
INSERT INTO workload_forecasts (workload_id, pool_id, generation, position, earliest, likely,
                                latest, basis, replay_earliest, replay_likely, replay_latest)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11);

-- name: planning_scored_forecasts
-- The pool's newest $2 scored estimates that had a band ($1 the pool; index
-- workload_forecasts_scored): the replay's band (the shown one in rows from before 0023) and the
-- admission, for the calibration.
SELECT made_at, coalesce(replay_earliest, earliest) AS earliest,
       coalesce(replay_likely, likely) AS likely, coalesce(replay_latest, latest) AS latest,
       started_at
FROM workload_forecasts
WHERE pool_id = $1 AND started_at IS NOT NULL AND likely IS NOT NULL
ORDER BY started_at DESC
LIMIT $2;

-- name: planning_record_start
-- Kueue admitted the generation at $3: score its estimates; the scored ones are returned.
UPDATE workload_forecasts SET started_at = $3
WHERE workload_id = $1 AND generation = $2 AND started_at IS NULL
RETURNING earliest, likely, latest;

-- name: planning_accuracy
-- The pool's scored estimates of the last $2 seconds ($1 the pool): count, median absolute
-- error of the likely time, share inside the band (estimates without a band are counted
-- apart). Kueue writes the admission time in whole seconds: an admission at second t happened
-- within [t, t + 1 s), and is inside when that second meets the band.
SELECT count(*) FILTER (WHERE likely IS NOT NULL) AS samples,
       count(*) FILTER (WHERE likely IS NULL) AS without_estimate,
       percentile_cont(0.5) WITHIN GROUP (
           ORDER BY abs(extract(epoch FROM started_at - likely)))
           FILTER (WHERE likely IS NOT NULL) AS median_absolute_error_seconds,
       avg(CASE WHEN started_at + interval '1 second' >= earliest AND started_at <= latest
                THEN 1.0 ELSE 0.0 END)
           FILTER (WHERE likely IS NOT NULL) AS inside_band,
       percentile_cont(0.9) WITHIN GROUP (
           ORDER BY extract(epoch FROM started_at - made_at)) AS p90_wait_seconds,
       percentile_cont(0.5) WITHIN GROUP (
           ORDER BY extract(epoch FROM latest - earliest))
           FILTER (WHERE likely IS NOT NULL) AS median_band_seconds
FROM workload_forecasts
WHERE pool_id = $1 AND started_at IS NOT NULL
  AND started_at > now() - make_interval(secs => $2);
-- ===== section: role bindings (identity-provider groups → roles; migration 0018) =====

-- name: insert_role_binding
-- $1 id, $2 group, $3 role, $4 project id (NULL: platform-admin), $5 created_by. No row: the
-- group already has a binding in that scope.
INSERT INTO role_bindings (id, group_name, role, project_id, created_by)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING
RETURNING id, group_name, role, project_id, created_at, created_by;

-- name: list_role_bindings
-- $1 project id (NULL: every binding), then the page cursor and limit.
SELECT b.id, b.group_name, b.role, p.name AS project_name, b.created_at, b.created_by
FROM role_bindings b LEFT JOIN projects p ON p.id = b.project_id
WHERE ($1::uuid IS NULL OR b.project_id = $1) AND (b.created_at, b.id) < ($2, $3)
ORDER BY b.created_at DESC, b.id DESC
LIMIT $4;

-- name: get_role_binding
SELECT b.id, b.group_name, b.role, p.name AS project_name, b.project_id, b.created_at,
       b.created_by
FROM role_bindings b LEFT JOIN projects p ON p.id = b.project_id
WHERE b.id = $1;

-- name: delete_role_binding
DELETE FROM role_bindings WHERE id = $1;

-- name: role_bindings_of_groups
-- What a person's groups ($1 text[]) give: every binding of any of them, with its project's
-- name (projects being deleted included: their reads and deletes stay the admin's to finish).
SELECT b.group_name, b.role, b.project_id, p.name AS project_name
FROM role_bindings b LEFT JOIN projects p ON p.id = b.project_id
WHERE b.group_name = ANY($1::text[]);

-- name: project_name_by_id
SELECT name FROM projects WHERE id = $1;

-- ===== end section: role bindings =====

-- ===== section: dashboard sessions (app/store/sessions.py) =====

-- name: session_insert
-- $2 the project token's id, $3 the admin token's digest, or $6-$8 the person signed in
-- through OpenID Connect (exactly one is set).
INSERT INTO dashboard_sessions (id_sha256, token_id, admin_sha256, csrf, expires_at,
                                person_subject, person_username, person_groups)
VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::float8), $6, $7, $8);

-- name: session_lookup
-- A live session and, for a project token's, the token as authenticate_token reads it.
SELECT s.token_id, s.admin_sha256, s.csrf, s.expires_at AS session_expires_at,
       s.person_subject, s.person_username, s.person_groups,
       t.project_id, p.name AS project_name, t.role, t.expires_at,
       t.revoked_at IS NOT NULL AS revoked,
       t.expires_at IS NOT NULL AND t.expires_at <= now() AS expired
FROM dashboard_sessions s
LEFT JOIN api_tokens t ON t.id = s.token_id
LEFT JOIN projects p ON p.id = t.project_id
WHERE s.id_sha256 = $1 AND s.expires_at > now();

-- name: session_delete
DELETE FROM dashboard_sessions WHERE id_sha256 = $1;

-- name: sessions_purge_expired
DELETE FROM dashboard_sessions WHERE expires_at <= now();

-- ===== end section: dashboard sessions =====
