-- 0004: data that does not grow without bound, and indexes that match the reads they serve.
--
-- * events and tombstones are purged by age (app/store/retention.py): tombstones by deleted_at
--   (new index), events by id, whose order follows their age (the primary key serves it);
-- * no query reads events or tombstones by project: those two indexes only cost writes;
-- * a pool's usage counts only live workloads, from a partial index whose predicate is, word
--   for word, the WHERE clause of the usage subquery (queries pool_by_name, list_pools);
-- * filtered workload lists walk an index in list order on the filtered columns, so a page of
--   ?state=RUNNING in a project with 100k finished workloads reads about one page of rows.
--   (pool_id, ...) indexes also serve what workloads_by_pool (pool_id) did, which goes.

DROP INDEX events_by_project;
DROP INDEX tombstones_by_project;
CREATE INDEX tombstones_by_age ON tombstones (deleted_at);

CREATE INDEX workloads_live_by_pool ON workloads (pool_id)
    WHERE deletion_requested_at IS NULL
      AND state IN ('PENDING', 'QUEUED', 'ADMITTED', 'RUNNING');

CREATE INDEX workloads_by_state_newest_first
    ON workloads (project_id, state, created_at DESC, id DESC);
CREATE INDEX workloads_by_pool_newest_first ON workloads (pool_id, created_at DESC, id DESC);
CREATE INDEX workloads_by_pool_state_newest_first
    ON workloads (pool_id, state, created_at DESC, id DESC);
DROP INDEX workloads_by_pool;
