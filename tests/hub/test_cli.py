"""The CLI surfaces of the core: import, context, usage, agents; errors for people."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from scopehub.hub.cli import cli
from scopehub.memory import CallRecord, Store
from tests.helpers import CHECKOUT_MISMATCH, checkout_env, checkout_python

LOG = [
    {"id": "1", "role": "user", "text": "here is an email from Ram: the Q3 report is due Friday", "ts": 1, "agent": "inbox"},
    {"id": "2", "role": "agent", "text": "Saved the email from Ram.", "ts": 2, "agent": "inbox"},
    {"id": "3", "role": "user", "text": "tell me a joke", "ts": 3, "agent": "general"},
    {"id": "4", "role": "agent", "text": "Why did the chicken...", "ts": 4, "agent": "general"},
    {"id": "5", "role": "user", "text": "put the deadline from that email on my tasks", "ts": 5, "agent": "general"},
]


def write_log(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LOG))
    return path


def run(*args, db):
    result = CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)
    return result


def test_import_twice_adds_nothing_the_second_time(tmp_path):
    db = tmp_path / "hub.db"
    log = write_log(tmp_path)
    first = run("import", "--scope", "user:1", str(log), db=db)
    second = run("import", "--scope", "user:1", str(log), db=db)
    assert first.exit_code == 0 and "5 added" in first.output
    assert second.exit_code == 0 and "0 added, 5 already present" in second.output


def test_import_reports_bad_lines_with_exit_code_1(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": 1, "role": "user", "text": "ok", "ts": 1}\n{"oops"\n')
    result = run("import", "--scope", "user:1", str(path), db=tmp_path / "hub.db")
    assert result.exit_code == 1
    assert "1 added" in result.output and "line 2" in result.output


def test_context_json_shows_exactly_what_the_agent_would_be_sent(tmp_path):
    db = tmp_path / "hub.db"
    run("import", "--scope", "user:1", str(write_log(tmp_path)), db=db)
    scoped = json.loads(run("context", "--scope", "user:1", "--agent", "tasks", "--json", db=db).output)
    assert set(scoped) == {"agent", "also_sees", "scope", "messages", "tools", "history", "message", "tokens", "full_history_tokens"}
    assert set(scoped["tokens"]) == {"persona", "rules", "tools", "facts", "lessons", "awareness", "digest", "history", "message", "total"}
    # the provider messages as sent: system first, the newest message last
    assert scoped["messages"][0]["role"] == "system" and "tasks agent" in scoped["messages"][0]["content"]
    assert scoped["messages"][-1] == {"role": "user", "content": LOG[-1]["text"]}
    assert scoped["message"]["ext_id"] == "5" and scoped["message"]["text"] == LOG[-1]["text"]
    # default tail 4 covers all four earlier messages here, each with its imported id
    assert [m["ext_id"] for m in scoped["history"]] == ["1", "2", "3", "4"]
    assert all(isinstance(m["id"], int) for m in scoped["history"])
    assert len(scoped["messages"]) == 1 + len(scoped["history"]) + 1
    with_also = json.loads(run("context", "--scope", "user:1", "--agent", "tasks", "--also", "inbox", "--json", db=db).output)
    assert with_also["also_sees"] == ["inbox"]
    assert with_also["full_history_tokens"] >= with_also["tokens"]["total"]


EMAIL = "here is an email from Ram: the Q3 report is due Friday"
OLDER_EMAIL_LOG = [
    {"id": "1", "role": "user", "text": EMAIL, "ts": 1, "agent": "inbox"},
    {"id": "2", "role": "agent", "text": "Saved the email from Ram.", "ts": 2, "agent": "inbox"},
    *({"id": str(n), "role": "user" if n % 2 else "agent", "text": f"joke {n}", "ts": n, "agent": "general"} for n in range(3, 9)),
    {"id": "9", "role": "user", "text": "put the deadline from that email on my tasks", "ts": 9, "agent": "tasks"},
]


def test_context_also_brings_another_agents_messages_into_what_the_agent_is_sent(tmp_path):
    db = tmp_path / "hub.db"
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in OLDER_EMAIL_LOG))
    run("import", "--scope", "user:1", str(log), db=db)

    def sent(*also):
        result = run("context", "--scope", "user:1", "--agent", "tasks", *also, "--json", db=db)
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    # The email is older than the tail of 4: tasks sees it only when it may read inbox.
    alone, with_inbox = sent(), sent("--also", "inbox")
    assert [m["text"] for m in alone["history"]] == ["joke 5", "joke 6", "joke 7", "joke 8"]
    assert alone["message"]["text"] == OLDER_EMAIL_LOG[-1]["text"]
    assert [m["text"] for m in with_inbox["history"]][:2] == [EMAIL, "Saved the email from Ram."]
    assert [m["text"] for m in with_inbox["history"]][2:] == [m["text"] for m in alone["history"]]
    assert EMAIL in [m["content"] for m in with_inbox["messages"]] and EMAIL not in [m["content"] for m in alone["messages"]]
    assert with_inbox["tokens"]["history"] > alone["tokens"]["history"]
    # The text form prints the provider messages themselves.
    printed = run("context", "--scope", "user:1", "--agent", "tasks", "--also", "inbox", db=db).output
    assert EMAIL in printed and "[inbox agent] Saved the email from Ram." in printed
    assert EMAIL not in run("context", "--scope", "user:1", "--agent", "tasks", db=db).output


def test_context_is_what_the_agent_was_sent_for_the_newest_message_from_a_person(tmp_path):
    import asyncio

    from scopehub.agents import discover_agents
    from scopehub.hub import Deps, Hub, Inbound, load_settings
    from scopehub.hub.models.testing import ScriptedModel

    db = tmp_path / "hub.db"
    model = ScriptedModel(default="Noted.")
    hub = Hub(Deps(store=Store(db), settings=load_settings(db=db), model=model), discover_agents())
    for text in ("add buy milk to my tasks", "and call the plumber tomorrow", "/usage"):
        asyncio.run(hub.handle(Inbound(scope="user:1", text=text, ext_id=text[:5])))
    hub.store.close()
    # The scope now ends with a command, after the bot's reply: neither is what a person asked.
    shown = json.loads(run("context", "--scope", "user:1", "--agent", "tasks", "--json", db=db).output)
    assert shown["message"]["text"] == "and call the plumber tomorrow"
    assert shown["messages"] == model.calls[-1].messages  # exactly what the tasks agent was sent
    assert shown["tools"] == model.calls[-1].tools
    text = run("context", "--scope", "user:1", "--agent", "tasks", db=db).output
    assert text.rstrip().splitlines()[-3] == "and call the plumber tomorrow"


def test_importing_a_file_that_is_not_utf8_is_one_clear_line(tmp_path, capsys):
    from scopehub.hub.cli import main

    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes('{"id": 1, "role": "user", "text": "café crème", "ts": 1}\n'.encode("latin-1"))
    with pytest.raises(SystemExit) as exit_info:
        main(["--db", str(tmp_path / "hub.db"), "import", "--scope", "user:1", str(latin1)])
    assert exit_info.value.code != 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "not UTF-8" in err and "latin1.jsonl" in err


def test_context_with_an_unknown_agent_is_a_clear_error(tmp_path):
    db = tmp_path / "hub.db"
    run("import", "--scope", "user:1", str(write_log(tmp_path)), db=db)
    result = CliRunner().invoke(cli, ["--db", str(db), "context", "--scope", "user:1", "--agent", "plumber"])
    assert result.exit_code == 2 and "unknown agent 'plumber'" in result.output


def test_usage_json(tmp_path):
    db = tmp_path / "hub.db"
    run("import", "--scope", "user:1", str(write_log(tmp_path)), db=db)
    store = Store(db)
    store.record_call(CallRecord(scope="user:1", agent="tasks", message_id=5, via="local", also_sees=(), tokens={"total": 200}, full_history_tokens=500))
    store.close()
    data = json.loads(run("usage", "--scope", "user:1", "--json", db=db).output)
    assert {k: data[k] for k in ("messages", "agent_calls", "tokens_sent", "full_history_tokens")} == {
        "messages": 5,
        "agent_calls": 1,
        "tokens_sent": 200,
        "full_history_tokens": 500,
    }
    assert data["saving"] == 0.6


def test_agents_json_lists_every_agent_within_the_fixed_budget(tmp_path):
    rows = json.loads(run("agents", "--json", db=tmp_path / "hub.db").output)
    assert "general" in [row["name"] for row in rows]
    for row in rows:
        assert set(row) == {
            "name", "description", "tools", "search_memory", "team",
            "fixed_tokens", "fixed_tokens_without_search", "team_tokens_when_offered",
        }  # fmt: skip
        assert "search_memory" in row["tools"] and "team" in row["tools"]
        assert 0 < row["fixed_tokens_without_search"] <= row["fixed_tokens"] <= 800


def run_checkout_cli(tmp_path, *args, env):
    """``agents-hub ARGS`` in a child process that imports this checkout (and proves it)."""
    command = checkout_python("from scopehub.hub.cli import main; main()")
    result = subprocess.run([*command, *args], capture_output=True, text=True, env=checkout_env(tmp_path, env), cwd=tmp_path)
    assert result.returncode != CHECKOUT_MISMATCH, result.stderr
    return result


def test_console_script_turns_config_errors_into_one_line(tmp_path):
    env = {"HUB_WINDOW": "lots", "PATH": "/usr/bin:/bin", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    result = run_checkout_cli(tmp_path, "context", "--scope", "user:1", "--agent", "general", env=env)
    assert result.returncode == 2
    assert "HUB_WINDOW" in result.stderr and "Traceback" not in result.stderr


def test_env_example_lists_every_setting():
    from pathlib import Path

    from scopehub.hub.settings import Settings
    from scopehub.hub.settings import _variable as variable

    text = (Path(__file__).resolve().parents[2] / ".env.example").read_text()
    documented = {line.split("=", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}
    assert documented == {variable(name) for name in Settings.model_fields}


def test_console_script_keeps_the_exit_code_of_a_partial_import(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "role": "user", "text": "ok", "ts": 1}\nnot json\n')
    env = {"PATH": "/usr/bin:/bin", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HUB_DB": str(tmp_path / "hub.db")}
    result = run_checkout_cli(tmp_path, "import", "--scope", "user:1", str(bad), env=env)
    assert result.returncode == 1
    assert "1 added" in result.stdout and "line 2" in result.stderr
