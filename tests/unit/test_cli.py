"""The command line without a server: contexts and their file, overrides, documents for
`apply`, problem lines, completion. (Against a server: tests/e2e/test_cli.py.)"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from aicp_cli import config
from aicp_cli.arguments import STATE
from aicp_cli.errors import ApiError, CliError
from aicp_cli.main import cli, hoist_globals
from aicp_cli.manifests import read_documents
from click.testing import CliRunner


@pytest.fixture(autouse=True)
def private_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("AICP_URL", "AICP_TOKEN", "AICP_PROJECT", "AICP_CONTEXT", "AICP_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "config" / "aicp" / "config.yaml"


def test_a_saved_context_is_owner_only_and_becomes_current(private_config: Path) -> None:
    config.store_context(config.Context("research", "http://h:1", "aicp_secret", "research"))

    assert stat.S_IMODE(private_config.stat().st_mode) == 0o600
    assert stat.S_IMODE(private_config.parent.stat().st_mode) == 0o700
    resolved = config.resolve(None, None)
    assert (resolved.name, resolved.url, resolved.token, resolved.project) == (
        "research",
        "http://h:1",
        "aicp_secret",
        "research",
    )


def test_the_environment_overrides_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    config.store_context(config.Context("research", "http://h:1", "aicp_secret", "research"))
    monkeypatch.setenv("AICP_URL", "http://other:2/")
    monkeypatch.setenv("AICP_TOKEN", "aicp_other")
    monkeypatch.setenv("AICP_PROJECT", "vision")

    resolved = config.resolve(None, None)

    assert (resolved.url, resolved.token, resolved.project) == (
        "http://other:2",
        "aicp_other",
        "vision",
    )
    assert config.resolve(None, "explicit").project == "explicit"


def test_without_a_context_or_environment_the_error_says_how_to_log_in() -> None:
    with pytest.raises(CliError, match="aicp login --url URL --token TOKEN"):
        config.resolve(None, None)


def test_contexts_are_listed_switched_and_forgotten() -> None:
    runner = CliRunner()
    config.store_context(config.Context("a", "http://a", "t1"))
    config.store_context(config.Context("b", "http://b", "t2"))
    assert runner.invoke(cli, ["config", "current-context"]).output == "b\n"
    assert runner.invoke(cli, ["config", "use-context", "a"]).exit_code == 0
    listed = runner.invoke(cli, ["config", "get-contexts"]).output
    assert [line.split()[:3] for line in listed.splitlines()[1:]] == [
        ["*", "a", "http://a"],
        ["-", "b", "http://b"],
    ]
    assert runner.invoke(cli, ["config", "delete-context", "a"]).exit_code == 0
    assert runner.invoke(cli, ["config", "current-context"]).output == "b\n"


def test_documents_come_from_several_yaml_or_json_documents_with_an_optional_kind(
    tmp_path: Path,
) -> None:
    (tmp_path / "all.yaml").write_text(
        "name: a\ncompute_pool: p\nimage: i\n---\n"
        "kind: ComputePool\nname: p\naccelerator_class: c\nquota: {accelerators: 1}\n"
    )
    (tmp_path / "one.json").write_text('{"kind": "Project", "name": "research"}')

    docs = read_documents([str(tmp_path / "all.yaml"), str(tmp_path / "one.json")])

    assert [(d.source.rsplit("/", 1)[-1], d.kind, d.name) for d in docs] == [
        ("all.yaml#1", "Workload", "a"),
        ("all.yaml#2", "ComputePool", "p"),
        ("one.json", "Project", "research"),
    ]
    assert "kind" not in docs[1].body


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("name: [\n", "not valid YAML or JSON", id="bad-yaml"),
        pytest.param("- a\n- b\n", "must be a mapping, not a list", id="a-list"),
        pytest.param("kind: Pod\nname: x\n", "unknown kind 'Pod'", id="unknown-kind"),
        pytest.param("image: i\n", "Workload has no 'name'", id="no-name"),
    ],
)
def test_a_bad_document_is_one_line_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(CliError) as caught:
        read_documents([str(path)])
    assert message in caught.value.message
    assert caught.value.message.startswith(str(path))
    assert "\n" not in caught.value.message


def test_a_problem_becomes_one_line_with_its_title_detail_and_fields() -> None:
    problem = {
        "type": "https://aicp.dev/problems/validation-error",
        "title": "Request body is invalid",
        "status": 422,
        "detail": "2 fields are invalid",
        "errors": [
            {"field": "accelerators", "message": "must be at most 64"},
            {"field": "replica", "message": "unknown field"},
        ],
    }
    error = ApiError(422, problem)
    assert error.slug == "validation-error"
    assert error.message == (
        "Request body is invalid: 2 fields are invalid "
        "(accelerators: must be at most 64; replica: unknown field)"
    )


def test_shell_completion_scripts_exist_and_complete_commands_and_kinds() -> None:
    runner = CliRunner()
    for shell in ("bash", "zsh", "fish"):
        script = runner.invoke(cli, ["completion", shell])
        assert script.exit_code == 0 and "_AICP_COMPLETE" in script.output
    env = {"_AICP_COMPLETE": "bash_complete", "COMP_WORDS": "aicp ge", "COMP_CWORD": "1"}
    commands = runner.invoke(cli, [], env=env, prog_name="aicp")
    assert "plain,get" in commands.output.split()
    env = {"_AICP_COMPLETE": "bash_complete", "COMP_WORDS": "aicp get work", "COMP_CWORD": "2"}
    kinds = runner.invoke(cli, [], env=env, prog_name="aicp")
    assert kinds.output.split() == ["plain,workload", "plain,workloads"]


@pytest.mark.parametrize(
    ("typed", "parsed"),
    [
        (["apply", "-f", "x", "-p", "research"], ["-p", "research", "apply", "-f", "x"]),
        (
            ["get", "wl", "--project=r", "--context", "c"],
            ["--project=r", "--context", "c", "get", "wl"],
        ),
        (["-p", "a", "get", "wl", "-pb"], ["-p", "a", "-pb", "get", "wl"]),
        (
            ["run", "--pool", "p", "--", "train", "-p", "x"],
            ["run", "--pool", "p", "--", "train", "-p", "x"],
        ),
        (["login", "--url", "u", "--project", "r"], ["login", "--url", "u", "--project", "r"]),
    ],
)
def test_global_options_are_taken_after_the_subcommand_too(
    typed: list[str], parsed: list[str]
) -> None:
    assert hoist_globals(typed) == parsed


def walk(command: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from walk(sub, [*path, name])


def test_every_commands_help_summary_is_a_whole_sentence() -> None:
    runner = CliRunner()
    for path, command in walk(cli, []):
        summary = command.get_short_help_str(limit=45)
        assert summary[0].isupper() and summary.endswith(".") and not summary.endswith(".."), path
        shown = runner.invoke(cli, [*path, "--help"], env={"COLUMNS": "80"})
        listed = shown.output.split("Commands:")[-1] if "Commands:" in shown.output else ""
        assert shown.exit_code == 0 and "..." not in listed, (path, shown.output)


def test_states_are_upper_case_in_help_and_taken_in_any_case() -> None:
    runner = CliRunner()
    for path in (["get"], ["delete"]):
        shown = " ".join(runner.invoke(cli, [*path, "--help"]).output.split())
        assert "PENDING, QUEUED, ADMITTED, RUNNING, SUCCEEDED, FAILED" in shown
        assert "pending" not in shown
    assert STATE.convert("failed", None, None) == "FAILED"


def test_value_errors_name_the_option() -> None:
    runner = CliRunner()
    config.store_context(config.Context("a", "http://127.0.0.1:9", "t1", "research"))
    timeout = runner.invoke(cli, ["wait", "x", "--timeout", "5q"])
    env = runner.invoke(cli, ["run", "--pool", "p", "--image", "i", "--env", "bad", "--", "x"])
    assert "Invalid value for '--timeout': '5q' is not a duration" in timeout.output
    assert "Invalid value for '--env': 'bad' is not KEY=VALUE" in env.output
    fields = ApiError(
        422,
        {"title": "Request body is invalid", "errors": [{"field": "compute_pool", "message": "m"}]},
    ).naming({"compute_pool": "--pool"})
    assert fields.message == "Request body is invalid (--pool: m)"


def test_deleting_by_selector_without_a_terminal_needs_yes() -> None:
    runner = CliRunner()
    config.store_context(config.Context("a", "http://127.0.0.1:9", "t1", "research"))
    both = runner.invoke(cli, ["delete", "workloads", "a", "--all"])
    pools = runner.invoke(cli, ["delete", "pools", "--state", "FAILED"])
    assert both.exit_code == 2 and "name what to delete: NAME..., --all or --state" in both.output
    assert pools.exit_code == 2 and "--state selects workloads and services only" in pools.output


def test_a_broken_config_file_is_one_line(private_config: Path) -> None:
    private_config.parent.mkdir(parents=True)
    private_config.write_text("contexts:\n  a: {url: x\n  b: [\n")
    with pytest.raises(CliError) as bad:
        config.resolve(None, None)
    assert "\n" not in bad.value.message
    assert bad.value.message.startswith(f"{private_config} is not valid YAML: ")
    assert "at line" in bad.value.message
    private_config.write_text("current-context: a\ncontexts:\n  a: 5\n")
    with pytest.raises(CliError, match="context 'a' is not a mapping"):
        config.resolve(None, None)


def test_what_get_prints_is_read_back_as_the_request_that_made_it(tmp_path: Path) -> None:
    (tmp_path / "got.yaml").write_text(
        "name: w\nproject: research\ncompute_pool: p\nuid: 1\ngeneration: 3\n"
        "spec: {name: w, compute_pool: p, image: i, cpu: '1'}\ncreated_at: t\nupdated_at: t\n"
        "created_by: admin\nstatus: {state: RUNNING}\n---\n"
        "items:\n- {name: p, project: research, accelerator_class: c, quota: {cpu: '1'}, "
        "uid: 2, generation: 1, created_at: t, updated_at: t, created_by: admin, status: {}}\n"
        "- {name: research, uid: 3, display_name: null, labels: {}, namespace: aicp-research, "
        "generation: 1, created_at: t, updated_at: t, created_by: admin, limits: null, "
        "status: {}}\n"
        "- {accelerator_class: c, resource_name: r/gpu, flavor: f, node_labels: {}, "
        "tolerations: [], description: null, created_at: t, updated_at: t}\n"
        "next_cursor: null\n"
    )

    docs = read_documents([str(tmp_path / "got.yaml")])

    assert [(d.source.rsplit("/", 1)[-1], d.kind, d.name, d.project) for d in docs] == [
        ("got.yaml#1", "Workload", "w", "research"),
        ("got.yaml#2 items[0]", "ComputePool", "p", "research"),
        ("got.yaml#2 items[1]", "Project", "research", None),
        ("got.yaml#2 items[2]", "AcceleratorBinding", "c", None),
    ]
    assert docs[0].body == {"name": "w", "compute_pool": "p", "image": "i", "cpu": "1"}
    assert docs[1].body == {"name": "p", "accelerator_class": "c", "quota": {"cpu": "1"}}
    assert docs[2].body == {"name": "research", "display_name": None, "labels": {}, "limits": None}
    assert set(docs[3].body) == {
        "accelerator_class", "resource_name", "flavor", "node_labels", "tolerations", "description"
    }  # fmt: skip


def test_a_document_without_created_at_is_still_a_workload_body(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text("name: w\ncompute_pool: p\nimage: i\nquota: 1\n")
    (doc,) = read_documents([str(tmp_path / "w.yaml")])
    assert doc.kind == "Workload" and doc.body["quota"] == 1  # the server names the typo
