-- 0003: the database states the lifecycle vocabulary once, as the code does
-- (app/domain/states.py, app/domain/kinds.py, app/domain/events.py); a test compares the two.
--
-- * states of reconciled rows, kinds of leases, events and tombstones, event types and reasons
--   are closed sets: a row outside them is refused instead of stored;
-- * observed_generation never runs ahead of generation (invariant 2: the reconciler records
--   the generation it observed, never one that does not exist yet);
-- * a workload's pool belongs to the workload's project: tenancy is a foreign key, not only a
--   check in the code. The composite key replaces the plain one on pool_id.

ALTER TABLE projects
    ADD CONSTRAINT projects_state_known
        CHECK (state IN ('PENDING', 'READY', 'DEGRADED', 'DELETING')),
    ADD CONSTRAINT projects_observed_not_ahead CHECK (observed_generation <= generation);

ALTER TABLE compute_pools
    ADD CONSTRAINT compute_pools_state_known
        CHECK (state IN ('PENDING', 'READY', 'DEGRADED', 'DELETING')),
    ADD CONSTRAINT compute_pools_observed_not_ahead CHECK (observed_generation <= generation),
    ADD CONSTRAINT compute_pools_project_id_id_key UNIQUE (project_id, id);

ALTER TABLE workloads
    ADD CONSTRAINT workloads_state_known
        CHECK (state IN ('PENDING', 'QUEUED', 'ADMITTED', 'RUNNING', 'SUCCEEDED', 'FAILED',
                         'DELETING')),
    ADD CONSTRAINT workloads_observed_not_ahead CHECK (observed_generation <= generation),
    ADD CONSTRAINT workloads_pool_in_project
        FOREIGN KEY (project_id, pool_id) REFERENCES compute_pools (project_id, id),
    DROP CONSTRAINT workloads_pool_id_fkey;

ALTER TABLE events
    ADD CONSTRAINT events_kind_known
        CHECK (kind IN ('project', 'pool', 'workload', 'binding', 'token')),
    ADD CONSTRAINT events_type_known
        CHECK (type IN ('Accepted', 'Created', 'SpecUpdated', 'DeletionRequested', 'Deleted',
                        'Revoked', 'Ready', 'Degraded', 'Pending', 'QueuesApplied',
                        'JobCreated', 'Admitted', 'Started', 'Restarting', 'Preempted',
                        'Requeued', 'Succeeded', 'Failed', 'DriftCorrected',
                        'EvidenceRecorded', 'Finalized')),
    ADD CONSTRAINT events_reason_known
        CHECK (reason IN ('Created', 'Replaced', 'QuotaChanged', 'Deleted', 'LabelsRestored',
                          'QueuesRestored', 'JobRecreated', 'JobRejected'));

ALTER TABLE tombstones
    ADD CONSTRAINT tombstones_kind_known CHECK (kind IN ('project', 'pool', 'workload'));
