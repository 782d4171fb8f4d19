"""What the command line prints, without a server: text from the server never reaches the
terminal raw (tables, describe, messages), JSON and YAML stay valid and give back what the
server sent, tables fit 80 columns by shortening only the reason, and `run` takes only what
follows `--` as the container command. (Against a server: tests/e2e/test_cli.py.)"""

from __future__ import annotations

import contextlib
import io
import json
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from aicp_cli.commands_write import run
from aicp_cli.kinds import WORKLOAD_COLUMNS, WORKLOAD_WIDE
from aicp_cli.main import cli
from aicp_cli.output import dump, printable, table
from aicp_cli.workload_views import describe_workload
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

#: Characters a hostile description or argument may carry: C0 (ESC, BEL, CR, BS), DEL, C1
#: (CSI, OSC, NEL), line and paragraph separators, bidi overrides and isolates.
HOSTILE = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))] + list(
    "\u2028\u2029\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
hostile_text = st.text(
    alphabet=st.one_of(st.sampled_from(HOSTILE), st.characters(codec="utf-8")), max_size=40
)
#: Whole sequences that do something to a terminal when printed raw.
SEQUENCES = [
    "\x1b[2J",
    "\x1b]0;pwned\x07",
    "\x9b31m",
    "\x1b[31mred\x1b[0m",
    "a\rb",
    "\u202eexe.txt",
]


def unsafe(output: str) -> list[str]:
    """The characters of `output` a terminal would act on, newline aside."""
    return [
        char
        for char in output
        if char != "\n" and (char in HOSTILE or unicodedata.category(char) in ("Cc", "Zl", "Zp"))
    ]


def printed_by(*steps: Callable[[], object]) -> str:
    """What `steps` write to standard output."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        for step in steps:
            step()
    return printed.getvalue()


def workload(reason: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": fields.pop("name", "train-7b"),
        "project": "research",
        "compute_pool": "h100-pool",
        "uid": "0b0e",
        "generation": 1,
        "created_at": "2026-01-01T00:00:00Z",
        "created_by": "admin",
        "spec": {
            "image": "ghcr.io/acme/train:1.4",
            "command": ["python"],
            "args": fields.pop("args", ["train.py"]),
            "accelerators": 8,
            "replicas": 1,
            "env": fields.pop("env", {}),
            "labels": {},
        },
        "status": {"state": fields.pop("state", "QUEUED"), "reason": reason, "nodes": []},
        **fields,
    }


@settings(max_examples=200, deadline=None)
@given(hostile_text)
def test_printable_leaves_nothing_a_terminal_acts_on_and_keeps_plain_text(text: str) -> None:
    shown = printable(text)
    assert unsafe(shown) == []
    if not unsafe(text) and "\n" not in text:  # one line: a newline is shown as \\n too
        assert shown == text


@pytest.mark.parametrize("sequence", SEQUENCES)
def test_an_escape_sequence_is_shown_as_its_escapes(sequence: str) -> None:
    shown = printable(sequence)
    assert unsafe(shown) == []
    assert shown.startswith(("\\x1b", "\\x9b", "a\\rb", "\\u202e"))


@settings(max_examples=100, deadline=None)
@given(reason=hostile_text, arg=hostile_text, value=hostile_text, message=hostile_text)
def test_tables_and_describe_print_server_text_escaped(
    reason: str, arg: str, value: str, message: str
) -> None:
    def show(reason: str, arg: str, value: str, message: str) -> str:
        found = workload(reason, args=[arg], env={"K": value})
        event = {"at": "2026-01-01T00:00:00Z", "type": message, "message": message}
        return printed_by(
            lambda: table([found], WORKLOAD_COLUMNS),
            lambda: table([found], WORKLOAD_WIDE, whole=True),
            lambda: describe_workload(found, [event]),
        )

    printed = show(reason, arg, value, message)
    assert unsafe(printed) == []
    assert printed.count("\n") == show("x", "x", "x", "x").count("\n")  # the layout holds


@settings(max_examples=100, deadline=None)
@given(reason=hostile_text, arg=hostile_text)
def test_json_and_yaml_stay_valid_and_give_back_what_the_server_sent(reason: str, arg: str) -> None:
    found = workload(reason, args=[arg])
    printed = printed_by(lambda: dump(found, "json"))
    assert unsafe(printed) == [] and json.loads(printed) == found
    printed = printed_by(lambda: dump(found, "yaml"))
    assert unsafe(printed) == [] and yaml.safe_load(printed) == found


LONG = (
    "Queued in pool h100-pool, waiting for Kueue to consider it: 3 workloads ahead of it "
    "ask for 24 of the pool's 16 accelerators."
)


def lines_of(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_at_80_columns_name_and_state_are_whole_and_the_reason_gives_way(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    name = "sweep-lr-3e-4-batch-512"
    table([workload(LONG, name=name), workload("Short.", state="ADMITTED")], WORKLOAD_COLUMNS)
    header, first, second = lines_of(capsys)
    assert header.split() == ["NAME", "STATE", "POOL", "GPUS", "AGE", "REASON"]
    assert first.split()[:2] == [name, "QUEUED"] and len(first) == 80
    assert first.endswith("…") and first.split("   ")[-1].rstrip("…") in LONG
    assert second.split()[:2] == ["train-7b", "ADMITTED"] and second.endswith("Short.")


def test_wide_and_piped_output_without_columns_show_the_reason_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    table([workload(LONG)], WORKLOAD_WIDE, whole=True)
    assert lines_of(capsys)[1].endswith(LONG)
    monkeypatch.delenv("COLUMNS")
    table([workload(LONG)], WORKLOAD_COLUMNS)  # standard output is a pipe here
    assert lines_of(capsys)[1].endswith(LONG)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.from_regex(r"[a-z][a-z0-9-]{0,62}", fullmatch=True), reason=hostile_text)
def test_at_any_width_the_name_and_state_are_never_cut(
    monkeypatch: pytest.MonkeyPatch, name: str, reason: str
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # the same for every example
    row = printed_by(lambda: table([workload(reason + LONG, name=name)], WORKLOAD_COLUMNS))
    row = row.splitlines()[1]
    assert row.split()[:2] == [name, "QUEUED"]
    # the other columns take 38 cells; the reason keeps 12 however narrow the line
    assert cell_len(row) <= max(80, len(name) + 38 + 12)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "8"], "No such option '--gpu'. (Did you mean one of: '--cpu', '--gpus'?)"),
        (["--imagee", "i"], "No such option '--imagee'. Did you mean '--image'?"),
        (["python", "train.py"], "put the container command after --"),
    ],
)
def test_run_refuses_unknown_options_and_a_command_before_the_dashes(
    args: list[str], message: str
) -> None:
    result = CliRunner().invoke(cli, ["run", "--pool", "p", "--image", "i", *args, "--", "x"])
    assert result.exit_code == 2
    assert message in result.output


def test_after_the_dashes_every_word_is_the_command_options_included() -> None:
    args = ["--pool", "p", "--image", "i", "--", "python", "train.py", "--gpu", "8", "--", "-x"]
    parsed = run.make_context("run", args)
    assert parsed.params["command"] == ("python", "train.py", "--gpu", "8", "--", "-x")
    assert parsed.params["accelerators"] == 0


def test_queued_workloads_show_their_place_and_estimated_start(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    now = datetime.now(UTC)
    queued = workload("Queued 2nd in pool h100-pool; likely to start in 5-20 min.")
    queued["status"]["queue"] = {
        "position": 2,
        "ahead_count": 1,
        "ahead": ["a"],
        "eta": {
            "earliest": (now + timedelta(minutes=5, seconds=30)).isoformat(),
            "likely": (now + timedelta(minutes=9, seconds=30)).isoformat(),
            "latest": (now + timedelta(minutes=20, seconds=30)).isoformat(),
        },
        "eta_basis": "b",
    }
    table([queued, workload("Short.", state="ADMITTED")], WORKLOAD_COLUMNS)
    header, first, second = lines_of(capsys)
    assert header.split() == ["NAME", "STATE", "POOL", "GPUS", "AGE", "QUEUE", "REASON"]
    assert "#2 5m-20m" in first
    assert second.split()[5] == "-"
