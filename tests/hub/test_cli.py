"""The CLI surfaces of the core: import, context, usage, agents; errors for people."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from scopehub.hub.cli import cli
from scopehub.memory import CallRecord, Store

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
    assert set(scoped["tokens"]) == {"persona", "rules", "tools", "facts", "awareness", "digest", "history", "message", "total"}
    # default tail 4 covers all four earlier messages here; the newest is the message itself
    assert [m["id"] for m in scoped["messages"]][-1] == 5
    assert scoped["messages"][-1]["text"] == LOG[-1]["text"]
    with_also = json.loads(run("context", "--scope", "user:1", "--agent", "tasks", "--also", "inbox", "--json", db=db).output)
    assert with_also["also_sees"] == ["inbox"]
    assert with_also["full_history_tokens"] >= with_also["tokens"]["total"]


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


def test_console_script_turns_config_errors_into_one_line(tmp_path):
    env = {"HUB_WINDOW": "lots", "PATH": "/usr/bin:/bin", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    result = subprocess.run([sys.executable, "-c", "from scopehub.hub.cli import main; main()", "context", "--scope", "user:1", "--agent", "general"], capture_output=True, text=True, env=env, cwd=tmp_path)
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
    result = subprocess.run([sys.executable, "-c", "from scopehub.hub.cli import main; main()", "import", "--scope", "user:1", str(bad)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 1
    assert "1 added" in result.stdout and "line 2" in result.stderr
