-- 0002: indexes the reconcile engine's sweep and lag queries use (docs/DESIGN.md §5).
--
-- The sweep asks each reconciled table for rows that need work; converged rows are the vast
-- majority, so each question is answered from a partial index whose predicate is, word for word,
-- the WHERE clause of the query (the planner only uses a partial index whose predicate the query
-- implies). workloads_needing_work (0001) already covers the workload sweep.

-- Projects and pools need work while a spec change is unobserved or a deletion is pending. Keyed
-- by updated_at so the same index also answers "the oldest unconverged row" for the lag metric.
CREATE INDEX projects_needing_work ON projects (updated_at)
    WHERE generation <> observed_generation
       OR deletion_requested_at IS NOT NULL;

CREATE INDEX compute_pools_needing_work ON compute_pools (updated_at)
    WHERE generation <> observed_generation
       OR deletion_requested_at IS NOT NULL;

-- Workloads also need work while they run, which is not lag; the lag metric looks only at
-- unobserved specs and pending deletions.
CREATE INDEX workloads_unconverged ON workloads (updated_at)
    WHERE generation <> observed_generation
       OR deletion_requested_at IS NOT NULL;


-- Every replica rewrites expires_at of all its leases every ttl/3. expires_at is in no index, so
-- those can be heap-only (HOT) updates — if the page has room for the new row version. Leave
-- half of each page free for them (measured: a 40k-lease renewal several times faster).
ALTER TABLE leases SET (fillfactor = 50);
