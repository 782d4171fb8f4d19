"""How `aicp describe service` shows an inference service: its spec, its status (state and
reason, endpoint, Deployment, replica counts), one line for each replica (pod), and the
event timeline."""

from __future__ import annotations

from typing import Any

import click

from aicp_cli.describing import lineage, pairs, section, timeline
from aicp_cli.kinds import desired
from aicp_cli.output import printable


def _autoscaling(spec: dict[str, Any]) -> str:
    scaling = spec.get("autoscaling")
    if not scaling:
        return "off"
    return (
        f"{scaling.get('min_replicas')}-{scaling.get('max_replicas')} replicas, aiming at "
        f"{scaling.get('target_cpu_percent')} % CPU (the autoscaler sets the count)"
    )


def _replicas_asked(spec: dict[str, Any]) -> str:
    replicas = spec.get("replicas")
    return f"{replicas} (not used while autoscaling)" if spec.get("autoscaling") else str(replicas)


def _counts(service: dict[str, Any]) -> str:
    replicas = (service.get("status") or {}).get("replicas") or {}
    return (
        f"{replicas.get('ready', 0)} ready of {desired(service)} desired, "
        f"{replicas.get('updated', 0)} updated, "
        f"{replicas.get('waiting_for_quota', 0)} waiting for quota"
    )


def pod_line(pod: dict[str, Any]) -> str:
    """`name: Running on gpu-node-0, ready, 0 restarts; last ended OOMKilled (exit code
    137) at ...`: one replica, escaped."""
    node = f" on {pod['node']}" if pod.get("node") else ""
    parts = [
        f"{pod.get('phase') or '-'}{node}",
        "ready" if pod.get("ready") else "not ready",
        f"{pod.get('restarts', 0)} restart{'' if pod.get('restarts') == 1 else 's'}",
    ]
    if pod.get("waiting_for_quota"):
        parts.append("waiting for quota")
    line = f"{pod.get('name')}: " + ", ".join(parts)
    ended = pod.get("last_termination")
    if ended:
        code = ended.get("exit_code")
        line += f"; last ended {ended.get('reason') or 'with no reason given'}"
        line += "" if code is None else f" (exit code {code})"
        line += f" at {ended['finished_at']}" if ended.get("finished_at") else ""
    return printable(line)


def describe_service(s: dict[str, Any], events: list[dict[str, Any]]) -> None:
    spec, status = s.get("spec") or {}, s.get("status") or {}
    section(
        "",
        [
            ("Name", s["name"]),
            ("Project", s.get("project")),
            ("Compute pool", s.get("compute_pool")),
            *lineage(s),
        ],
    )
    command = " ".join([*(spec.get("command") or []), *(spec.get("args") or [])])
    section(
        "Spec",
        [
            ("Image", spec.get("image")),
            ("Command", command or "(the image's default)"),
            ("Replicas", _replicas_asked(spec)),
            ("Autoscaling", _autoscaling(spec)),
            ("Accelerators", f"{spec.get('accelerators')} per replica"),
            ("CPU / memory", f"{spec.get('cpu')} / {spec.get('memory')} per replica"),
            ("Port", spec.get("port")),
            ("Readiness path", spec.get("readiness_path")),
            ("Priority", spec.get("priority")),
            ("Env", pairs(spec.get("env"))),
            ("Labels", pairs(spec.get("labels"))),
        ],
    )
    deployment = status.get("deployment") or {}
    section(
        "Status",
        [
            ("State", status.get("state")),
            ("Reason", status.get("reason")),
            ("Endpoint", status.get("endpoint") or "-"),
            ("Deployment", deployment.get("name") or "-"),
            ("Replicas", _counts(s)),
            ("Nodes", ", ".join(status.get("nodes") or []) or "-"),
            ("Updated", status.get("updated_at") or "-"),
        ],
    )
    click.echo("Pods:")
    pods = status.get("pods") or []
    if not pods:
        click.echo("  (none)")
    for pod in pods:
        click.echo(f"  {pod_line(pod)}")
    timeline(events)
