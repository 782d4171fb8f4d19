"""Logging: one JSON object per line in production, a readable line in the console.

Every record carries the process's ``instance_id``; while a request is being served, its
``request_id`` (a context variable set by the HTTP layer, so it follows the request's task); and
while a reconcile step runs, the ``resource`` key it works on (set by the worker).
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from typing import Literal

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "aicp_request_id", default=None
)
# The resource a reconcile step is working on (`workload:<uuid>`), set by the worker running it.
resource_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "aicp_resource", default=None
)

_STANDARD_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__.keys()
    | {"message", "asctime", "color_message"}  # uvicorn's ANSI copy of the message
)


class _ContextFilter(logging.Filter):
    def __init__(self, instance_id: str) -> None:
        super().__init__()
        self.instance_id = instance_id

    def filter(self, record: logging.LogRecord) -> bool:
        record.instance_id = self.instance_id
        record.request_id = request_id_var.get()
        record.resource = resource_var.get()
        return True


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", "instance_id", "request_id", "resource", ...extra,
    "exc"}`` (keys whose value is None are left out)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and value is not None:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class ConsoleFormatter(logging.Formatter):
    """``HH:MM:SS level logger: message [request_id]``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        request_id = getattr(record, "request_id", None)
        return f"{line} [{request_id}]" if request_id else line


def configure_logging(
    log_format: Literal["json", "console"], instance_id: str, level: int = logging.INFO
) -> None:
    """Route every logger (uvicorn's included) to one stderr handler in the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else ConsoleFormatter())
    handler.addFilter(_ContextFilter(instance_id))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
