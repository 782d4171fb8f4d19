-- 0006: the change log behind the live streams (`.../workloads/{name}/watch`,
-- `.../workloads?watch=true`; app/streams/changefeed.py).
--
-- Every committed change of what a watcher sees of a workload (spec and generation, state,
-- reason, observed facts: admission, nodes, accelerator evidence; the deletion request; the
-- row's removal) appends one row here, in the transaction of the change, with the workload's
-- columns as they are after it. A trigger writes it, so no write path (API, reconcile steps,
-- finalization) can forget it. `change_id` is the stream's event id: a client that resumes with
-- `Last-Event-ID: N` is sent the rows after N.
--
-- Order: `change_id` comes from a sequence, taken inside the trigger, i.e. while the
-- transaction holds the workload's row lock. Changes of one workload therefore commit in
-- `change_id` order; changes of different workloads may commit out of order (a gap below a
-- visible id is a transaction still in flight, or one that rolled back). The reader delivers in
-- `change_id` order and waits at a gap until it fills or its transaction is known to have
-- ended (app/streams/changefeed.py).

CREATE TABLE workload_changes (
    change_id           bigserial PRIMARY KEY,
    project_id          uuid NOT NULL,
    id                  uuid NOT NULL,   -- the workload
    deleted             boolean NOT NULL DEFAULT false,
    at                  timestamptz NOT NULL DEFAULT clock_timestamp(),
    name                text NOT NULL,
    spec                jsonb NOT NULL,
    generation          bigint NOT NULL,
    observed_generation bigint NOT NULL,
    state               text NOT NULL,
    state_reason        text,
    observed            jsonb NOT NULL,
    deletion_requested_at timestamptz,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    created_by          text NOT NULL
);
-- Resuming a project's stream (the list watch) or one workload's (the watch, by name).
CREATE INDEX workload_changes_by_project ON workload_changes (project_id, change_id);

-- Which replicas have open streams on which projects (app/streams/changefeed.py renews its rows
-- every few seconds while it has subscribers). A change rings `aicp_watch` only when its
-- project is watched somewhere: a NOTIFY-bearing commit takes a cluster-wide lock, so changes
-- nobody watches must not pay for it (DESIGN.md §5).
CREATE TABLE stream_interest (
    project_id uuid NOT NULL,
    replica    text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (project_id, replica)
);

-- The workload's newest change, on the row itself (what Kubernetes calls its resourceVersion):
-- a stream's first event carries it, so the stream knows which later changes it already shows.
ALTER TABLE workloads ADD COLUMN change_id bigint;

-- BEFORE: number the change while the row is locked (see "Order" above). An insert that loses
-- to ON CONFLICT DO NOTHING burns a number, which is only a gap.
CREATE FUNCTION number_workload_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.change_id := nextval(pg_get_serial_sequence('workload_changes', 'change_id'));
    RETURN NEW;
END
$$;

-- AFTER: append the change as committed rows show it, and ring the watchers' bell.
CREATE FUNCTION record_workload_change() RETURNS trigger
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
                                  deletion_requested_at, created_at, updated_at, created_by)
    VALUES (w.change_id, w.project_id, w.id, TG_OP = 'DELETE', w.name, w.spec, w.generation,
            w.observed_generation, w.state, w.state_reason, w.observed,
            w.deletion_requested_at, w.created_at, w.updated_at, w.created_by);
    -- Only wakes the readers (the payload is the project); they read the rows themselves.
    -- One notification per project per transaction: PostgreSQL folds identical ones.
    IF EXISTS (SELECT 1 FROM stream_interest s
               WHERE s.project_id = w.project_id AND s.expires_at > now()) THEN
        PERFORM pg_notify('aicp_watch', w.project_id::text);
    END IF;
    RETURN NULL;
END
$$;

-- What a watcher sees of a workload: updates that change none of it record nothing (none
-- today: every write moves one of these).
CREATE TRIGGER workloads_number_insert
    BEFORE INSERT ON workloads
    FOR EACH ROW EXECUTE FUNCTION number_workload_change();
CREATE TRIGGER workloads_number_update
    BEFORE UPDATE ON workloads
    FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state
          OR OLD.state_reason IS DISTINCT FROM NEW.state_reason
          OR OLD.observed IS DISTINCT FROM NEW.observed
          OR OLD.generation IS DISTINCT FROM NEW.generation
          OR OLD.observed_generation IS DISTINCT FROM NEW.observed_generation
          OR OLD.spec IS DISTINCT FROM NEW.spec
          OR OLD.deletion_requested_at IS DISTINCT FROM NEW.deletion_requested_at)
    EXECUTE FUNCTION number_workload_change();
CREATE TRIGGER workloads_record_insert
    AFTER INSERT ON workloads
    FOR EACH ROW EXECUTE FUNCTION record_workload_change();
-- A new number is the mark of an update the BEFORE trigger counted.
CREATE TRIGGER workloads_record_update
    AFTER UPDATE ON workloads
    FOR EACH ROW
    WHEN (OLD.change_id IS DISTINCT FROM NEW.change_id)
    EXECUTE FUNCTION record_workload_change();
CREATE TRIGGER workloads_record_delete
    AFTER DELETE ON workloads
    FOR EACH ROW EXECUTE FUNCTION record_workload_change();
