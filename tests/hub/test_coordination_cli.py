"""The coordination commands as a person runs them: events, claims, reflect, search, and one
clear line (no traceback) for a database fault."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

from click.testing import CliRunner

from scopehub.hub.cli import cli
from scopehub.memory import (
    NewMessage,
    Store,
    acquire_claim,
    add_knowledge,
    emit_event,
    process_holder,
)
from tests.fakes.openai_server import FakeOpenAI, text

SCOPE = "user:1"
DAY = 86400.0


def run(db, *args: str, **kw):
    return CliRunner().invoke(cli, ["--db", str(db), *args], **kw)


def test_events_list_by_type_or_emitter_includes_targeted_events(tmp_path):
    db = tmp_path / "hub.db"
    with Store(db) as store:
        emit_event(store, SCOPE, "inbox", "note.saved", {"note_id": 1, "title": "for everyone"})
        emit_event(store, SCOPE, "inbox", "note.saved", {"note_id": 2, "title": "for tasks only"}, target="tasks")
        emit_event(store, SCOPE, "notes", "note.saved", {"note_id": 3, "title": "by notes"})
    for options in (["-t", "note.saved"], ["-t", "note.*"], ["-a", "inbox"], ["-a", "inbox", "-t", "note.saved"]):
        result = run(db, "events", "list", "--scope", SCOPE, *options, "--json")
        assert result.exit_code == 0, result.output
        titles = [e["payload"]["title"] for e in json.loads(result.output)]
        assert "for tasks only" in titles and "for everyone" in titles, options
        assert ("by notes" in titles) == ("-a" not in options), options


def test_events_emit_refuses_an_unknown_agent_naming_the_known_ones(tmp_path):
    db = tmp_path / "hub.db"
    payload = json.dumps({"note_id": 1, "title": "x"})
    for option in ("--agent", "--target"):
        args = ["--agent", "inbox", "--target", "tasks"]
        args[args.index(option) + 1] = "inbxo"
        result = run(db, "events", "emit", "--scope", SCOPE, "-t", "note.saved", "-p", payload, *args)
        assert result.exit_code == 2 and "unknown agent 'inbxo'" in result.output and "inbox" in result.output
    ok = run(db, "events", "emit", "--scope", SCOPE, "--agent", "inbox", "-t", "note.saved", "-p", payload)
    assert ok.exit_code == 0 and ok.output.startswith("#1 note.saved")


def test_the_claims_command_lists_live_claims_and_those_left(tmp_path):
    db = tmp_path / "hub.db"
    now = time.time()
    child = subprocess.run([sys.executable, "-c", "from scopehub.memory import process_holder; print(process_holder())"], capture_output=True, text=True)
    dead = child.stdout.strip()  # a process that has exited: its claims are left, not live
    with Store(db) as store:
        acquire_claim(store, SCOPE, "message:7", process_holder(), note="tasks: answering 'buy milk'", ttl=120, now=now)
        acquire_claim(store, "group:-5", "digest", "worker-b", note="hub: compacting the digest", ttl=120, now=now + 1)
        acquire_claim(store, SCOPE, "turn", dead, note="hub: answering this chat's messages in order", ttl=120, now=now)
        acquire_claim(store, SCOPE, "old", "worker-c", note="ran out", ttl=1, now=now - 60)
    listed = run(db, "claims")
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert len(lines) == 2 and "message:7" in lines[0] and "tasks: answering 'buy milk'" in lines[0] and "expires in" in lines[0]
    assert "group:-5" in lines[1] and "digest" in lines[1]
    one = json.loads(run(db, "claims", "--scope", SCOPE, "--json").output)
    assert [c["key"] for c in one] == ["message:7"] and one[0]["pid"] is not None and one[0]["expires_in_s"] > 100
    left = run(db, "claims", "--left")
    assert sorted(line.split()[1] for line in left.output.splitlines()) == ["old", "turn"]
    assert run(db, "claims", "--scope", "user:9").output == "no live claims in user:9\n"


def test_reflect_exits_1_when_it_failed_and_keeps_what_it_did(tmp_path):
    db = tmp_path / "hub.db"
    now = time.time()
    with Store(db) as store:
        for n in range(3):
            store.append(NewMessage(scope=SCOPE, role="user", text=f"Priya set the Lisbon budget to {4500 + n} euros.", ts=now - 20 * DAY + n))
    # The reflection model is its own (HUB_REFLECT_MODEL); here it answers prose, not the JSON asked for.
    with FakeOpenAI(default=lambda request: text("Sure, here are some thoughts.")) as llm:
        env = {"HUB_REFLECT_MODEL": "openai/reflector", "HUB_API_BASE": llm.base_url, "HUB_API_KEY": "sk-x", "HUB_MODEL_RETRIES": "0"}
        result = run(db, "reflect", "--scope", SCOPE, env=env)
        assert [request["model"] for request in llm.requests] == ["reflector"]
    assert result.exit_code == 1 and result.output.startswith("failed: 0 fragments"), result.output
    assert "reason:" in result.output and "Traceback" not in result.output
    done = run(db, "reflect", "--scope", SCOPE)  # the extractive default: reflects, exit 0
    assert done.exit_code == 0 and done.output.startswith("reflected:"), done.output


def test_search_labels_knowledge_fragments_and_vault_items_by_what_they_are(tmp_path):
    db = tmp_path / "hub.db"
    with Store(db) as store:
        first = store.append(NewMessage(scope=SCOPE, role="user", text="the offsite budget is 4500 euros", ts=time.time() - DAY))
        add_knowledge(store, SCOPE, "Priya set the offsite budget to 4500 euros.", importance=0.8, messages=[first.id], ts=time.time())
    result = run(db, "search", "offsite budget", "--scope", SCOPE)
    assert result.exit_code == 0, result.output
    assert "[knowledge 0.80]" in result.output and "[vault]" not in result.output and "[user]" in result.output
    hits = json.loads(run(db, "search", "offsite budget", "--scope", SCOPE, "--json").output)
    assert {h["label"] for h in hits} == {"knowledge 0.80", "user"}


def test_a_locked_database_is_one_clear_line_not_a_traceback(tmp_path):
    db = tmp_path / "hub.db"
    Store(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    try:
        done = subprocess.run(
            [sys.executable, "-m", "scopehub.hub.cli", "--db", str(db), "events", "emit", "--scope", SCOPE, "--agent", "inbox",
             "-t", "note.saved", "-p", '{"note_id": 1, "title": "x"}'],
            capture_output=True, text=True, env={"HUB_TEST_GUARD": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": ""},
            timeout=120,
        )  # fmt: skip
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "locked" in done.stderr or "busy" in done.stderr


def test_chat_with_the_claims_table_unusable_answers_and_logs_one_line_per_fault(tmp_path):
    db = tmp_path / "hub.db"
    with Store(db) as store, store.transaction() as conn:
        conn.execute("ALTER TABLE claims RENAME TO claims_broken")
    with FakeOpenAI(default=lambda request: text("Your list has milk and eggs.")) as llm:
        env = {
            "HUB_TEST_GUARD": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HUB_ROUTER_EMBEDDER": "none",
            "HUB_MODEL": "openai/fake", "HUB_API_BASE": llm.base_url, "HUB_API_KEY": "sk-fake", "HUB_DB": str(db),
            "PATH": "/usr/bin:/bin",
        }  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "scopehub.hub.cli", "chat", "-m", "what is on my list?"],
            capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Your list has milk and eggs.")  # answered, claims or not
    assert "answering it unclaimed (OperationalError: database: no such table: claims)" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreachable_postgresql_is_one_line_on_stderr(tmp_path, capsys):
    """psycopg's message carries a line break and a hint: the person gets one line, exit 2."""
    from scopehub.hub.cli.main import main

    url = f"postgresql://postgres:@/hub?host={tmp_path / 'no-server-here'}"
    try:
        main(["--db", url, "claims"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("exited 0 without a database")
    err = capsys.readouterr().err
    assert err.startswith("error: cannot use PostgreSQL at") and "no-server-here" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_events_list_says_when_a_type_is_no_registered_type(tmp_path):
    db = tmp_path / "hub.db"
    with Store(db) as store:
        emit_event(store, SCOPE, "inbox", "note.saved", {"note_id": 1, "title": "by inbox"})
    typo = run(db, "events", "list", "--scope", SCOPE, "-t", "inbox")  # an agent's name given as a type
    assert typo.exit_code == 0 and typo.stdout == f"no events in {SCOPE}\n"
    assert "no registered event type is called 'inbox'" in typo.stderr
    none_yet = run(db, "events", "list", "--scope", SCOPE, "-t", "task.created")
    assert none_yet.stdout == f"no events in {SCOPE}\n" and none_yet.stderr == ""
