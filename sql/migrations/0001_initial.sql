-- 0001: every table aicp needs, for the API and the reconciler alike.
--
-- Conventions:
--   * reconciled rows (projects, compute_pools, workloads) carry spec, generation,
--     observed_generation, state, state_reason, observed, deletion_requested_at;
--     a row needs work while generation <> observed_generation, while it is being deleted,
--     or while it is not in a terminal state (docs/DESIGN.md §5);
--   * created_at comes from clock_timestamp() (not now(), which is the transaction start), so
--     rows created later in one transaction still sort after earlier ones; lists page newest
--     first by (created_at, id), each backed by an index in that order;
--   * uniqueness is a constraint, never a select-then-insert.

CREATE TABLE projects (
    id                    uuid PRIMARY KEY,
    name                  text NOT NULL UNIQUE,
    display_name          text,
    labels                jsonb NOT NULL DEFAULT '{}',
    spec                  jsonb NOT NULL DEFAULT '{}',
    generation            bigint NOT NULL DEFAULT 1,
    observed_generation   bigint NOT NULL DEFAULT 0,
    state                 text NOT NULL DEFAULT 'PENDING',
    state_reason          text,
    observed              jsonb NOT NULL DEFAULT '{}',
    deletion_requested_at timestamptz,
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    created_by            text NOT NULL
);
CREATE INDEX projects_newest_first ON projects (created_at DESC, id DESC);

CREATE TABLE api_tokens (
    id            uuid PRIMARY KEY,
    project_id    uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name          text NOT NULL,
    role          text NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
    secret_sha256 bytea NOT NULL UNIQUE,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at    timestamptz,
    revoked_at    timestamptz,
    created_by    text NOT NULL,
    UNIQUE (project_id, name)
);
CREATE INDEX api_tokens_newest_first ON api_tokens (project_id, created_at DESC, id DESC);

CREATE TABLE accelerator_bindings (
    accelerator_class text PRIMARY KEY,
    resource_name     text NOT NULL,
    flavor            text NOT NULL,
    node_labels       jsonb NOT NULL DEFAULT '{}',
    tolerations       jsonb NOT NULL DEFAULT '[]',
    description       text,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE compute_pools (
    id                    uuid PRIMARY KEY,
    project_id            uuid NOT NULL REFERENCES projects (id),
    name                  text NOT NULL,
    -- RESTRICT: a binding cannot be deleted while a pool uses it (the API answers 409 in-use).
    accelerator_class     text NOT NULL REFERENCES accelerator_bindings (accelerator_class)
                               ON DELETE RESTRICT,
    spec                  jsonb NOT NULL,
    generation            bigint NOT NULL DEFAULT 1,
    observed_generation   bigint NOT NULL DEFAULT 0,
    state                 text NOT NULL DEFAULT 'PENDING',
    state_reason          text,
    observed              jsonb NOT NULL DEFAULT '{}',
    deletion_requested_at timestamptz,
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    created_by            text NOT NULL,
    UNIQUE (project_id, name)
);
CREATE INDEX compute_pools_newest_first ON compute_pools (project_id, created_at DESC, id DESC);
CREATE INDEX compute_pools_by_class ON compute_pools (accelerator_class);

CREATE TABLE workloads (
    id                    uuid PRIMARY KEY,
    project_id            uuid NOT NULL REFERENCES projects (id),
    pool_id               uuid NOT NULL REFERENCES compute_pools (id),
    name                  text NOT NULL,
    spec                  jsonb NOT NULL,
    generation            bigint NOT NULL DEFAULT 1,
    observed_generation   bigint NOT NULL DEFAULT 0,
    state                 text NOT NULL DEFAULT 'PENDING',
    state_reason          text,
    -- status facts written by the reconciler: job {name, uid}, admission, nodes, accelerator,
    -- attempts, started_at, finished_at, exit_code
    observed              jsonb NOT NULL DEFAULT '{}',
    deletion_requested_at timestamptz,
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    created_by            text NOT NULL,
    UNIQUE (project_id, name)
);
CREATE INDEX workloads_newest_first ON workloads (project_id, created_at DESC, id DESC);
CREATE INDEX workloads_by_pool ON workloads (pool_id);
-- The sweep looks for rows that need work; finished, converged rows are the vast majority.
CREATE INDEX workloads_needing_work ON workloads (id)
    WHERE generation <> observed_generation
       OR deletion_requested_at IS NOT NULL
       OR state NOT IN ('SUCCEEDED', 'FAILED');

CREATE TABLE leases (
    kind        text NOT NULL CHECK (kind IN ('project', 'pool', 'workload')),
    resource_id uuid NOT NULL,
    owner       text NOT NULL,
    epoch       bigint NOT NULL DEFAULT 1,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (kind, resource_id)
);
CREATE INDEX leases_by_owner ON leases (owner);

CREATE TABLE events (
    id            bigserial PRIMARY KEY,
    project_id    uuid,
    kind          text NOT NULL,
    resource_id   uuid NOT NULL,
    resource_name text NOT NULL,
    at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    type          text NOT NULL,
    reason        text,
    message       text,
    generation    bigint,
    actor         text NOT NULL
);
CREATE INDEX events_by_resource ON events (kind, resource_id, id DESC);
CREATE INDEX events_by_project ON events (project_id, id DESC);

CREATE TABLE tombstones (
    kind        text NOT NULL,
    resource_id uuid NOT NULL,
    project_id  uuid,
    name        text NOT NULL,
    deleted_at  timestamptz NOT NULL DEFAULT now(),
    final       jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (kind, resource_id)
);
CREATE INDEX tombstones_by_project ON tombstones (project_id, kind, name);

CREATE TABLE idempotency_keys (
    identity       text NOT NULL,
    key            text NOT NULL,
    request_sha256 bytea NOT NULL,
    status         int NOT NULL,
    body           bytea NOT NULL,
    location       text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (identity, key)
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
