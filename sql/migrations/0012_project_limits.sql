-- 0012: a project's limits, the ceilings on what its compute pools hold together.
--
-- NULL is no limit: every project made before this migration keeps today's behaviour. The
-- value is the API's ProjectLimits ({"accelerators": {class: n} | null, "cpu": q | null,
-- "memory": q | null}); app/store/pools.py checks a pool's create or quota change against it
-- under a per-project advisory lock, so two pools created at once cannot both slip under it.

ALTER TABLE projects ADD COLUMN limits jsonb;
