"""The store: append, window, routes, import (idempotent, resumable after a kill), schema."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from scopehub.memory import (
    SCHEMA_VERSION,
    CallRecord,
    InvalidRecord,
    InvalidScope,
    NewMessage,
    Store,
    read_chatlog,
)
from scopehub.memory._schema import MIGRATIONS
from tests.helpers import checkout_env, checkout_python


def write_log(path: Path, n: int, scope: str | None = None) -> Path:
    with path.open("w") as handle:
        for i in range(1, n + 1):
            line = {"id": f"m{i}", "role": "user" if i % 2 else "assistant", "text": f"message {i} about topic {i % 7}", "ts": 1_700_000_000 + i}
            if i % 2 == 0:
                line["agent"] = "tasks"
                line["reply_to"] = f"m{i - 1}"
            if scope:
                line["scope"] = scope
            handle.write(json.dumps(line) + "\n")
    return path


def test_append_commits_and_window_returns_the_newest_in_time_order(tmp_path):
    store = Store(tmp_path / "hub.db")
    for i in range(10):
        store.append(NewMessage(scope="user:1", role="user", text=f"m{i}"))
    store.append(NewMessage(scope="group:-5", role="user", text="other scope"))
    # Durable for another connection at once: committed, not pending.
    other = sqlite3.connect(tmp_path / "hub.db")
    assert other.execute("SELECT count(*) FROM messages WHERE scope='user:1'").fetchone()[0] == 10
    assert [m.text for m in store.window("user:1", 3)] == ["m7", "m8", "m9"]
    assert store.journal_mode() == "wal"


def test_routes_are_stored_on_the_message(tmp_path):
    store = Store(tmp_path / "hub.db")
    stored = store.append(NewMessage(scope="user:1", role="user", text="put it on my tasks"))
    store.set_route(stored.id, "tasks", ["inbox"], "local")
    again = store.get(stored.scope, stored.id)
    assert (again.agent, again.also_sees, again.via) == ("tasks", ("inbox",), "local")


@pytest.mark.parametrize("scope", ["", "user", "user:", "customer:1", "user:1 2", "group:a\nb", None])
def test_invalid_scopes_are_refused(tmp_path, scope):
    store = Store(tmp_path / "hub.db")
    with pytest.raises(InvalidScope):
        store.append(NewMessage(scope=scope, role="user", text="x"))


def test_import_is_idempotent_and_resolves_replies(tmp_path):
    store = Store(tmp_path / "hub.db")
    log = write_log(tmp_path / "log.jsonl", 50)
    first = store.import_records(read_chatlog(log), default_scope="user:7", batch_size=8)
    second = store.import_records(read_chatlog(log), default_scope="user:7", batch_size=8)
    assert (first.added, first.skipped) == (50, 0)
    assert (second.added, second.skipped) == (0, 50)
    assert store.count_messages("user:7") == 50
    reply = store.find_ext("user:7", "m2")
    assert reply.role == "agent" and reply.agent == "tasks"
    assert store.get(reply.scope, reply.reply_to).ext_id == "m1"


def test_lines_with_their_own_scope_keep_it_and_bad_lines_are_reported(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(
        '{"id": 1, "role": "user", "text": "a", "ts": 1, "scope": "group:9"}\n'
        '{"id": 2, "role": "user", "text": "b", "ts": "2024-01-01T10:00:00Z"}\n'
        "not json\n"
        '{"id": 3, "role": "robot", "text": "c", "ts": 1}\n'
        '{"id": 4, "role": "user", "text": "d", "ts": 4, "scope": "nowhere"}\n'
    )
    store = Store(tmp_path / "hub.db")
    from scopehub.memory import ImportReport

    report = ImportReport()
    store.import_records(read_chatlog(path, report), default_scope="user:1", report=report)
    assert store.count_messages("group:9") == 1 and store.count_messages("user:1") == 1
    assert [line for line, _ in report.invalid] == [3, 4, 5]  # json, role, scope
    with pytest.raises(InvalidRecord, match="line 3"):
        list(read_chatlog(path))


IMPORT_SCRIPT = """
import sys, time
from scopehub.memory import Store, read_chatlog
store = Store(sys.argv[1])
def slow(records):
    for i, record in enumerate(records):
        if i and i % 200 == 0:
            print(i, flush=True)
            time.sleep(0.02)
        yield record
store.import_records(slow(read_chatlog(sys.argv[2])), default_scope="user:1", batch_size=100)
print("done", flush=True)
"""


def test_import_killed_midway_leaves_a_consistent_db_and_a_rerun_completes(tmp_path):
    db = tmp_path / "hub.db"
    log = write_log(tmp_path / "log.jsonl", 3000)
    env = checkout_env(tmp_path, os.environ)
    proc = subprocess.Popen([*checkout_python(IMPORT_SCRIPT), str(db), str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    for line in proc.stdout:  # wait until it is well into the import
        if line.strip() == "1200":
            break
    else:
        pytest.fail(f"the import ended before 1,200 lines: {proc.wait()} {proc.stderr.read()}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = Store(db)
    assert store.integrity_check() == "ok"
    partial = store.count_messages("user:1")
    assert 0 < partial < 3000 and partial % 100 == 0  # whole batches only
    report = store.import_records(read_chatlog(log), default_scope="user:1", batch_size=100)
    assert report.added == 3000 - partial
    assert store.count_messages("user:1") == 3000
    ids = [row[0] for row in store.query("SELECT ext_id FROM messages WHERE scope='user:1'")]
    assert len(ids) == len(set(ids)) == 3000


def test_token_records_and_usage(tmp_path):
    store = Store(tmp_path / "hub.db")
    store.append(NewMessage(scope="user:1", role="user", text="x"))
    for total, full in ((100, 300), (150, 350)):
        store.record_call(CallRecord(scope="user:1", agent="tasks", message_id=1, via="local", also_sees=(), tokens={"history": 10, "total": total}, full_history_tokens=full))
    usage = store.usage("user:1")
    assert (usage.messages, usage.agent_calls, usage.tokens_sent, usage.full_history_tokens) == (1, 2, 250, 650)
    assert usage.saving == pytest.approx(1 - 250 / 650)
    assert store.usage("user:2").agent_calls == 0


def test_schema_is_versioned_and_migrates_an_older_database(tmp_path):
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    import sqlite_utils

    MIGRATIONS[0](sqlite_utils.Database(conn))  # a database left at version 1
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO scopes VALUES ('user:1', 'user', 0)")
    conn.execute("INSERT INTO messages(scope, role, text, ts) VALUES ('user:1', 'user', 'kept', 0)")
    conn.close()
    store = Store(db)
    assert store.query("PRAGMA user_version")[0][0] == SCHEMA_VERSION
    assert store.window("user:1", 5)[0].text == "kept"


def test_migration_10_counts_the_tool_calls_of_calls_recorded_before_it(tmp_path):
    """A database at version 9 keeps its calls; each call's tool_calls column is filled from its JSON record."""
    db = tmp_path / "v9.db"
    conn = sqlite3.connect(db, isolation_level=None)
    import sqlite_utils

    database = sqlite_utils.Database(conn)
    for step in MIGRATIONS[:9]:
        step(database)
    conn.execute("PRAGMA user_version = 9")
    for extra in ('{"tool_calls": [{"name": "add_task"}, {"name": "list_tasks"}]}', '{"sent": {}}', "not json"):
        conn.execute("INSERT INTO calls(scope, agent, ts, extra) VALUES ('user:1', 'tasks', 0, ?)", (extra,))
    conn.close()
    store = Store(db)
    assert [row[0] for row in store.query("SELECT tool_calls FROM calls ORDER BY id")] == [2, 0, 0]
    assert store.query("SELECT error_class, error_message FROM calls")[0] == (None, None)


def test_a_database_from_a_newer_release_is_refused(tmp_path):
    db = tmp_path / "new.db"
    Store(db).close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.commit()
    conn.close()
    from scopehub.memory import StoreError

    with pytest.raises(StoreError, match="newer"):
        Store(db)


def test_nested_transactions_commit_with_the_outer_one_and_fail_alone(tmp_path):
    from scopehub.memory import add_task, list_tasks

    store = Store(tmp_path / "hub.db")
    other = Store(tmp_path / "hub.db")  # another connection: what other processes see
    with store.transaction():
        add_task(store, "user:1", "kept")  # add_task opens its own (nested) transaction
        with pytest.raises(InvalidRecord), store.transaction():
            add_task(store, "user:1", "undone with its block")
            raise InvalidRecord("inner block fails")
        assert list_tasks(other, "user:1") == []  # nothing committed before the outer block ends
    assert [t.title for t in list_tasks(other, "user:1")] == ["kept"]
    with pytest.raises(RuntimeError), store.transaction():
        add_task(store, "user:1", "rolled back with the outer block")
        raise RuntimeError("outer block fails")
    assert [t.title for t in list_tasks(other, "user:1")] == ["kept"]
    other.close()
    store.close()


def test_an_import_commits_batch_by_batch(tmp_path):
    # What a killed import keeps: while the records of batch n are read, another connection
    # sees exactly the n whole batches before it (speed is `agents-hub bench`'s business).
    db = tmp_path / "hub.db"
    store = Store(db)
    reader = sqlite3.connect(db)
    seen: list[tuple[int, int]] = []

    def watched(records):
        for index, record in enumerate(records):
            seen.append((index, reader.execute("SELECT count(*) FROM messages").fetchone()[0]))
            yield record

    report = store.import_records(watched(read_chatlog(write_log(tmp_path / "log.jsonl", 1050))), default_scope="user:1", batch_size=100)
    assert report.added == 1050
    assert seen == [(index, index // 100 * 100) for index in range(1050)]
    assert reader.execute("SELECT count(*) FROM messages").fetchone()[0] == 1050


def test_is_answered_reads_indexes_not_whole_tables(tmp_path):
    # Asked several times a turn: a scan of messages or calls grows with the whole database.
    store = Store(tmp_path / "hub.db")
    asked = store.append(NewMessage(scope="user:1", role="user", text="hi", ts=1.0))
    assert not store.is_answered(asked.id)
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    store.is_answered(asked.id)
    store.conn.set_trace_callback(None)
    [sql] = [s for s in statements if "SELECT" in s]
    plan = " | ".join(row[3] for row in store.conn.execute("EXPLAIN QUERY PLAN " + sql))
    assert "SCAN messages" not in plan and "SCAN calls" not in plan, plan
    store.append(NewMessage(scope="user:1", role="agent", agent="general", text="hello", ts=2.0, reply_to=asked.id))
    assert store.is_answered(asked.id)
    store.close()


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-abcdefghijklmnop1234",
        "ghp_abcdefghijklmnopqrstuvwxyz012345",
        "xoxb-1234567890-abcdefghij",
        "AIzaSyA1234567890abcdefghijklmnopqrs",
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        "0123456789abcdef0123456789abcdef",
    ],
)
def test_credential_shaped_text_is_redacted_from_error_messages(secret):
    from scopehub.memory import redact_secrets

    kept = redact_secrets(f"request failed (credential {secret}) at https://api.example/v1: retry later")
    assert secret not in kept and "[redacted]" in kept
    assert kept.startswith("request failed (credential ") and kept.endswith("at https://api.example/v1: retry later")
    assert redact_secrets("timeout after 30 s talking to gpt-4o-mini") == "timeout after 30 s talking to gpt-4o-mini"
