-- 0024: inference services (docs/API.md "Services", docs/DESIGN.md §11).
--
-- A service is a reconciled resource of its own kind, 'service': a row here, a lease, events
-- and, once it is deleted, a tombstone, like a workload. Its replicas run as a Deployment whose
-- pods Kueue admits one by one against the compute pool's quota, so the row points at its pool
-- through the same tenancy key as workloads (a service in another project's pool is refused).
-- A service never finishes: every live row needs the reconciler's attention, which the sweep
-- finds through services_needing_work.

CREATE TABLE services (
    id                    uuid PRIMARY KEY,
    project_id            uuid NOT NULL REFERENCES projects (id),
    pool_id               uuid NOT NULL,
    name                  text NOT NULL,
    spec                  jsonb NOT NULL,
    generation            bigint NOT NULL DEFAULT 1,
    observed_generation   bigint NOT NULL DEFAULT 0,
    state                 text NOT NULL DEFAULT 'PENDING',
    state_reason          text,
    -- status facts written by the reconciler: deployment {name, uid}, endpoint, replicas,
    -- nodes, pods (app/domain/service_resources.py)
    observed              jsonb NOT NULL DEFAULT '{}',
    deletion_requested_at timestamptz,
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    created_by            text NOT NULL,
    UNIQUE (project_id, name),
    CONSTRAINT services_state_known
        CHECK (state IN ('PENDING', 'PROGRESSING', 'READY', 'DEGRADED', 'DELETING')),
    CONSTRAINT services_observed_not_ahead CHECK (observed_generation <= generation),
    CONSTRAINT services_pool_in_project
        FOREIGN KEY (project_id, pool_id) REFERENCES compute_pools (project_id, id)
);
CREATE INDEX services_newest_first ON services (project_id, created_at DESC, id DESC);
CREATE INDEX services_by_pool ON services (pool_id);
-- Every service needs work while it exists (it never finishes); the index is the sweep's walk.
CREATE INDEX services_needing_work ON services (id);

ALTER TABLE leases DROP CONSTRAINT leases_kind_check;
ALTER TABLE leases
    ADD CONSTRAINT leases_kind_check
        CHECK (kind IN ('project', 'pool', 'workload', 'service'));

ALTER TABLE tombstones DROP CONSTRAINT tombstones_kind_known;
ALTER TABLE tombstones
    ADD CONSTRAINT tombstones_kind_known
        CHECK (kind IN ('project', 'pool', 'workload', 'service'));

ALTER TABLE events DROP CONSTRAINT events_kind_known;
ALTER TABLE events
    ADD CONSTRAINT events_kind_known
        CHECK (kind IN ('project', 'pool', 'workload', 'service', 'binding', 'token',
                        'role-binding'));

ALTER TABLE events DROP CONSTRAINT events_type_known;
ALTER TABLE events
    ADD CONSTRAINT events_type_known
        CHECK (type IN ('Accepted', 'Created', 'SpecUpdated', 'DeletionRequested', 'Deleted',
                        'Revoked', 'Ready', 'Degraded', 'Pending', 'QueuesApplied',
                        'JobCreated', 'Admitted', 'Started', 'Restarting', 'Preempted',
                        'Requeued', 'Succeeded', 'Failed', 'DriftCorrected',
                        'EvidenceRecorded', 'Finalized', 'Progressing'));

ALTER TABLE events DROP CONSTRAINT events_reason_known;
ALTER TABLE events
    ADD CONSTRAINT events_reason_known
        CHECK (reason IN ('Created', 'Replaced', 'QuotaChanged', 'Deleted', 'LabelsRestored',
                          'QueuesRestored', 'NamespaceRestored', 'JobRecreated',
                          'JobRejected', 'StartDeadlineExceeded', 'Scaled',
                          'ReplicasRestored', 'ObjectRestored'));
