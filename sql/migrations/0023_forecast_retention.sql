-- 0023: the estimates of queued workloads' starts (workload_forecasts, 0021) are purged by age
-- with the hourly retention round (AICP_FORECAST_RETENTION_DAYS, app/store/retention.py): the
-- purge walks them oldest first.
CREATE INDEX workload_forecasts_by_age ON workload_forecasts (made_at);
