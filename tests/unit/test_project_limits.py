"""The ceiling arithmetic of project limits, over open-ended pools and limits."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from app.domain.project_limits import Holding, overruns
from app.domain.specs import ProjectLimits

CLASSES = st.sampled_from(["h100-80g", "a100-40g", "l4"])
holdings = st.builds(
    Holding,
    CLASSES,
    st.integers(0, 100_000),
    st.integers(0, 10_000).map(Decimal),
    st.integers(0, 2**40).map(Decimal),
)
limits = st.builds(
    ProjectLimits,
    accelerators=st.none() | st.dictionaries(CLASSES, st.integers(0, 100_000), max_size=3),
    cpu=st.none() | st.integers(0, 10_000).map(str),
    memory=st.none() | st.integers(0, 2**41).map(str),
)


@given(limits, st.lists(holdings, max_size=6), holdings)
def test_a_pool_is_refused_exactly_when_some_total_passes_a_ceiling(
    project: ProjectLimits, others: list[Holding], new: Holding
) -> None:
    found = {o.limit for o in overruns(project, others, new)}
    expected = set()
    if project.accelerators is not None and new.accelerators:
        name = new.accelerator_class
        total = new.accelerators + sum(
            h.accelerators for h in others if h.accelerator_class == name
        )
        if total > project.accelerators.get(name, 0):
            expected.add(f"accelerators.{name}")
    if project.cpu is not None and new.cpu + sum(h.cpu for h in others) > Decimal(project.cpu):
        expected.add("cpu")
    if project.memory is not None and new.memory + sum(h.memory for h in others) > Decimal(
        project.memory
    ):
        expected.add("memory")
    assert found == expected


@given(st.lists(holdings, max_size=6), holdings)
def test_no_limits_refuse_nothing(others: list[Holding], new: Holding) -> None:
    assert overruns(None, others, new) == []
    assert overruns(ProjectLimits(), others, new) == []


@given(limits, st.lists(holdings, max_size=6))
def test_a_lowered_limit_names_every_ceiling_the_pools_already_pass(
    project: ProjectLimits, held: list[Holding]
) -> None:
    found = {o.limit: o for o in overruns(project, held, None)}
    assert all(o.requested == "0" for o in found.values())
    assert ("cpu" in found) == (
        project.cpu is not None and sum((h.cpu for h in held), Decimal(0)) > Decimal(project.cpu)
    )
    if project.accelerators is not None:
        for name in {h.accelerator_class for h in held}:
            total = sum(h.accelerators for h in held if h.accelerator_class == name)
            assert (f"accelerators.{name}" in found) == (total > project.accelerators.get(name, 0))
