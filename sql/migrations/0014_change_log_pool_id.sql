-- The change log carries each change's pool id, so a live stream filtered by pool matches a
-- change by the pool the workload is in (its `pool_id`, as the list and a stream's first page
-- do), not by the name in its spec's JSON.
--
-- History recorded before this migration gets the id of the pool its spec names (a workload's
-- pool cannot be renamed nor go while it has workloads); a row whose pool is gone keeps NULL
-- and matches no pool filter, as the pool is gone.

ALTER TABLE workload_changes ADD COLUMN pool_id uuid;

UPDATE workload_changes c SET pool_id = p.id
FROM compute_pools p
WHERE p.project_id = c.project_id AND p.name = c.spec->>'compute_pool';

CREATE OR REPLACE FUNCTION record_workload_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    w workloads%ROWTYPE;
BEGIN
    IF TG_OP = 'DELETE' THEN
        w := OLD;
        w.change_id := nextval(pg_get_serial_sequence('workload_changes', 'change_id'));
    ELSE
        w := NEW;
    END IF;
    INSERT INTO workload_changes (change_id, project_id, id, deleted, name, spec, generation,
                                  observed_generation, state, state_reason, observed,
                                  deletion_requested_at, created_at, updated_at, created_by,
                                  pool_id)
    VALUES (w.change_id, w.project_id, w.id, TG_OP = 'DELETE', w.name, w.spec, w.generation,
            w.observed_generation, w.state, w.state_reason, w.observed,
            w.deletion_requested_at, w.created_at, w.updated_at, w.created_by, w.pool_id);
    -- Only wakes the readers (the payload is the project); they read the rows themselves.
    -- One notification per project per transaction: PostgreSQL folds identical ones.
    IF EXISTS (SELECT 1 FROM stream_interest s
               WHERE s.project_id = w.project_id AND s.expires_at > now()) THEN
        PERFORM pg_notify('aicp_watch', w.project_id::text);
    END IF;
    RETURN NULL;
END
$$;
