"""How `aicp describe` lays a resource out: labelled sections, the lineage lines every resource
has, and the event timeline, every value from the server escaped (`printable`)."""

from __future__ import annotations

from typing import Any

import click

from aicp_cli.output import age, printable


def lineage(resource: dict[str, Any]) -> list[tuple[str, Any]]:
    """`describe`'s UID, generation (and the one observed) and creation lines of a resource."""
    observed = (resource.get("status") or {}).get("observed_generation")
    created = resource.get("created_at")
    return [
        ("UID", resource.get("uid")),
        ("Generation", f"{resource.get('generation')} (observed {observed})"),
        ("Created", f"{created} ({age(created)} ago) by {resource.get('created_by')}"),
    ]


def pairs(values: dict[str, Any] | None) -> str:
    """`K=V, K2=V2` (env, labels), or `-` for none."""
    return ", ".join(f"{k}={v}" for k, v in (values or {}).items()) or "-"


def section(title: str, lines: list[tuple[str, Any]]) -> None:
    """`Title:` and its `Label: value` lines, the values aligned (no title: not indented)."""
    indent = ""
    if title:
        click.echo(f"{title}:")
        indent = "  "
    width = max(len(label) for label, _ in lines) + 1
    for label, value in lines:
        shown = "-" if value is None else printable(value)
        click.echo(f"{indent}{(label + ':').ljust(width + 1)} {shown}")


def timeline(events: list[dict[str, Any]]) -> None:
    """`Events:`, oldest first (the API lists them newest first), each with its age and actor."""
    click.echo("Events:")
    if not events:
        click.echo("  (none)")
    for event in reversed(events):
        when, kind = age(event.get("at")), event.get("type") or ""
        message, actor = (
            printable(event.get("message")),
            printable(event.get("actor_name") or event.get("actor")),
        )
        click.echo(f"  {when:>5}  {printable(kind):<18} {message}  [{actor}]")
