-- 0009: the aicp_workloads gauge counts live workloads from an index of live workloads only.
--
-- workloads_needing_work (0001) also holds every live row, but its predicate compares two
-- columns (generation <> observed_generation), which the planner cannot estimate: it takes the
-- index for nearly the whole table and scans instead. This predicate is, word for word, the
-- WHERE clause of query steps_workload_state_counts, on a column with statistics; keyed by
-- state, the count is an index-only scan of the live rows.

CREATE INDEX workloads_live_by_state ON workloads (state)
    WHERE state NOT IN ('SUCCEEDED', 'FAILED');
