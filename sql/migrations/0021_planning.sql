-- 0021: planning (docs/PLANNING.md): where a queued workload stands in its pool's queue, when
-- it will likely be admitted, and how good those estimates turned out to be.

-- When the current generation was accepted: Kueue orders a pool's queue by priority, then by
-- the creation time of the generation's Job (its Kueue Workload), which follows this within
-- milliseconds. A replacement (a new generation, a new Job) sets it again.
ALTER TABLE workloads ADD COLUMN generation_at timestamptz;
UPDATE workloads SET generation_at = created_at;
ALTER TABLE workloads ALTER COLUMN generation_at SET DEFAULT clock_timestamp();
ALTER TABLE workloads ALTER COLUMN generation_at SET NOT NULL;

-- A pool's live workloads (the queue and what holds its quota) are one read of
-- workloads_live_by_pool (0004). Its finished ones are not: the history is the project's.
-- A project's finished workloads, newest first: the durations the estimates draw from.
CREATE INDEX workloads_finished_by_project ON workloads (project_id, updated_at DESC)
    WHERE state IN ('SUCCEEDED', 'FAILED');

-- Every estimate the controller made of a workload generation's admission, and, once Kueue
-- admitted it, when that happened. `earliest`, `likely`, `latest` are p10, p50 and p90 (null:
-- no estimate, `basis` says why). Kept with the pool; a pool's deletion removes them.
CREATE TABLE workload_forecasts (
    id            bigserial PRIMARY KEY,
    workload_id   uuid NOT NULL,
    pool_id       uuid NOT NULL REFERENCES compute_pools (id) ON DELETE CASCADE,
    generation    bigint NOT NULL,
    made_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    position      integer NOT NULL,
    earliest      timestamptz,
    likely        timestamptz,
    latest        timestamptz,
    basis         text NOT NULL,
    started_at    timestamptz,
    CHECK (earliest <= likely AND likely <= latest)
);
-- The estimates of a generation still waiting for its admission.
CREATE INDEX workload_forecasts_open ON workload_forecasts (workload_id, generation)
    WHERE started_at IS NULL;
-- A pool's scored estimates, newest first (forecast-accuracy).
CREATE INDEX workload_forecasts_scored ON workload_forecasts (pool_id, started_at DESC)
    WHERE started_at IS NOT NULL;
