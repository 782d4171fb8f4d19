"""Names, keys and labels match as whole strings, and carry no control characters.

A trailing newline once passed every name rule (Python's `$` matches before a final `\\n`):
the row was stored and could never be read or deleted through the API. Each such input is a
422 naming the field, and nothing is stored.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.scenario import Scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")

QUOTA = {"accelerators": 1, "cpu": "4", "memory": "16Gi"}
POOL = {"name": "pool", "accelerator_class": "h100-80g", "quota": QUOTA}
WORKLOAD = {"name": "w", "compute_pool": "pool", "image": "ghcr.io/acme/train:1.4"}
BINDING = {"resource_name": "nvidia.com/gpu", "flavor": "h100-80g", "node_labels": {}}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(shared_client: httpx.AsyncClient) -> httpx.AsyncClient:
    texts = Scenario(shared_client, project="texts", pool="pool", binding={"node_labels": {}})
    await texts.setup_pool(quota=QUOTA, wait=False)
    return shared_client


def _errors(response: httpx.Response) -> dict[str, str]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return {error["field"]: error["message"] for error in response.json()["errors"]}


PROJECTS = "/api/v1/projects"
POOLS = "/api/v1/projects/texts/compute-pools"
WORKLOADS = "/api/v1/projects/texts/workloads"
TOKENS = "/api/v1/projects/texts/tokens"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        pytest.param(PROJECTS, {"name": "nlproj\n"}, "name", id="project-trailing-newline"),
        pytest.param(PROJECTS, {"name": "cr\r"}, "name", id="project-trailing-cr"),
        pytest.param(PROJECTS, {"name": "tab\t"}, "name", id="project-trailing-tab"),
        pytest.param(PROJECTS, {"name": "a\u2028"}, "name", id="project-line-separator"),
        pytest.param(
            PROJECTS, {"name": "dn", "display_name": "Re\x1b[31md"}, "display_name", id="escape"
        ),
        pytest.param(
            PROJECTS, {"name": "dn", "display_name": "abc\u202edef"}, "display_name", id="bidi"
        ),
        pytest.param(
            PROJECTS, {"name": "lk", "labels": {"team\n": "nlp"}}, "labels.team\n", id="label-key"
        ),
        pytest.param(
            PROJECTS, {"name": "lv", "labels": {"team": "nlp\n"}}, "labels.team", id="label-value"
        ),
        pytest.param(POOLS, {**POOL, "name": "p\n"}, "name", id="pool-name"),
        pytest.param(
            POOLS,
            {**POOL, "name": "p2", "accelerator_class": "h100-80g\n"},
            "accelerator_class",
            id="pool-class",
        ),
        pytest.param(WORKLOADS, {**WORKLOAD, "name": "w\n"}, "name", id="workload-name"),
        pytest.param(
            WORKLOADS, {**WORKLOAD, "compute_pool": "pool\n"}, "compute_pool", id="wl-pool"
        ),
        pytest.param(
            WORKLOADS, {**WORKLOAD, "image": "ghcr.io/acme/train:1.4\n"}, "image", id="image-nl"
        ),
        pytest.param(
            WORKLOADS, {**WORKLOAD, "image": "ghcr.io/acme/tr\x85ain"}, "image", id="image-c1"
        ),
        pytest.param(WORKLOADS, {**WORKLOAD, "env": {"A\n": "x"}}, "env", id="env-key"),
        pytest.param(
            WORKLOADS, {**WORKLOAD, "labels": {"k": "v\n"}}, "labels.k", id="workload-label"
        ),
        pytest.param(TOKENS, {"name": "lead\n", "role": "viewer"}, "name", id="token-name"),
    ],
)
async def test_control_characters_in_a_name_or_key_are_422_and_nothing_is_stored(
    client: httpx.AsyncClient, path: str, body: dict[str, object], field: str
) -> None:
    before = (await client.get(path)).json()["items"]
    errors = _errors(await client.post(path, json=body))
    assert any(named == field or named.startswith(field + ".") for named in errors), errors
    assert (await client.get(path)).json()["items"] == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"flavor": "h100-80g\n"}, "flavor", id="flavor"),
        pytest.param({"node_labels": {"gpu\n": "h100"}}, "node_labels.gpu\n", id="node-label-key"),
        pytest.param({"node_labels": {"gpu": "h100\n"}}, "node_labels.gpu", id="node-label-value"),
        pytest.param({"resource_name": "nvidia.com/gpu\n"}, "resource_name", id="resource-name"),
        pytest.param(
            {"tolerations": [{"key": "gpu\n", "operator": "Exists"}]}, "tolerations.0.key", id="tk"
        ),
    ],
)
async def test_control_characters_in_a_binding_are_422(
    client: httpx.AsyncClient, body: dict[str, object], field: str
) -> None:
    path = "/api/v1/accelerator-bindings/nl-class"
    errors = _errors(await client.put(path, json={**BINDING, **body}))
    assert field in errors, errors
    assert (await client.get(path)).status_code == 404


async def test_a_name_with_a_newline_in_the_url_is_not_found_or_invalid(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.get("/api/v1/projects/texts%0A")).status_code == 404
    response = await client.get("/api/v1/accelerator-bindings/h100-80g%0A")
    assert response.status_code in (404, 422), response.text
    response = await client.get("/api/v1/projects/texts/workloads?compute_pool=pool%0A")
    assert response.status_code == 422, response.text


async def test_free_form_text_is_stored_as_given(client: httpx.AsyncClient) -> None:
    args = ["--message", "line one\nline two\t\x1b[1mbold\x1b[0m \u202eevil"]
    body = {**WORKLOAD, "name": "freeform", "args": args, "env": {"NOTE": "a\nb\u2028c"}}
    response = await client.post(WORKLOADS, json=body)
    assert response.status_code == 202, response.text
    stored = (await client.get(f"{WORKLOADS}/freeform")).json()["spec"]
    assert stored["args"] == args
    assert stored["env"] == {"NOTE": "a\nb\u2028c"}


#: Any text at all, and text near the rule (letters, digits, '-', and whitespace).
NAMES = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="abz09-\n\r\t .", min_size=1, max_size=40),
    st.from_regex(r"[a-z0-9]([-a-z0-9]{0,28}[a-z0-9])?\n?", fullmatch=True),
)
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=NAMES)
async def test_every_accepted_project_name_is_a_kubernetes_name_found_by_its_url(
    client: httpx.AsyncClient, name: str
) -> None:
    response = await client.post(PROJECTS, json={"name": name})
    if response.status_code in (409,):  # drawn twice
        return
    if response.status_code != 202:
        assert response.status_code == 422, response.text
        found = await client.get(f"{PROJECTS}/{quote(name, safe='')}")
        assert found.status_code in (200, 404, 422), found.text  # 200: '' or '.' is the list
        assert found.json().get("name") != name
        return
    namespace = response.json()["namespace"]
    assert re.fullmatch(_DNS_LABEL, namespace) and len(namespace) <= 63, namespace
    assert quote(name, safe="") == name
    found = await client.get(f"{PROJECTS}/{name}")
    assert found.status_code == 200 and found.json()["name"] == name
