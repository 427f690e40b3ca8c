"""Standard output carries only a command's output: with ``--json``, only JSON.

Every command runs on the embedded model's code path (``LocalModel``, its planner and
its pricing), with a stand-in engine instead of llama.cpp's weights: litellm's "Provider
List" banner and log lines once reached standard output from exactly this path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from scopehub.hub.cli import cli
from scopehub.hub.models.engine import Completion, Job
from scopehub.hub.models.local import JSON_GBNF, LocalModel

EMAIL = ['"""', "From: Ram Kumar <ram@example.com>", "Subject: Contract renewal", "", "please send me the signed contract by Friday.", '"""']


class StandInEngine:
    """Answers like the embedded model would, from the request's shape alone."""

    def load(self) -> None:
        pass

    def complete(self, job: Job) -> Completion:
        if job.grammar == JSON_GBNF:
            return Completion('{"facts": [], "lines": []}', 50, 5)
        if job.grammar is not None or job.schema is not None:
            return Completion('"buy milk"}', 80, 4)  # an argument written from the message
        return Completion("Hello! How can I help?", 60, 6)


@pytest.fixture
def hub_env(monkeypatch, tmp_path) -> dict[str, str]:
    local = LocalModel(StandInEngine(), name="local/gemma-3-270m")
    monkeypatch.setattr(LocalModel, "from_package", classmethod(lambda cls, *a, **kw: local))
    monkeypatch.delenv("HUB_MODEL", raising=False)
    # The model's digest and reflection, not the extractive ones: the embedded model's path.
    return {"HUB_DB": str(tmp_path / "hub.db"), "HUB_DIGEST_MODE": "model", "HUB_DIGEST_EVERY": "2", "HUB_WINDOW": "4"}


def stdout_lines_are_json(output: str) -> list[Any]:
    """The JSON values standard output holds: one document, or one per line. Fails on anything else."""
    stripped = output.strip()
    assert stripped, "nothing on standard output"
    try:
        return [json.loads(stripped)]
    except ValueError:
        return [json.loads(line) for line in stripped.splitlines()]  # raises on a line that is not JSON


def run(env: dict[str, str], *args: str, stdin: str | None = None, exit_code: int = 0) -> Any:
    result = CliRunner().invoke(cli, list(args), input=stdin, env=env, catch_exceptions=False)
    assert result.exit_code == exit_code, (args, result.stdout, result.stderr)
    return result


def test_every_json_command_prints_only_json_on_stdout(hub_env):
    chat = run(
        hub_env,
        "chat",
        "--json",
        stdin="\n".join(["add buy milk to my tasks", "my phone number is 555 0142", *EMAIL, "what is my phone number?", "where is the contract?"]),
    )
    replies = stdout_lines_are_json(chat.stdout)
    assert [reply["kind"] for reply in replies] == ["agent"] * 5  # the pasted email was one message
    assert replies[2]["text"].startswith("Kept email #1.") and replies[3]["text"] == "Your phone number is 555 0142."
    commands = [
        ("facts", "list", "--json"),
        ("search", "contract", "--json"),
        ("usage", "--json"),
        ("events", "list", "--json"),
        ("digest", "show", "--json"),
        ("digest", "compact", "--json", "--force"),
        ("reflect", "--json", "--now", "2999-01-01T00:00:00"),
        ("knowledge", "list", "--json"),
        ("context", "--agent", "tasks", "--json"),
        ("agents", "--json"),
        ("dispatch", "status", "--json"),
    ]
    for command in commands:
        # The stand-in answers the digest and reflection with nothing usable: both fail
        # (exit 1) and say so in their JSON.
        failing = command[:2] == ("digest", "compact") or command[0] == "reflect"
        result = run(hub_env, *command, exit_code=1 if failing else 0)  # no --scope: the terminal chat's scope
        assert stdout_lines_are_json(result.stdout), command
        if failing:
            assert json.loads(result.stdout)["outcome"] == "failed"
    facts = json.loads(run(hub_env, "facts", "list", "--json").stdout)
    assert any("555 0142" in fact["text"] for fact in facts)  # the chat's scope is the default one


def test_a_chat_on_the_embedded_model_prints_replies_and_metadata_lines_only(hub_env):
    result = run(hub_env, "chat", stdin="add buy milk to my tasks\nthanks!\n")
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines[0] == "Added #1 buy milk" and lines[1].startswith("[tasks] ")
    assert all(not line.startswith(("Provider List", "\x1b[")) for line in lines)
    assert len(lines) == 4  # two replies, two metadata lines
    assert "Provider List" not in result.stderr


def test_dispatch_run_once_prints_only_what_it_delivered(hub_env):
    result = run(hub_env, "dispatch", "run", "--once")
    assert "Provider List" not in result.stdout and "INFO" not in result.stdout


def test_forget_erases_only_the_scope_it_is_told(hub_env):
    run(hub_env, "chat", stdin="add buy milk to my tasks\n")
    result = CliRunner().invoke(cli, ["forget", "--yes"], env=hub_env)
    assert result.exit_code == 2 and "Missing option '--scope'" in result.stderr  # never a default scope
    facts = CliRunner().invoke(cli, ["search", "milk", "--json"], env=hub_env)
    assert json.loads(facts.stdout), "nothing was erased"
