"""One suite for every memory backend: what the hub relies on, scope by scope.

Run against each backend in ``tests/memory/backends.py``. A new backend passes this
before the hub may use it.
"""

from __future__ import annotations

import pytest

from scopehub.memory import (
    CallRecord,
    DuplicateMessage,
    InvalidScope,
    LogRecord,
    MemoryStore,
    NewFact,
    NewMessage,
    add_fact,
    add_reminder,
    add_task,
    add_vault_item,
    complete_task,
    current_facts,
    due_reminders,
    get_reminder,
    get_task,
    get_vault_item,
    list_tasks,
    mark_reminder_sent,
)

from .backends import BACKENDS

A, B = "user:1", "group:-100"


@pytest.fixture(params=sorted(BACKENDS))
def store(request, tmp_path) -> MemoryStore:
    opened = BACKENDS[request.param](request, tmp_path)
    yield opened
    opened.close()


def say(store: MemoryStore, scope: str, text: str, **fields) -> int:
    return store.append(NewMessage(scope=scope, role=fields.pop("role", "user"), text=text, **fields)).id


def test_it_is_a_memory_store(store):
    assert isinstance(store, MemoryStore)


def test_append_then_read_back_in_its_own_scope_only(store):
    first = say(store, A, "buy milk", ext_id="7", sender="ann", chat="1")
    say(store, B, "group chatter")
    message = store.get(A, first)
    assert (message.text, message.ext_id, message.sender, message.chat, message.role) == ("buy milk", "7", "ann", "1", "user")
    assert store.get(B, first) is None  # an id of another scope is as if it did not exist
    assert store.find_ext(A, "7").id == first and store.find_ext(B, "7") is None
    assert [m.text for m in store.window(A, 10)] == ["buy milk"]
    assert store.count_messages(A) == 1 and store.count_messages() == 2
    assert set(store.scopes()) == {A, B}


def test_window_is_the_last_n_in_time_order_up_to_an_id(store):
    ids = [say(store, A, f"m{i}") for i in range(10)]
    assert [m.text for m in store.window(A, 3)] == ["m7", "m8", "m9"]
    assert [m.text for m in store.window(A, 3, up_to=ids[4])] == ["m2", "m3", "m4"]
    assert [m.text for m in store.messages(A, after=ids[7])] == ["m8", "m9"]
    assert store.latest(A).text == "m9"
    assert store.window(A, 0) == []


def test_a_transport_id_is_unique_per_scope_not_across(store):
    say(store, A, "hello", ext_id="42")
    say(store, B, "hello", ext_id="42")
    with pytest.raises(DuplicateMessage):
        say(store, A, "hello again", ext_id="42")
    assert store.count_messages(A) == 1


def test_a_bad_scope_is_refused_before_anything_is_written(store):
    with pytest.raises(InvalidScope):
        say(store, "alice", "hi")
    assert store.count_messages() == 0


def test_the_route_is_stored_on_the_message(store):
    mid = say(store, A, "what is on my list?")
    store.set_route(mid, "tasks", ("inbox",), "local")
    tagged = store.get(A, mid)
    assert (tagged.agent, tagged.also_sees, tagged.via) == ("tasks", ("inbox",), "local")
    assert not store.is_answered(mid)
    say(store, A, "nothing yet", role="agent", agent="tasks", reply_to=mid)
    assert store.is_answered(mid)


def test_calls_are_recorded_and_summed_per_scope(store):
    mid = say(store, A, "hi")
    tokens = {"persona": 10, "rules": 5, "tools": 20, "facts": 0, "history": 30, "message": 2, "total": 67}
    store.record_call(CallRecord(scope=A, agent="general", message_id=mid, via="local", also_sees=(), tokens=tokens, full_history_tokens=100))
    store.record_call(CallRecord(scope=B, agent="general", message_id=None, via="local", also_sees=(), tokens=tokens, full_history_tokens=300))
    usage = store.usage(A)
    assert (usage.messages, usage.agent_calls, usage.tokens_sent, usage.full_history_tokens) == (1, 1, 67, 100)
    assert [call["agent"] for call in store.calls(A)] == ["general"]


def test_import_is_idempotent_by_scope_and_id(store):
    records = [LogRecord(id=f"x{i}", role="user", text=f"line {i}", ts=1_700_000_000 + i) for i in range(5)]
    first = store.import_records(records, default_scope=A)
    again = store.import_records(records, default_scope=A)
    assert (first.added, again.added, again.skipped) == (5, 0, 5)
    assert store.count_messages(A) == 5


def test_search_finds_only_the_scopes_own_messages(store):
    say(store, A, "the plumber comes on Tuesday")
    say(store, B, "the plumber of the group is Bob")
    hits = store.search(A, "plumber")
    assert hits and all("Bob" not in hit.text for hit in hits)
    assert "Tuesday" in hits[0].text


def test_records_are_scoped(store):
    task = add_task(store, A, "buy milk")
    assert get_task(store, B, task.id) is None
    assert complete_task(store, B, task.id) is None  # another scope cannot touch it
    assert [t.title for t in list_tasks(store, A)] == ["buy milk"]
    note = add_vault_item(store, A, "note", "door code 1234", title="door")
    assert get_vault_item(store, B, note.id) is None
    add_fact(store, A, NewFact(text="User is vegetarian", kind="constraint", key="user.diet"))
    assert [f.text for f in current_facts(store, A)] == ["User is vegetarian"] and current_facts(store, B) == []
    reminder = add_reminder(store, A, "call mom", due=1000.0, chat="1")
    assert get_reminder(store, B, reminder.id) is None
    assert [r.id for r in due_reminders(store, 2000.0)] == [reminder.id]
    assert mark_reminder_sent(store, B, reminder.id, 2000.0) is None
    assert mark_reminder_sent(store, A, reminder.id, 2000.0).active is False


def test_erase_removes_one_scope_and_leaves_the_other(store):
    mid = say(store, A, "secret plumber note")
    say(store, B, "group plumber note")
    add_task(store, A, "secret task")
    add_fact(store, A, NewFact(text="User lives in Pune", kind="identity", key="user.city"))
    store.record_call(CallRecord(scope=A, agent="general", message_id=mid, via="local", also_sees=(), tokens={"total": 1}, full_history_tokens=1))
    removed = store.erase(A)
    assert removed["messages"] == 1 and removed["tasks"] == 1 and removed["facts"] == 1 and removed["calls"] == 1
    assert store.count_messages(A) == 0 and list_tasks(store, A) == []
    assert store.count_messages(B) == 1
    assert store.search(A, "plumber") == [] and store.search(B, "plumber")
    assert A not in store.scopes()
