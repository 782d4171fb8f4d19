"""`aicp apply`: `--dry-run` asks the server, and what `aicp get -o yaml` prints applies back.

The CLI runs as a subprocess (the installed console script) against a running aicp on
kubesim, as in tests/e2e/test_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_cli import admin_cli
from tests.support.scenario import CLASS, POOL, PROJECT
from tests.support.service import RunningService

pytestmark = pytest.mark.timeout(180)

#: Fits no pool of 16 GPUs (the server knows; the file alone does not say).
TOO_BIG = "name: huge\ncompute_pool: h100-pool\nimage: busybox\naccelerators: 64\nreplicas: 2\n"
#: A pool of a class no binding defines.
NO_CLASS = (
    "kind: ComputePool\nname: other\naccelerator_class: a100\n"
    "quota: {accelerators: 1, cpu: '1', memory: 1Gi}\n"
)
FITS = "name: small\ncompute_pool: h100-pool\nimage: busybox\n"


async def test_a_dry_run_shows_the_servers_errors_as_a_real_apply_does_and_changes_nothing(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    (tmp_path / "all.yaml").write_text("---\n".join([FITS, TOO_BIG, NO_CLASS]))

    dry = await cli.run("apply", "-f", "all.yaml", "--dry-run")

    assert dry.code == 1
    assert dry.error_lines[0].startswith(
        "error: all.yaml#2: workload/huge: Workload exceeds the compute pool's capacity: "
    ), dry.err
    assert dry.error_lines[1].startswith(
        "error: all.yaml#3: computepool/other: Request body is invalid: 1 field is invalid "
        "(accelerator_class: "
    ), dry.err
    assert dry.error_lines[2] == "error: 2 of 3 documents failed"
    lines = dry.out.splitlines()
    assert lines[0] == "workload/small created (dry run)"
    assert "admission: admit_now (an estimate, not a reservation)" in lines
    assert "  accelerators: requested 0, free 16 of 16 (0 in use)" in lines
    assert "+cpu: '1'" in lines and "+memory: 1Gi" in lines  # the server's defaults
    for name in ("small", "huge"):
        assert await running_service.scenario().workload(name) is None

    real = await cli.run("apply", "-f", "all.yaml")

    assert real.code == 1 and real.error_lines == dry.error_lines
    assert real.out == "workload/small created\n"


async def test_run_dry_run_says_where_the_workload_would_wait_and_submits_nothing(
    running_service: RunningService, tmp_path: Path
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool(accelerators=8)
    await scenario.submit("hold", env={"KUBESIM_RUN_SECONDS": "600"})
    await scenario.wait_state("hold", "RUNNING")
    cli = admin_cli(running_service, tmp_path)

    args = ["--pool", POOL, "--gpus", "8", "--image", "i", "--name", "next"]
    waits = await cli.run("run", *args, "--dry-run", "--", "train")
    urgent = await cli.run("run", *args, "--priority", "high", "--dry-run", "--", "train")

    assert waits.code == 0, waits.err
    lines = waits.out.splitlines()
    assert lines[:2] == [
        "workload/next created (dry run)",
        "admission: queue (an estimate, not a reservation)",
    ]
    assert "  position 1 in the queue" in lines
    assert "  no estimate of its start" in lines  # no finished workload to learn from yet
    assert urgent.code == 0, urgent.err
    assert "  would preempt: hold" in urgent.out.splitlines()
    assert await scenario.workload("next") is None


async def test_a_dry_run_of_a_changed_pool_prints_the_diff_and_of_the_same_one_unchanged(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    pool = (await cli.run("get", "pool", POOL, "-o", "yaml")).out
    (tmp_path / "p.yaml").write_text(pool.replace("accelerators: 16", "accelerators: 8"))

    changed = await cli.run("apply", "-f", "p.yaml", "--dry-run")

    assert changed.code == 0, changed.err
    assert changed.out.splitlines()[0] == f"computepool/{POOL} configured (dry run)"
    assert "-  accelerators: 16\n+  accelerators: 8" in changed.out
    stored = await running_service.client.get(f"/api/v1/projects/{PROJECT}/compute-pools/{POOL}")
    assert stored.json()["quota"]["accelerators"] == 16 and stored.json()["generation"] == 1


@pytest.mark.parametrize("fmt", ["yaml", "json"])
async def test_what_get_prints_applies_back_unchanged_for_every_kind_and_list(
    running_service: RunningService, tmp_path: Path, fmt: str
) -> None:
    await running_service.scenario().setup_pool()
    await running_service.api.create_project(
        "limited", limits={"accelerators": {CLASS: 8}, "cpu": "64"}
    )
    await running_service.scenario().submit("train", env={"KUBESIM_RUN_SECONDS": "60"})
    cli = admin_cli(running_service, tmp_path)
    shown = {
        "workload/train": ("get", "workload", "train"),
        "computepool/h100-pool": ("get", "pool", POOL),
        f"project/{PROJECT}": ("get", "project", PROJECT),
        "project/limited": ("get", "project", "limited"),
        f"acceleratorbinding/{CLASS}": ("get", "binding", CLASS),
    }
    lists = {
        "workloads": ["workload/train"],
        "pools": ["computepool/h100-pool"],
        "projects": ["project/limited", f"project/{PROJECT}"],
        "bindings": [f"acceleratorbinding/{CLASS}"],
    }
    files = []
    for index, command in enumerate([*shown.values(), *(("get", p) for p in lists)]):
        printed = await cli.run(*command, "-o", fmt)
        assert printed.code == 0, printed.err
        (tmp_path / f"{index}.{fmt}").write_text(printed.out)
        files += ["-f", f"{index}.{fmt}"]
    expected = sorted(
        [
            *(f"{label} unchanged" for label in shown),
            *(f"{name} unchanged" for names in lists.values() for name in names),
        ]
    )

    applied = await cli.run("apply", *files)
    dry = await cli.run("apply", *files, "--dry-run")

    assert applied.code == 0, applied.err
    assert sorted(applied.out.splitlines()) == expected
    assert dry.code == 0, dry.err
    assert sorted(dry.out.splitlines()) == [f"{line} (dry run)" for line in expected]
    workload = await running_service.scenario().workload("train")
    assert workload is not None and workload["generation"] == 1


async def test_a_resource_of_another_project_is_refused_and_a_token_is_not_applied(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    (tmp_path / "p.yaml").write_text((await cli.run("get", "pool", POOL, "-o", "yaml")).out)
    await cli.run("create", "token", "ci", "--role", "viewer", "--expires-in-days", "1")
    (tmp_path / "t.yaml").write_text((await cli.run("get", "tokens", "-o", "yaml")).out)

    elsewhere = await cli.run("-p", "other", "apply", "-f", "p.yaml")
    token = await cli.run("apply", "-f", "t.yaml")

    assert elsewhere.code == 1
    assert elsewhere.error_lines[0] == (
        "error: p.yaml: computepool/h100-pool: the document is of project 'research', "
        "not 'other' (drop its `project` or pass --project to match)"
    )
    assert token.code == 1
    assert token.error_lines == [
        "error: t.yaml items[0]: tokens are not applied from files; use 'aicp create token'"
    ]
