"""Metrics (Prometheus) and structured logs, shared by every layer above the domain."""
