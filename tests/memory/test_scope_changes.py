"""Changes to stored data after the fact: an edited message, a scope that moves (a Telegram
group that became a supergroup), and per-scope numbers in a database from before them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlite_utils

from scopehub.memory import (
    SCHEMA_VERSION,
    CallRecord,
    NewFact,
    NewMessage,
    Store,
    add_fact,
    add_reminder,
    add_task,
    add_vault_item,
    current_facts,
    due_reminders,
    get_reminder,
    list_tasks,
)
from scopehub.memory._schema import MIGRATIONS

NOW = 1_750_000_000.0


def say(store: Store, scope: str, text: str, **fields) -> int:
    return store.append(NewMessage(scope=scope, role="user", text=text, ts=NOW, **fields)).id


def test_an_edited_message_is_found_by_its_new_words_only(tmp_path: Path) -> None:
    with Store(tmp_path / "hub.db") as store:
        edited = say(store, "user:1", "meet me at the library")
        store.set_route(edited, "notes", (), "local")
        after = say(store, "user:1", "ok, see you then")  # indexed with its predecessor as context
        assert store.edit_text("user:1", edited, "meet me at the museum")
        assert [h.id for h in store.search("user:1", "museum")][:1] == [edited]
        assert store.search("user:1", "library") == []  # neither the message nor its neighbour's context
        message = store.get("user:1", edited)
        assert (message.text, message.agent, message.via) == ("meet me at the museum", "notes", "local")
        assert store.get("user:1", after).text == "ok, see you then"
        assert not store.edit_text("user:2", edited, "not yours")  # another scope's id is unknown
        assert store.get("user:1", edited).text == "meet me at the museum"


def test_a_moved_scope_keeps_everything_under_the_new_name(tmp_path: Path) -> None:
    old, new = "group:-100", "group:-1001"
    with Store(tmp_path / "hub.db") as store:
        first = say(store, old, "the hall costs 300 EUR", sender="Ann", chat="-100", ext_id="-100:1")
        store.record_call(CallRecord(scope=old, agent="general", message_id=first, via="local", also_sees=(), tokens={"total": 10}, full_history_tokens=20))
        add_fact(store, old, NewFact(text="the group meets on Fridays", source_message=first), now=NOW)
        add_vault_item(store, old, "note", "the wifi password is hunter2", title="wifi", now=NOW)
        add_task(store, old, "book the hall", now=NOW)
        add_task(store, old, "buy cake", now=NOW)
        reminder = add_reminder(store, old, "pay the hall", NOW + 60, chat="-100", now=NOW)
        say(store, "group:-7", "another group's hall", chat="-7")
        # The supergroup's first message arrived before the move, and a task with it.
        say(store, new, "hello from the supergroup", chat="-1001", ext_id="-1001:1")
        add_task(store, new, "first supergroup task", now=NOW)

        moved = store.move_scope(old, new, old_chat="-100", new_chat="-1001")

        assert moved["messages"] == 1 and moved["tasks"] == 2 and moved["reminders"] == 1
        for table in ("messages", "calls", "facts", "vault", "tasks", "reminders", "scopes"):
            assert store.query(f"SELECT count(*) FROM {table} WHERE scope = ?", (old,))[0][0] == 0, table
        assert old not in store.scopes() and new in store.scopes()
        assert [m.text for m in store.messages(new)] == ["the hall costs 300 EUR", "hello from the supergroup"]
        assert [h.text for h in store.search(new, "hall")] == ["the hall costs 300 EUR"]
        assert store.search(new, "hunter2")[0].kind == "vault"
        assert store.search(old, "hall") == []
        assert [f.text for f in current_facts(store, new)] == ["the group meets on Fridays"]
        assert store.usage(new).agent_calls == 1
        # Numbers people know are kept, after the ones the supergroup already gave.
        assert sorted((t.id, t.title) for t in list_tasks(store, new)) == [
            (1, "first supergroup task"), (2, "book the hall"), (3, "buy cake")
        ]
        assert add_task(store, new, "next", now=NOW).id == 4
        moved_reminder = get_reminder(store, new, reminder.id)
        assert moved_reminder is not None and moved_reminder.chat == "-1001"  # delivered to the new chat
        assert [r.chat for r in due_reminders(store, NOW + 61)] == ["-1001"]
        assert [m.text for m in store.messages("group:-7")] == ["another group's hall"]
        assert store.move_scope(old, new) == {}  # done once; a second notice changes nothing
        assert store.integrity_check() == "ok"


def test_a_database_from_before_numbers_gets_them_per_scope(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    for migration in MIGRATIONS[:2]:  # the schema before per-scope numbers
        migration(sqlite_utils.Database(conn))
    conn.execute("PRAGMA user_version = 2")
    for scope, title in (("user:1", "a"), ("user:2", "b"), ("user:1", "c")):
        conn.execute("INSERT INTO scopes VALUES (?, 'user', 0) ON CONFLICT DO NOTHING", (scope,))
        conn.execute("INSERT INTO tasks(scope, title, created) VALUES (?, ?, 0)", (scope, title))
    conn.close()
    with Store(db) as store:
        assert store.query("PRAGMA user_version")[0][0] == SCHEMA_VERSION
        assert [(t.id, t.title) for t in list_tasks(store, "user:1")] == [(1, "a"), (2, "c")]
        assert [(t.id, t.title) for t in list_tasks(store, "user:2")] == [(1, "b")]
        assert add_task(store, "user:1", "d").id == 3
