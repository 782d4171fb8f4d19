-- 0023: start estimates (workload_forecasts, 0021) keep the replay's own band beside the one
-- shown, so the pool's scored estimates can calibrate the next bands (docs/PLANNING.md
-- "Calibration"; null in rows written before: the shown band was the replay's), and they are
-- purged by age with the hourly retention round (AICP_FORECAST_RETENTION_DAYS,
-- app/store/retention.py), oldest first.
ALTER TABLE workload_forecasts
    ADD COLUMN replay_earliest timestamptz,
    ADD COLUMN replay_likely   timestamptz,
    ADD COLUMN replay_latest   timestamptz,
    ADD CONSTRAINT workload_forecasts_replay_band
        CHECK (replay_earliest <= replay_likely AND replay_likely <= replay_latest);
CREATE INDEX workload_forecasts_by_age ON workload_forecasts (made_at);
