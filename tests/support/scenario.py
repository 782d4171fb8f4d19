"""The scenario API: what every harness sets up and waits for, over the real HTTP API.

A `Scenario` is one project seen through an admin client: the binding, the project and a pool
(`setup_pool`, waited for until READY), tokens, workloads submitted and read, and waits for a
workload's state or its end, each with a deadline (tests/support/waiting.py), never a sleep.
The integration, e2e, acceptance and fault tests and the load-test harnesses all use it;
a harness says what differs (the project's name, its workloads' defaults, how long to wait)
when it makes one, and a harness whose requests travel differently (the fault tests retry
across replicas) overrides `Api.request` alone.

    scenario = Scenario(client)                     # project "research", pool "h100-pool"
    await scenario.setup_pool(accelerators=16)
    await scenario.submit("train", accelerators=8)
    await scenario.wait_state("train", "SUCCEEDED")
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.api_client import Api
from tests.support.waiting import wait_until

PROJECT = "research"
NAMESPACE = f"aicp-{PROJECT}"
POOL = "h100-pool"
CLASS = "h100-80g"
WORKLOADS = f"/api/v1/projects/{PROJECT}/workloads"
POOLS = f"/api/v1/projects/{PROJECT}/compute-pools"


def quota(accelerators: int = 16) -> dict[str, Any]:
    return {"accelerators": accelerators, "cpu": "256", "memory": "2Ti"}


QUOTA = quota()


def workload_body(name: str, pool: str = POOL, **changes: Any) -> dict[str, Any]:
    """One 8-GPU pod that prints a line and succeeds after `KUBESIM_RUN_SECONDS` (0.3 s)."""
    body: dict[str, Any] = {
        "name": name,
        "compute_pool": pool,
        "image": "ghcr.io/acme/train:1.4",
        "command": ["python", "train.py"],
        "accelerators": 8,
        "cpu": "8",
        "memory": "64Gi",
        "max_runtime_seconds": 3600,
        "env": {"KUBESIM_RUN_SECONDS": "0.3", "KUBESIM_LOG": f"{name}: step 1 loss 0.42"},
    }
    body.update(changes)
    return body


#: docs/API.md's example workload as changes to `workload_body`'s: the API tests' workloads.
API_EXAMPLE: dict[str, Any] = {
    "args": ["--epochs", "3"],
    "env": {"WANDB_MODE": "offline"},
    "cpu": "32",
    "memory": "256Gi",
    "replicas": 1,
    "max_runtime_seconds": 86400,
    "start_deadline_seconds": 3600,
    "retries": 0,
    "priority": "normal",
    "labels": {"team": "nlp"},
    "nodes": 1,
}


def example_workload(name: str = "train-7b", **changes: Any) -> dict[str, Any]:
    """A valid workload body (docs/API.md's example) with `changes` applied."""
    return workload_body(name, **{**API_EXAMPLE, **changes})


TRAIN_7B = example_workload()


class Scenario(Api):
    """One project and its pool through `client` (the admin's).

    `accelerators` is the size of the pool `setup_pool` and `create_pool` make unless told
    otherwise; `binding` changes the binding's fields (`binding_body`'s); `defaults` change
    every workload body this scenario submits (`workload_body`'s fields); `wait_timeout` is
    how long every wait (a pool READY, a workload's state, its end) lasts unless told
    otherwise; `interval` how often a wait asks again.
    """

    def __init__(
        self,
        client: httpx.AsyncClient | None,
        *,
        project: str = PROJECT,
        pool: str = POOL,
        accelerator_class: str = CLASS,
        accelerators: int = 16,
        binding: dict[str, Any] | None = None,
        defaults: dict[str, Any] | None = None,
        wait_timeout: float = 20.0,
        interval: float = 0.01,
    ) -> None:
        super().__init__(client)
        self.project = project
        self.pool_name = pool
        self.accelerator_class = accelerator_class
        self.accelerators = accelerators
        self.binding = binding or {}
        self.defaults = defaults or {}
        self.wait_timeout = wait_timeout
        self.interval = interval

    @property
    def namespace(self) -> str:
        return f"aicp-{self.project}"

    @property
    def pools(self) -> str:
        return f"/api/v1/projects/{self.project}/compute-pools"

    @property
    def workloads(self) -> str:
        return f"/api/v1/projects/{self.project}/workloads"

    def for_project(self, project: str, **options: Any) -> Scenario:
        """The same scenario API (client, defaults, waits) for another project."""
        settings = {
            "pool": self.pool_name,
            "accelerator_class": self.accelerator_class,
            "accelerators": self.accelerators,
            "binding": self.binding,
            "defaults": self.defaults,
            "wait_timeout": self.wait_timeout,
            "interval": self.interval,
            **options,
        }
        return Scenario(self._client, project=project, **settings)

    def quota(self, accelerators: int) -> dict[str, Any]:
        """The pool's quota for `accelerators` (a harness may ask for more CPU and memory)."""
        return quota(accelerators)

    # -- binding, project, pool, token -------------------------------------------------------

    async def setup_pool(
        self,
        accelerators: int | None = None,
        *,
        quota: dict[str, Any] | None = None,
        timeout: float | None = None,
        wait: bool = True,
        **project: Any,
    ) -> dict[str, Any]:
        """The binding, the project (with the fields `project`) and a pool of `accelerators`
        H100s (or `quota`), waited for until READY (unless not to `wait`: no engine runs); the
        pool as the API shows it then."""
        await self.put_binding(self.accelerator_class, **self.binding)
        await self.create_project(self.project, **project)
        created = await self.create_pool(
            quota=quota or self.quota(accelerators or self.accelerators)
        )
        if not wait:
            return created
        return await self.wait_pool_state("READY", timeout=timeout)

    async def create_pool(
        self, name: str | None = None, *, quota: dict[str, Any] | None = None, **fields: Any
    ) -> dict[str, Any]:
        body = {
            "name": name or self.pool_name,
            "accelerator_class": self.accelerator_class,
            "quota": quota or self.quota(self.accelerators),
            **fields,
        }
        response = await self.request("POST", self.pools, json=body, accept=(202,))
        created: dict[str, Any] = response.json()
        return created

    async def pool(self, name: str | None = None) -> dict[str, Any]:
        response = await self.request("GET", f"{self.pools}/{name or self.pool_name}")
        body: dict[str, Any] = response.json()
        return body

    async def wait_pool_state(
        self, state: str, *, name: str | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            pool = await self.pool(name)
            return pool if pool["status"]["state"] == state else None

        return await wait_until(
            probe,
            timeout=timeout or self.wait_timeout,
            interval=self.interval,
            message=f"pool {state}",
        )

    async def token(self, role: str = "editor", name: str | None = None, **fields: Any) -> str:
        """A new token of this project; its secret."""
        return await self.create_token(self.project, role, name, **fields)

    # -- workloads ---------------------------------------------------------------------------

    def workload_body(self, name: str, **changes: Any) -> dict[str, Any]:
        return workload_body(name, self.pool_name, **{**self.defaults, **changes})

    async def submit(self, name: str, *, key: str | None = None, **changes: Any) -> dict[str, Any]:
        """Submit `workload_body(name, **changes)`; the accepted workload."""
        response = await self.request(
            "POST", self.workloads, json=self.workload_body(name, **changes), accept=(202,), key=key
        )
        accepted: dict[str, Any] = response.json()
        return accepted

    async def start_running(self, name: str, **changes: Any) -> dict[str, Any]:
        """Submit a workload whose pods run for ten minutes (longer than any test) and wait
        until it is RUNNING; the workload then."""
        env = {"KUBESIM_RUN_SECONDS": "600", **changes.pop("env", {})}
        await self.submit(name, env=env, **changes)
        return await self.wait_state(name, "RUNNING")

    async def workload(self, name: str) -> dict[str, Any] | None:
        """The workload as the API shows it; None once it answers 404."""
        response = await self.request("GET", f"{self.workloads}/{name}", accept=(200, 404))
        if response.status_code == 404:
            return None
        body: dict[str, Any] = response.json()
        return body

    async def wait_state(
        self,
        name: str,
        *states: str,
        timeout: float | None = None,
        generation: int | None = None,
    ) -> dict[str, Any]:
        """Wait until the workload's `status.state` is one of `states` (for `generation`, if
        given); return it."""

        async def probe() -> dict[str, Any] | None:
            found = await self.workload(name)
            if found is None:
                return None
            status = found["status"]
            if generation is not None and status["observed_generation"] != generation:
                return None
            return found if status["state"] in states else None

        return await wait_until(
            probe,
            timeout=timeout or self.wait_timeout,
            interval=self.interval,
            message=f"{name} in {states}",
        )

    async def wait_reason(
        self, name: str, text: str, timeout: float | None = None
    ) -> dict[str, Any]:
        """Wait until the workload's `status.reason` contains `text`; return it."""

        async def probe() -> dict[str, Any] | None:
            found = await self.workload(name)
            return found if found and text in (found["status"]["reason"] or "") else None

        return await wait_until(
            probe,
            timeout=timeout or self.wait_timeout,
            interval=self.interval,
            message=f"{name}: reason with {text!r}",
        )

    async def wait_gone(self, name: str, timeout: float | None = None) -> None:
        """Wait until the workload answers 404 (finalized)."""
        await self.wait_absent(f"{self.workloads}/{name}", timeout)

    async def wait_absent(self, path: str, timeout: float | None = None) -> None:
        """Wait until `path` (a workload, a pool, a project) answers 404."""

        async def gone() -> bool:
            response = await self.request("GET", path, accept=(200, 404))
            return response.status_code == 404

        await wait_until(
            gone,
            timeout=timeout or self.wait_timeout,
            interval=self.interval,
            message=f"{path} gone (404)",
        )

    async def events(self, name: str) -> list[dict[str, Any]]:
        """The workload's events, oldest first."""
        response = await self.request(
            "GET", f"{self.workloads}/{name}/events", params={"limit": 500}
        )
        items: list[dict[str, Any]] = response.json()["items"]
        return list(reversed(items))

    async def event_types(self, name: str) -> list[str]:
        return [event["type"] for event in await self.events(name)]

    async def wait_event(self, name: str, event_type: str, timeout: float | None = None) -> None:
        """Wait until the workload's events hold one of `event_type`: an event is recorded
        after the change it tells of, so the change may be seen first."""

        async def recorded() -> bool:
            return event_type in await self.event_types(name)

        await wait_until(
            recorded,
            timeout=timeout or self.wait_timeout,
            interval=self.interval,
            message=f"a {event_type} event of workload {name}",
        )

    # -- services ----------------------------------------------------------------------------

    @property
    def services(self) -> str:
        return f"/api/v1/projects/{self.project}/services"

    def service_body(self, name: str, **changes: Any) -> dict[str, Any]:
        """A service of this scenario's pool: one replica of `busybox` unless `changes` say."""
        return {"name": name, "compute_pool": self.pool_name, "image": "busybox:1.36", **changes}

    async def create_service(self, name: str, **changes: Any) -> dict[str, Any]:
        response = await self.request(
            "POST", self.services, json=self.service_body(name, **changes), accept=(202,)
        )
        accepted: dict[str, Any] = response.json()
        return accepted

    async def read_service(self, name: str) -> dict[str, Any] | None:
        """The service as the API shows it; None once it answers 404."""
        response = await self.request("GET", f"{self.services}/{name}", accept=(200, 404))
        if response.status_code == 404:
            return None
        body: dict[str, Any] = response.json()
        return body

    async def wait_service(
        self, name: str, state: str, text: str = "", timeout: float | None = None
    ) -> dict[str, Any]:
        """Wait until the service is in `state` with `text` in its reason; return it."""

        seen: list[dict[str, Any]] = [{}]

        async def probe() -> dict[str, Any] | None:
            found = await self.read_service(name)
            status = seen[0] = found["status"] if found else {}
            return found if status.get("state") == state and text in status["reason"] else None

        try:
            return await wait_until(
                probe,
                timeout=timeout or self.wait_timeout,
                interval=self.interval,
                message=f"service {name} {state} with {text!r} in its reason",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its status then: {seen[0]}") from None

    async def service_events(self, name: str) -> list[dict[str, Any]]:
        """The service's events, oldest first."""
        response = await self.request(
            "GET", f"{self.services}/{name}/events", params={"limit": 500}
        )
        items: list[dict[str, Any]] = response.json()["items"]
        return list(reversed(items))
