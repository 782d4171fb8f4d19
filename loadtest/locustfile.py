"""Realistic aicp users for locust (`FastHttpUser`): ML engineers and a platform admin.

    make loadtest                                    # against make-run-style embedded services
    AICP_LOADTEST_TOKEN=<admin token> .venv/bin/locust -f loadtest/locustfile.py \
        --host https://aicp.example.com --headless -u 50 -r 5 -t 5m   # against a deployment

Before the users start, the platform admin's token (`AICP_LOADTEST_TOKEN`) sets up what the
engineers need, through the API like a person would: the accelerator binding
`AICP_LOADTEST_CLASS` (default `loadtest-gpu`; created only when it does not exist, an existing
binding is used as it is), a fresh project `loadtest-<random>` and in it a compute pool and an
editor token. Every engineer uses that editor token.

- `MLEngineer` (most users): submits small workloads (1 accelerator, a few seconds of simulated
  work in kubesim), polls the status of its own, lists the project's workloads page by page,
  reads a workload's events and logs, and deletes its finished ones.
- `PlatformAdmin` (one in ten): creates projects and project tokens, lists projects.

Every answer is checked against what the API promises (202 on a submit, 200 on a read, 404 for
logs while a workload has no pod yet); anything else is a locust failure. Workload and
project names are unique per run, so a second run against the same deployment starts clean.
"""

from __future__ import annotations

import os
import random
import secrets
from typing import Any

from locust import FastHttpUser, between, events, task
from locust.env import Environment

API = "/api/v1"
CLASS = os.environ.get("AICP_LOADTEST_CLASS", "loadtest-gpu")
# kubesim's containers run for KUBESIM_RUN_SECONDS; a real cluster runs the image as it is.
IMAGE = os.environ.get("AICP_LOADTEST_IMAGE", "ghcr.io/acme/train:1.4")
RUN_SECONDS = os.environ.get("AICP_LOADTEST_RUN_SECONDS", "2")
POOL = "loadtest-pool"
RUN = secrets.token_hex(3)


class Shared:
    """What the setup made: the project the engineers work in and their editor token."""

    project: str = ""
    editor_token: str = ""


def _admin_token() -> str:
    token = os.environ.get("AICP_LOADTEST_TOKEN", "")
    if not token:
        raise SystemExit("Set AICP_LOADTEST_TOKEN to the platform admin's token.")
    return token


def _expect(response: Any, *statuses: int) -> Any:
    if response.status_code not in statuses:
        raise SystemExit(
            f"{response.request.method} {response.request.url} -> {response.status_code}, "
            f"expected {statuses}: {response.text[:500]}"
        )
    return response


@events.test_start.add_listener
def set_up(environment: Environment, **_: object) -> None:
    """Binding (if missing), project, pool and editor token, as the platform admin."""
    import httpx

    headers = {"Authorization": f"Bearer {_admin_token()}"}
    with httpx.Client(base_url=environment.host or "", headers=headers, timeout=30) as client:
        binding = f"{API}/accelerator-bindings/{CLASS}"
        if client.get(binding).status_code == 404:
            body = {
                "resource_name": "nvidia.com/gpu",
                "flavor": CLASS,
                "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            }
            _expect(client.put(binding, json=body), 200, 201)
        project = f"loadtest-{RUN}"
        _expect(client.post(f"{API}/projects", json={"name": project}), 202)
        pool = {
            "name": POOL,
            "accelerator_class": CLASS,
            "quota": {"accelerators": 16, "cpu": "256", "memory": "2Ti"},
        }
        _expect(client.post(f"{API}/projects/{project}/compute-pools", json=pool), 202)
        token = {"name": "engineers", "role": "editor", "expires_in_days": 1}
        created = _expect(client.post(f"{API}/projects/{project}/tokens", json=token), 201)
    Shared.project = project
    Shared.editor_token = created.json()["token"]


class MLEngineer(FastHttpUser):
    """Submits, watches and cleans up its own workloads in the shared project."""

    weight = 9
    wait_time = between(0.5, 2.0)

    def on_start(self) -> None:
        self.headers = {"Authorization": f"Bearer {Shared.editor_token}"}
        self.mine: list[str] = []
        self.submitted = 0
        self.me = secrets.token_hex(3)
        self.submit()  # an engineer arrives with a job to run

    @property
    def workloads(self) -> str:
        return f"{API}/projects/{Shared.project}/workloads"

    @task(3)
    def submit(self) -> None:
        self.submitted += 1
        name = f"w-{RUN}-{self.me}-{self.submitted}"
        body = {
            "name": name,
            "compute_pool": POOL,
            "image": IMAGE,
            "command": ["python", "train.py"],
            "args": ["--epochs", "1"],
            "accelerators": 1,
            "cpu": "2",
            "memory": "8Gi",
            "env": {"KUBESIM_RUN_SECONDS": RUN_SECONDS},
            "labels": {"team": "loadtest"},
        }
        with self.rest(
            "POST", self.workloads, json=body, headers=self.headers, name="POST workloads"
        ) as resp:
            if resp.status_code == 202:
                self.mine.append(name)
            else:
                resp.failure(f"submit answered {resp.status_code}")

    @task(10)
    def poll_status(self) -> None:
        if not self.mine:
            return
        name = random.choice(self.mine)
        with self.rest(
            "GET", f"{self.workloads}/{name}", headers=self.headers, name="GET workload"
        ) as resp:
            if resp.status_code != 200:
                resp.failure(f"status answered {resp.status_code}")
            elif resp.js["status"]["state"] not in _STATES:
                resp.failure(f"unknown state {resp.js['status']['state']!r}")

    @task(3)
    def list_pages(self) -> None:
        """The first page, then up to two more with `next_cursor`, as a table view would."""
        url = f"{self.workloads}?limit=20"
        for _ in range(3):
            with self.rest("GET", url, headers=self.headers, name="GET workloads page") as resp:
                if resp.status_code != 200:
                    resp.failure(f"list answered {resp.status_code}")
                    return
                cursor = resp.js["next_cursor"]
            if cursor is None:
                return
            url = f"{self.workloads}?limit=20&cursor={cursor}"

    @task(2)
    def read_events(self) -> None:
        if not self.mine:
            return
        name = random.choice(self.mine)
        with self.rest(
            "GET", f"{self.workloads}/{name}/events", headers=self.headers, name="GET events"
        ) as resp:
            if resp.status_code != 200 or not resp.js["items"]:
                resp.failure(f"events answered {resp.status_code}")

    @task(1)
    def read_logs(self) -> None:
        if not self.mine:
            return
        name = random.choice(self.mine)
        with self.client.get(
            f"{self.workloads}/{name}/logs?tail=50",
            headers=self.headers,
            name="GET logs",
            catch_response=True,
        ) as resp:
            # 404 is the documented answer while the workload has no pod (not admitted yet).
            if resp.status_code in (200, 404):
                resp.success()
            else:
                resp.failure(f"logs answered {resp.status_code}")

    @task(1)
    def delete_one(self) -> None:
        if len(self.mine) < 5:
            return
        name = self.mine.pop(0)
        with self.rest(
            "DELETE", f"{self.workloads}/{name}", headers=self.headers, name="DELETE workload"
        ) as resp:
            if resp.status_code == 404:
                resp.success()  # already cleaned up by someone else: nothing lost
            elif resp.status_code != 202:
                resp.failure(f"delete answered {resp.status_code}")


class PlatformAdmin(FastHttpUser):
    """Onboards teams: a project, then tokens for its people; browses the project list."""

    weight = 1
    wait_time = between(2.0, 5.0)

    def on_start(self) -> None:
        self.headers = {"Authorization": f"Bearer {_admin_token()}"}
        self.projects: list[str] = []
        self.created = 0

    @task(1)
    def create_project(self) -> None:
        self.created += 1
        name = f"lt-{RUN}-{secrets.token_hex(2)}-{self.created}"
        body = {"name": name, "display_name": f"Load test team {self.created}"}
        with self.rest(
            "POST", f"{API}/projects", json=body, headers=self.headers, name="POST projects"
        ) as resp:
            if resp.status_code == 202:
                self.projects.append(name)
            else:
                resp.failure(f"project create answered {resp.status_code}")

    @task(3)
    def create_token(self) -> None:
        if not self.projects:
            return
        project = random.choice(self.projects)
        body = {
            "name": f"t-{secrets.token_hex(4)}",
            "role": random.choice(["viewer", "editor", "admin"]),
            "expires_in_days": 30,
        }
        with self.rest(
            "POST",
            f"{API}/projects/{project}/tokens",
            json=body,
            headers=self.headers,
            name="POST tokens",
        ) as resp:
            if resp.status_code != 201 or not resp.js["token"]:
                resp.failure(f"token create answered {resp.status_code}")

    @task(2)
    def list_projects(self) -> None:
        with self.rest(
            "GET", f"{API}/projects?limit=50", headers=self.headers, name="GET projects"
        ) as resp:
            if resp.status_code != 200:
                resp.failure(f"project list answered {resp.status_code}")


_STATES = frozenset({"PENDING", "QUEUED", "ADMITTED", "RUNNING", "SUCCEEDED", "FAILED", "DELETING"})
