"""The CLI surfaces of the core: import, context, usage, agents; errors for people."""

from __future__ import annotations

import json
import subprocess

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
    assert set(scoped) == {"agent", "also_sees", "messages", "tokens", "full_history_tokens"}
    assert set(scoped["tokens"]) == {"persona", "rules", "tools", "facts", "history", "message", "total"}
    # default tail 4 covers all four earlier messages here; the newest is the message itself
    assert [m["id"] for m in scoped["messages"]][-1] == 5
    assert scoped["messages"][-1]["text"] == LOG[-1]["text"]
    # the tail of 4 holds every earlier message: scoping leaves nothing out yet
    assert [m["id"] for m in scoped["messages"]] == [1, 2, 3, 4, 5]
    assert scoped["full_history_tokens"] == scoped["tokens"]["total"]


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
    assert [m["text"] for m in alone["messages"]] == ["joke 5", "joke 6", "joke 7", "joke 8", OLDER_EMAIL_LOG[-1]["text"]]
    assert [m["text"] for m in with_inbox["messages"]][:2] == [EMAIL, "Saved the email from Ram."]
    assert [m["text"] for m in with_inbox["messages"]][2:] == [m["text"] for m in alone["messages"]]
    assert with_inbox["tokens"]["history"] > alone["tokens"]["history"]
    # The text form prints the provider messages themselves.
    printed = run("context", "--scope", "user:1", "--agent", "tasks", "--also", "inbox", db=db).output
    assert EMAIL in printed and "[inbox agent] Saved the email from Ram." in printed
    assert EMAIL not in run("context", "--scope", "user:1", "--agent", "tasks", db=db).output


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
        assert set(row) == {"name", "description", "tools", "fixed_tokens"}
        assert "search_memory" in row["tools"]
        assert 0 < row["fixed_tokens"] <= 800


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
