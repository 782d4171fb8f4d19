"""One event vocabulary: what the writers emit, what the OpenAPI document lists, what the
contract documents."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from app.domain.events import EventReason, EventType
from app.domain.workload_resources import EventResource, event_from_row

API_MD = Path(__file__).resolve().parents[2] / "docs" / "API.md"


def documented_types() -> set[str]:
    """The backquoted names in the first column of docs/API.md's event table."""
    text = API_MD.read_text()
    table = text.split("| type | written when |", 1)[1].split("\n\n", 1)[0]
    return {
        name for row in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", row.split("|")[1])
    }


def documented_reasons() -> set[str]:
    text = API_MD.read_text()
    paragraph = text.split("`reason` is null or one word that refines the type:", 1)[1]
    return set(re.findall(r"`(\w+)`", paragraph.split(";", 1)[0]))


def test_the_contract_documents_every_event_type_and_no_other() -> None:
    assert documented_types() == {t.value for t in EventType}


def test_the_contract_documents_every_event_reason_and_no_other() -> None:
    assert documented_reasons() == {r.value for r in EventReason}


def test_the_openapi_schema_of_an_event_lists_exactly_the_types_and_reasons() -> None:
    (_,), components = msgspec.json.schema_components([EventResource])
    enums = {name: set(schema.get("enum", ())) for name, schema in components.items()}

    assert enums["EventType"] == {t.value for t in EventType}
    assert enums["EventReason"] == {r.value for r in EventReason}


def test_an_event_row_reads_back_as_the_enum_it_was_written_with() -> None:
    row = {
        "at": "2026-12-01T08:00:00Z",
        "type": "Preempted",
        "reason": None,
        "message": "Preempted by a higher-priority workload.",
        "generation": 1,
        "actor": "controller:a",
        "actor_token_name": None,
    }
    event = event_from_row(row)

    assert event.type is EventType.PREEMPTED
    assert event.actor_name == "controller:a"
    assert msgspec.json.decode(msgspec.json.encode(event))["type"] == "Preempted"
