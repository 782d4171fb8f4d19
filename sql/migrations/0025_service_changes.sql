-- 0025: services join the change log behind the live streams (`.../services?watch=true`,
-- `.../services/{name}/watch`; app/streams/changefeed.py).
--
-- One log for both kinds, not a second one beside it: `workload_changes` gains `kind`
-- ('workload' or 'service'); a service's change is numbered from the same sequence, appended by
-- the same trigger functions (kind-neutral from here on: the kind is the trigger's argument)
-- and rings the same `aicp_watch`. Why one:
--
-- - A stream's event id is a change number and `Last-Event-ID` resumes from it. One sequence is
--   one order: a number means the same point on every stream of every replica.
-- - The feed's gap rule (`ChangeFeed._deliver`: wait at a missing number until it appears or
--   the transaction that took it is over) holds only if every number the reader can see
--   missing belongs to the log it reads. Two sequences would need two positions and two sets
--   of gaps per replica; one sequence over two tables would make every read merge both. One
--   table keeps one read per wake-up for every stream of a process, one position, one purge.
-- - Order holds across kinds as it did within one: a number is taken while the changed row (a
--   workload's or a service's) is locked, so the changes of one resource commit in number
--   order; changes of different resources, of either kind, may commit out of order, which is
--   the gap the rule above already waits at.
--
-- The table keeps its name: renaming it would change nothing a client sees and break every
-- query that names it (docs/OPERATIONS.md, operators' own). Rows before this migration are
-- workloads' (the column's default; a constant default rewrites nothing).

ALTER TABLE workload_changes
    ADD COLUMN kind text NOT NULL DEFAULT 'workload'
        CONSTRAINT workload_changes_kind_known CHECK (kind IN ('workload', 'service'));

-- Resuming a stream reads one project's changes of one kind (of one name, for a single
-- resource's watch) after a number.
CREATE INDEX workload_changes_by_project_kind ON workload_changes (project_id, kind, change_id);
DROP INDEX workload_changes_by_project;

ALTER TABLE services ADD COLUMN change_id bigint;

-- BEFORE INSERT OR UPDATE: number the change while the row is locked (0006, "Order"). What a
-- watcher sees of either kind — its spec and generation, state, reason, observed facts, the
-- deletion request — is stated once, here: an update that moves none of it is no change and
-- keeps its number. (0006 said it in each trigger's WHEN clause; one definition for both
-- tables costs a trigger call that returns at once on such an update, of which there are none
-- today: every write moves one of these.) The pool moves only with the spec.
CREATE FUNCTION number_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF (OLD.spec, OLD.generation, OLD.observed_generation, OLD.state, OLD.state_reason,
            OLD.observed, OLD.deletion_requested_at)
           IS NOT DISTINCT FROM
           (NEW.spec, NEW.generation, NEW.observed_generation, NEW.state, NEW.state_reason,
            NEW.observed, NEW.deletion_requested_at) THEN
            RETURN NEW;
        END IF;
    END IF;
    NEW.change_id := nextval(pg_get_serial_sequence('workload_changes', 'change_id'));
    RETURN NEW;
END
$$;

-- AFTER INSERT OR UPDATE OR DELETE: append the change as committed rows show it (an update
-- that took no new number is none), and ring the watchers' bell. The kind is the trigger's
-- argument; both tables have the columns below, and PL/pgSQL compiles a trigger function once
-- per trigger, so `r`'s row type is settled per table.
CREATE FUNCTION record_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        r := OLD;
        r.change_id := nextval(pg_get_serial_sequence('workload_changes', 'change_id'));
    ELSIF TG_OP = 'UPDATE' AND OLD.change_id IS NOT DISTINCT FROM NEW.change_id THEN
        RETURN NULL;
    ELSE
        r := NEW;
    END IF;
    INSERT INTO workload_changes (kind, change_id, project_id, id, deleted, name, spec,
                                  generation, observed_generation, state, state_reason,
                                  observed, deletion_requested_at, created_at, updated_at,
                                  created_by, pool_id)
    VALUES (TG_ARGV[0], r.change_id, r.project_id, r.id, TG_OP = 'DELETE', r.name, r.spec,
            r.generation, r.observed_generation, r.state, r.state_reason, r.observed,
            r.deletion_requested_at, r.created_at, r.updated_at, r.created_by, r.pool_id);
    -- Only wakes the readers (the payload is the project); they read the rows themselves.
    -- One notification per project per transaction: PostgreSQL folds identical ones.
    IF EXISTS (SELECT 1 FROM stream_interest s
               WHERE s.project_id = r.project_id AND s.expires_at > now()) THEN
        PERFORM pg_notify('aicp_watch', r.project_id::text);
    END IF;
    RETURN NULL;
END
$$;

-- Workloads' changes go through them from now on: the same numbers, rows and bell as 0006's
-- and 0014's triggers made.
DROP TRIGGER workloads_number_insert ON workloads;
DROP TRIGGER workloads_number_update ON workloads;
DROP TRIGGER workloads_record_insert ON workloads;
DROP TRIGGER workloads_record_update ON workloads;
DROP TRIGGER workloads_record_delete ON workloads;
DROP FUNCTION number_workload_change();
DROP FUNCTION record_workload_change();

CREATE TRIGGER workloads_number BEFORE INSERT OR UPDATE ON workloads
    FOR EACH ROW EXECUTE FUNCTION number_change();
CREATE TRIGGER workloads_record AFTER INSERT OR UPDATE OR DELETE ON workloads
    FOR EACH ROW EXECUTE FUNCTION record_change('workload');
CREATE TRIGGER services_number BEFORE INSERT OR UPDATE ON services
    FOR EACH ROW EXECUTE FUNCTION number_change();
CREATE TRIGGER services_record AFTER INSERT OR UPDATE OR DELETE ON services
    FOR EACH ROW EXECUTE FUNCTION record_change('service');

-- What a stream sends first: the current workloads and services in the log's columns (what
-- both kinds render from), each with its kind and newest number (`change_id`: a service
-- created before this migration has none until its next change). A query that asks for one
-- kind never reads the other's table (its branch is pruned, or skipped by a one-time filter).
CREATE VIEW watched_now AS
    SELECT 'workload'::text AS kind, id, project_id, pool_id, name, spec, generation,
           observed_generation, state, state_reason, observed, deletion_requested_at,
           created_at, updated_at, created_by, change_id
    FROM workloads
    UNION ALL
    SELECT 'service'::text, id, project_id, pool_id, name, spec, generation,
           observed_generation, state, state_reason, observed, deletion_requested_at,
           created_at, updated_at, created_by, change_id
    FROM services;
