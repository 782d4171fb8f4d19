"""What the command line reports instead of a traceback.

    CliError            a local problem (bad file, no context, usage): one line, exit 1
    ├── ApiError        the server answered with an RFC 9457 problem: title, detail, fields
    └── Unreachable     no answer at all (refused, DNS, timeout, TLS): what and where

`main()` prints `error: <message>` on standard error and exits with `exit_code`.
"""

from __future__ import annotations

from typing import Any


class CliError(Exception):
    exit_code = 1

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code


class ApiError(CliError):
    """A problem document from the server (or a non-JSON error answer)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        self.slug = str(problem.get("type", "")).rsplit("/", 1)[-1]
        super().__init__(_one_line(status, problem))

    def naming(self, options: dict[str, str]) -> ApiError:
        """The same problem with its invalid fields named as the command line's options
        (`compute_pool` → `--pool`), for a command whose options fill those fields."""
        errors = [
            {**error, "field": options.get(str(error.get("field")), error.get("field"))}
            if isinstance(error, dict)
            else error
            for error in self.problem.get("errors") or []
        ]
        return ApiError(self.status, {**self.problem, "errors": errors} if errors else self.problem)


def _one_line(status: int, problem: dict[str, Any]) -> str:
    title = str(problem.get("title") or f"HTTP {status}")
    detail = str(problem.get("detail") or "")
    text = title if not detail or detail == title else f"{title}: {detail}"
    fields = [
        f"{error.get('field', '?')}: {error.get('message', '')}"
        for error in problem.get("errors") or []
        if isinstance(error, dict)
    ]
    if fields:
        text += " (" + "; ".join(fields) + ")"
    if problem.get("referenced_by"):
        text += " (used by " + ", ".join(map(str, problem["referenced_by"])) + ")"
    if problem.get("request_id"):
        text += f" [request id {problem['request_id']}]"
    return text


class Unreachable(CliError):
    """The server did not answer."""
