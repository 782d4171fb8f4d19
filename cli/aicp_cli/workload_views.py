"""How `aicp describe` shows a workload (spec, status and its reason, its place in the queue
and estimated start, admission, nodes, accelerator evidence, each rank, the event timeline)
and a project (its state and limits)."""

from __future__ import annotations

from typing import Any

import click

from aicp_cli.describing import lineage, pairs, section, timeline
from aicp_cli.output import eta_span


def _accelerators_line(spec: dict[str, Any]) -> tuple[str, str]:
    nodes = spec.get("nodes") or 1
    if nodes > 1:
        return ("Accelerators", f"{spec.get('accelerators')} per node x {nodes} nodes (ranks)")
    return (
        "Accelerators",
        f"{spec.get('accelerators')} per replica x {spec.get('replicas')} replica(s)",
    )


def _start_deadline(seconds: Any) -> str:
    if seconds is None:
        return "none (submitted before start deadlines existed)"
    return f"{seconds} s after admission"


def _queue_lines(queue: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """A queued workload's standing: position, who is ahead, the estimate and its basis."""
    if not queue:
        return []
    ahead = queue.get("ahead") or []
    count = queue.get("ahead_count", len(ahead))
    listed = ", ".join(ahead) + (f" and {count - len(ahead)} more" if count > len(ahead) else "")
    eta = queue.get("eta")
    return [
        (
            "Queue position",
            f"{queue.get('position')} ({count} ahead{': ' + listed if ahead else ''})",
        ),
        (
            "Estimated start",
            f"in {eta_span(eta)}: likely {eta.get('likely')} (between {eta.get('earliest')} "
            f"and {eta.get('latest')}; an estimate, not a reservation)"
            if eta
            else "no estimate",
        ),
        ("Estimate basis", queue.get("eta_basis")),
    ]


def describe_workload(w: dict[str, Any], events: list[dict[str, Any]]) -> None:
    spec, status = w.get("spec") or {}, w.get("status") or {}
    lines: list[tuple[str, Any]] = [
        ("Name", w["name"]),
        ("Project", w.get("project")),
        ("Compute pool", w.get("compute_pool")),
        *lineage(w),
    ]
    section("", lines)
    command = " ".join([*(spec.get("command") or []), *(spec.get("args") or [])])
    section(
        "Spec",
        [
            ("Image", spec.get("image")),
            ("Command", command or "(the image's default)"),
            _accelerators_line(spec),
            ("CPU / memory", f"{spec.get('cpu')} / {spec.get('memory')} per replica"),
            ("Max runtime", f"{spec.get('max_runtime_seconds')} s"),
            ("Start deadline", _start_deadline(spec.get("start_deadline_seconds"))),
            ("Retries", spec.get("retries")),
            ("Priority", spec.get("priority")),
            ("Env", pairs(spec.get("env"))),
            ("Labels", pairs(spec.get("labels"))),
        ],
    )
    admission = status.get("admission") or {}
    accelerator = status.get("accelerator") or {}
    job = status.get("job") or {}
    section(
        "Status",
        [
            ("State", status.get("state")),
            ("Reason", status.get("reason")),
            ("Job", job.get("name") or "-"),
            (
                "Admission",
                f"cluster queue {admission.get('cluster_queue')}, "
                f"flavor {admission.get('flavor')}, at {admission.get('admitted_at')}"
                if admission
                else "-",
            ),
            ("Nodes", ", ".join(status.get("nodes") or []) or "-"),
            (
                "Accelerator",
                f"{accelerator.get('product')} x {accelerator.get('count')}"
                + (
                    f" ({accelerator.get('memory_mib')} MiB each)"
                    if accelerator.get("memory_mib")
                    else ""
                )
                if accelerator
                else "-",
            ),
            ("Attempts", status.get("attempts")),
            ("Started", status.get("started_at") or "-"),
            ("Finished", status.get("finished_at") or "-"),
            ("Exit code", "-" if status.get("exit_code") is None else status.get("exit_code")),
            *_queue_lines(status.get("queue")),
        ],
    )
    ranks = status.get("ranks") or []
    if ranks:
        click.echo("Ranks:")
        for rank in ranks:
            code = rank.get("exit_code")
            ended = "" if code is None else f", exit code {code}"
            oom = " (OOMKilled)" if rank.get("oom_killed") else ""
            product = f" ({rank['accelerator_product']})" if rank.get("accelerator_product") else ""
            click.echo(
                f"  {rank.get('rank')}: {rank.get('phase') or '-'} on "
                f"{rank.get('node') or '-'}{product}, pod {rank.get('pod') or '-'}{ended}{oom}"
            )
    timeline(events)


def describe_project(p: dict[str, Any]) -> None:
    status = p.get("status") or {}
    limits = p.get("limits") or {}
    section(
        "",
        [
            ("Name", p["name"]),
            ("Display name", p.get("display_name")),
            ("Namespace", p.get("namespace")),
            *lineage(p),
            ("State", status.get("state")),
            ("Reason", status.get("reason")),
        ],
    )
    accelerators = limits.get("accelerators")
    section(
        "Limits (what its compute pools may hold together)",
        [
            (
                "Accelerators",
                "no ceiling"
                if accelerators is None
                else ", ".join(f"{k}={v}" for k, v in sorted(accelerators.items()))
                or "none of any class",
            ),
            ("CPU", limits.get("cpu") or "no ceiling"),
            ("Memory", limits.get("memory") or "no ceiling"),
        ],
    )
