-- 0007: the reconciler's periodic queries cost the same with a million finished workloads in the
-- tables as with none (loadtest/finished_rows_plans.py checks each plan).
--
-- * A released lease now names no owner (query lease_release): leases_by_owner then holds only
--   the leases each replica has (or had when it died), not every lease it ever let go, so the
--   renewal, the resync after a LISTEN gap and the held count read one index entry per held lease.
--   Leases released before this migration are handed to nobody the same way (a later claim is a
--   change of owner, epoch + 1, exactly as for a lease a peer takes over).
-- * Stuck deletions are counted from an index of the rows being deleted: the condition
--   `deletion_requested_at < ...` implies this predicate, so the planner uses it.

UPDATE leases SET owner = '' WHERE expires_at <= now() AND owner <> '';

CREATE INDEX workloads_being_deleted ON workloads (deletion_requested_at)
    WHERE deletion_requested_at IS NOT NULL;
