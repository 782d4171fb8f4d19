"""PostgreSQL fixtures: filled in by the storage work."""
