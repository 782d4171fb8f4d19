"""The workload generation the rendering tests render a Job (and its Service) for."""

from __future__ import annotations

from app.domain.render import JobIdentity

UID = "3f2a1c4e-9b8d-4c7a-8e6f-112233445566"
IDENTITY = JobIdentity(project="research", workload="train-7b", uid=UID, generation=1)
