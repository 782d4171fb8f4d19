"""Whatever aicp accepts as a name renders valid, distinct Kubernetes names; objects that are
not aicp's own are recognised as such."""

from __future__ import annotations

import re
import uuid

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.api.watches import resume_point
from app.domain import naming
from app.domain.errors import ValidationFailed
from app.domain.ownership import foreign_owner, manager_of
from app.domain.render import PoolIdentity, namespace_owner_labels
from app.domain.specs import PoolCreate, ProjectCreate, WorkloadSpec
from app.domain.text import control_problem
from app.domain.validation import check_name, is_name

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
QUOTA = {"accelerators": 0, "cpu": "1", "memory": "1Gi"}
NEAR = st.text(alphabet="abz09-\n\r\t\x00\x85\u2028 .", max_size=45)
NAMES = st.one_of(st.text(max_size=45), NEAR)


def _accepted(struct: type[msgspec.Struct], body: dict[str, object]) -> bool:
    try:
        decoded = msgspec.convert(body, struct)
    except msgspec.ValidationError:
        return False
    return not check_name("name", decoded.name)  # type: ignore[attr-defined]


def _is_label(name: str) -> bool:
    return len(name) <= 63 and DNS_LABEL.fullmatch(name) is not None


@given(project=NAMES, pool=NAMES, workload=NAMES)
def test_every_accepted_name_renders_dns_labels(project: str, pool: str, workload: str) -> None:
    if _accepted(ProjectCreate, {"name": project}):
        assert is_name(project) and _is_label(naming.namespace_for(project))
        if _accepted(PoolCreate, {"name": pool, "accelerator_class": "x", "quota": QUOTA}):
            assert _is_label(naming.cluster_queue_name(project, pool))
            assert _is_label(naming.local_queue_name(pool))
    if _accepted(WorkloadSpec, {"name": workload, "compute_pool": "p", "image": "busybox"}):
        uid = str(uuid.uuid4())
        assert _is_label(naming.job_name(workload, uid, 10**11))


SHORT = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,28}[a-z0-9])?", fullmatch=True)


@given(a=st.tuples(SHORT, SHORT), b=st.tuples(SHORT, SHORT))
def test_cluster_queue_names_are_injective(a: tuple[str, str], b: tuple[str, str]) -> None:
    if a != b:
        assert naming.cluster_queue_name(*a) != naming.cluster_queue_name(*b)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("default", "reserved"),
        ("system", "aicp itself is installed in"),
        ("research", None),
    ],
)
def test_project_names_of_system_namespaces_are_reserved(name: str, problem: str | None) -> None:
    found = naming.reserved_project_problem(name, "aicp-system")
    assert (found is None) if problem is None else (problem in (found or ""))
    assert naming.reserved_project_problem("system", "platform") is None


@pytest.mark.parametrize("char", ["\n", "\r", "\x00", "\x1b", "\x7f", "\x85", "\u2028", "\u202e"])
def test_control_characters_are_named(char: str) -> None:
    assert "control characters" in (control_problem(f"a{char}b") or "")
    assert control_problem("ghcr.io/acme/train:1.4") is None


POOL = PoolIdentity(project="cq-a", pool="b-c", accelerator_class="h100-80g", uid="pool-1")


def _object(labels: dict[str, str] | None, managers: tuple[str, ...] = ()) -> dict[str, object]:
    meta: dict[str, object] = {"name": "x", "managedFields": [{"manager": m} for m in managers]}
    if labels is not None:
        meta["labels"] = labels
    return {"metadata": meta}


MANAGED = {"app.kubernetes.io/managed-by": "aicp"}


@pytest.mark.parametrize(
    ("labels", "managers", "manager"),
    [
        pytest.param(None, (), None, id="absent"),
        pytest.param({**MANAGED, **POOL.owner_labels}, (), "", id="own"),
        pytest.param(POOL.owner_labels, (), "", id="own-managed-by-removed-by-hand"),
        pytest.param(
            {**MANAGED, "aicp.dev/project": "cq-a", "aicp.dev/pool": "b-c"}, (), "", id="legacy"
        ),
        pytest.param(None, ("kubectl-create",), "kubectl-create", id="no-labels"),
        pytest.param({"app.kubernetes.io/managed-by": "helm"}, (), "helm", id="helm"),
        pytest.param(
            {**MANAGED, **POOL.owner_labels, "aicp.dev/uid": "pool-2"},
            (),
            "aicp for another resource (aicp.dev/uid=pool-2)",
            id="another-id",
        ),
        pytest.param(
            {**MANAGED, "aicp.dev/project": "cq-a-b", "aicp.dev/pool": "c"},
            (),
            "aicp for another resource",
            id="another-legacy",
        ),
    ],
)
def test_an_object_is_aicps_only_for_the_resource_it_was_rendered_for(
    labels: dict[str, str] | None, managers: tuple[str, ...], manager: str | None
) -> None:
    obj = None if labels is None and not managers else _object(labels, managers)
    found = foreign_owner(obj, POOL.owner_labels)
    if manager is None or manager == "":
        assert found is None
    else:
        assert found is not None and found.startswith(manager)


def test_a_namespace_names_its_manager_from_managed_fields() -> None:
    obj = _object(None, ("aicp", "kubectl-client-side-apply"))
    assert manager_of(obj) == "kubectl-client-side-apply"
    assert foreign_owner(obj, namespace_owner_labels("x", "id")) == "kubectl-client-side-apply"


@pytest.mark.parametrize("header", ["\u00b2", "\u0663", "12\n3", "1 2", "-1", "0x10"])
def test_a_last_event_id_that_is_not_ascii_digits_is_422_not_500(header: str) -> None:
    with pytest.raises(ValidationFailed):
        resume_point(header)
    assert resume_point(" 42 ") == 42
