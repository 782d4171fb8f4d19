"""Property-based checks of the whole API against its own OpenAPI document (schemathesis).

For every operation in `/schema/openapi.json`, schemathesis generates requests and sends them
with the admin token to a running service: valid ones aimed at resources that exist (so
creates, updates and deletes run their real code paths), valid ones with random names, and
invalid ones. Every answer must not be
a 5xx, must use a documented status code and content type, and must match the documented
schema. The run is bounded (a fixed number of examples per operation, derandomized), so it
is quick and repeatable in CI. ``make fuzz`` runs the same test with ``AICP_FUZZ_CASES`` set
(at least 5,000 cases in all, spread over the operations, random seeds): the longer run.

Schemathesis's client is synchronous: it runs in a worker thread while this test's event loop
keeps serving the requests.
"""

from __future__ import annotations

import asyncio
import math
import os
from typing import Any

import hypothesis
import schemathesis
from hypothesis import HealthCheck, Phase
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.main import Service
from tests.support.api_client import ADMIN_TOKEN
from tests.support.scenario import CLASS, POOL, PROJECT, Scenario

EXAMPLES_PER_OPERATION = 15
#: Total cases wanted by the long run (`make fuzz`); 0 for the CI run.
FUZZ_CASES = int(os.environ.get("AICP_FUZZ_CASES", "0"))
# Path parameters naming what the test creates first.
EXISTING = {
    "project": PROJECT,
    "pool": POOL,
    "name": "train-7b",
    "accelerator_class": CLASS,
}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def _cases(operation: Any) -> Any:
    """Positive cases on the existing resources, positive on random names, negative."""
    pinned = {name: value for name, value in EXISTING.items() if "{" + name + "}" in operation.path}
    strategies = [
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    ]
    if pinned:
        strategies.append(operation.as_strategy(GenerationMode.POSITIVE, path_parameters=pinned))
    return st.one_of(*strategies)


def _streams(case: Any) -> bool:
    """The request would open a live stream (`/watch`, or a list with a truthy `watch`)."""
    watch = str((case.query or {}).get("watch", "")).lower()
    return case.path.endswith("/watch") or watch in ("true", "1", "yes", "on")


def _exercise(base_url: str) -> tuple[int, list[str]]:
    """Run every operation's examples; return how many cases ran and the failures found."""
    schema = schemathesis.openapi.from_url(f"{base_url}/schema/openapi.json")
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    failures: list[str] = []
    ran = 0
    operations = [result.ok() for result in schema.get_all_operations()]
    examples = EXAMPLES_PER_OPERATION
    if FUZZ_CASES:  # operations with few distinct inputs run fewer: aim high
        examples = max(examples, math.ceil(2 * FUZZ_CASES / len(operations)))
    for operation in operations:

        @hypothesis.settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=not FUZZ_CASES,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @hypothesis.given(case=_cases(operation))
        def check(case: Any) -> None:
            nonlocal ran
            if _streams(case):
                return  # an event stream never ends: tests/integration/api/test_streams.py
            ran += 1
            case.call_and_validate(base_url=base_url, headers=headers, checks=CHECKS)

        try:
            check()
        except Exception as exc:  # each operation's first failure, collected for one report
            failures.append(f"{operation.label}: {type(exc).__name__}: {exc}"[:2000])
    return ran, failures


async def test_no_operation_answers_5xx_or_off_schema(api: Scenario, service: Service) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    ran, failures = await asyncio.to_thread(_exercise, service.url)
    print(f"schemathesis: {ran} cases, {len(failures)} operations failing")
    assert ran >= max(100, FUZZ_CASES)
    assert failures == [], "\n\n".join(failures)
