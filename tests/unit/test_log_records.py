"""JSON log lines carry the instance, the request and the resource a reconcile step works on."""

from __future__ import annotations

import contextvars
import io
import json
import logging
from typing import Any

from app.observability.logs import JsonFormatter, _ContextFilter, request_id_var, resource_var


def _logged(message: str) -> dict[str, object]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(_ContextFilter("replica-a"))
    logger = logging.getLogger("aicp.test.records")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning(message)
    finally:
        logger.removeHandler(handler)
    line: dict[str, object] = json.loads(stream.getvalue())
    return line


def _logged_with(var: contextvars.ContextVar[Any], value: str, message: str) -> dict[str, object]:
    """The line of `message` logged while `var` holds `value` (in a copy of this context)."""

    def log() -> dict[str, object]:
        var.set(value)
        return _logged(message)

    return contextvars.copy_context().run(log)


def test_a_reconcile_log_line_names_the_resource_as_a_field() -> None:
    line = _logged_with(
        resource_var,
        "workload:7d1f0c9e-0000-4000-8000-000000000001",
        "workload research/train: QUEUED -> RUNNING",
    )
    assert line["resource"] == "workload:7d1f0c9e-0000-4000-8000-000000000001"
    assert line["instance_id"] == "replica-a"
    assert line["msg"] == "workload research/train: QUEUED -> RUNNING"


def test_a_request_log_line_names_the_request_and_no_resource() -> None:
    line = _logged_with(request_id_var, "req-42", "served")
    assert line["request_id"] == "req-42"
    assert "resource" not in line
