"""The command line without a server: contexts and their file, overrides, documents for
`apply`, problem lines, completion. (Against a server: tests/e2e/test_cli.py.)"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from aicp_cli import config
from aicp_cli.errors import ApiError, CliError
from aicp_cli.main import cli
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
