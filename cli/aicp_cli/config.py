"""Contexts: which aicp server, which token, which project, kept between commands.

The file is `config.yaml` in the user's configuration directory (`$XDG_CONFIG_HOME/aicp`,
usually `~/.config/aicp`; `AICP_CONFIG` names another file), mode 0600 in a 0700 directory:
it holds bearer tokens. Like kubectl's kubeconfig it has named contexts and a current one::

    current-context: research
    contexts:
      research: {url: "http://127.0.0.1:8080", token: "aicp_...", project: research}
      sso: {url: "...", token: "<access token>", oidc: {issuer: ..., refresh_token: ..., ...}}

A context made by `aicp login --oidc` keeps the person's access token as its `token` and, under
`oidc`, what renews it (issuer, client id, token endpoint, refresh token, expiry;
`aicp_cli.oidc.fresh`).

`AICP_URL`, `AICP_TOKEN` and `AICP_PROJECT` override the context's values (CI pipelines need
no file at all).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from aicp_cli.errors import CliError


@dataclass(frozen=True)
class Context:
    name: str
    url: str
    token: str
    project: str | None = None
    oidc: dict[str, Any] | None = None
    """How to renew `token` (a context of `aicp login --oidc`); None for API tokens."""


def config_path() -> Path:
    override = os.environ.get("AICP_CONFIG")
    if override:
        return Path(override)
    return Path(click.get_app_dir("aicp")) / "config.yaml"


def load() -> dict[str, Any]:
    path = config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {"contexts": {}}
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise CliError(f"{path} is not valid YAML: {yaml_problem(exc)}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("contexts", {}), dict):
        raise CliError(f"{path} is not an aicp configuration (no 'contexts' mapping)")
    data.setdefault("contexts", {})
    return data


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong with a YAML text, in one line: the problem and where."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return str(problem)


def save(data: dict[str, Any]) -> Path:
    """Write the file with owner-only permissions (it holds tokens)."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = yaml.safe_dump(data, sort_keys=True, default_flow_style=False)
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)
    return path


def store_context(context: Context, *, make_current: bool = True) -> Path:
    data = load()
    entry: dict[str, Any] = {"url": context.url, "token": context.token}
    if context.project:
        entry["project"] = context.project
    if context.oidc:
        entry["oidc"] = context.oidc
    data["contexts"][context.name] = entry
    if make_current or not data.get("current-context"):
        data["current-context"] = context.name
    return save(data)


def resolve(name: str | None, project: str | None) -> Context:
    """The context to use: `name` (or the current one) with the environment's overrides."""
    data = load()
    chosen = name or os.environ.get("AICP_CONTEXT") or data.get("current-context")
    entry: dict[str, Any] = {}
    if chosen:
        found = data["contexts"].get(chosen)
        if found is None and name is not None:
            known = ", ".join(sorted(data["contexts"])) or "none"
            raise CliError(f"no context named {name!r} (known: {known})")
        if found is not None and not isinstance(found, dict):
            raise CliError(
                f"{config_path()}: context {chosen!r} is not a mapping (url, token, project)"
            )
        entry = found or {}
    url = os.environ.get("AICP_URL") or entry.get("url")
    token = os.environ.get("AICP_TOKEN") or entry.get("token")
    if not url or not token:
        raise CliError(
            "not logged in: run 'aicp login --url URL --token TOKEN', or set AICP_URL and "
            "AICP_TOKEN"
        )
    chosen_project = project or os.environ.get("AICP_PROJECT") or entry.get("project")
    renewal = entry.get("oidc") if not os.environ.get("AICP_TOKEN") else None
    return Context(
        chosen or "(environment)",
        str(url).rstrip("/"),
        str(token),
        chosen_project,
        renewal if isinstance(renewal, dict) else None,
    )


def store_tokens(name: str, token: str, oidc: dict[str, Any] | None) -> None:
    """Replace a saved context's token and its renewal (None: drop them)."""
    data = load()
    entry = data["contexts"].get(name)
    if not isinstance(entry, dict):
        return
    if oidc is None:
        entry.pop("oidc", None)
        entry.pop("token", None)
    else:
        entry["token"] = token
        entry["oidc"] = oidc
    save(data)


def use(name: str) -> None:
    data = load()
    if name not in data["contexts"]:
        known = ", ".join(sorted(data["contexts"])) or "none"
        raise CliError(f"no context named {name!r} (known: {known})")
    data["current-context"] = name
    save(data)


def forget(name: str) -> None:
    data = load()
    if data["contexts"].pop(name, None) is None:
        raise CliError(f"no context named {name!r}")
    if data.get("current-context") == name:
        with contextlib.suppress(StopIteration):
            data["current-context"] = next(iter(sorted(data["contexts"])))
        if not data["contexts"]:
            data.pop("current-context", None)
    save(data)
