"""Events: validated payloads, one transaction with the tool's row, id cursors, targeting, scopes, erasure."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from scopehub.memory import (
    SCHEMA_VERSION,
    SUMMARY_CHARS,
    EventPayload,
    InvalidEvent,
    InvalidRecord,
    Store,
    StoreError,
    UnknownEventType,
    add_task,
    advance_cursor,
    cursor_of,
    emit_event,
    event_type,
    event_types,
    events_after,
    latest_events,
    list_tasks,
    register_event_type,
    scoped_event_types,
    unconsumed_events,
    validate_event_payload,
)
from scopehub.memory._schema import MIGRATIONS

U1, U2 = "user:1", "user:2"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "hub.db") as opened:
        yield opened


def task_created(task_id: int, title: str = "Pay rent") -> dict:
    return {"task_id": task_id, "number": task_id, "title": title, "due": None}


def email(email_id: int, subject: str = "Quarterly report") -> dict:
    return {"email_id": email_id, "sender": "Ram <ram@x.org>", "subject": subject, "dates": []}


def count(store: Store, table: str) -> int:
    return store.query(f"SELECT count(*) FROM {table}")[0][0]


# -- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"task_id": 1}, "event task.created: field 'title' is required"),
        ({"task_id": "seven", "title": "x"}, "event task.created: field 'task_id': "),
        ({"task_id": 1, "title": "x", "priority": "high"}, "event task.created: field 'priority' is not allowed"),
        ({"task_id": 1, "title": ""}, "event task.created: field 'title': "),
        ("just text", "event task.created: the payload must be an object"),
    ],
)
def test_an_invalid_payload_is_refused_naming_the_field_and_nothing_is_written(store, payload, message):
    with pytest.raises(InvalidEvent) as caught:
        emit_event(store, U1, "tasks", "task.created", payload)
    assert str(caught.value).startswith(message)
    assert isinstance(caught.value, InvalidRecord) and isinstance(caught.value, StoreError)
    assert count(store, "events") == 0


def test_nested_field_errors_name_the_path(store):
    bad = {**email(1), "dates": [{"text": "by friday", "day": "someday"}]}
    with pytest.raises(InvalidEvent, match=r"event email.received: field 'dates\.0\.day'"):
        emit_event(store, U1, "inbox", "email.received", bad)


def test_an_unknown_type_is_refused_by_name(store):
    with pytest.raises(UnknownEventType, match=r"unknown event type 'task\.exploded'"):
        emit_event(store, U1, "tasks", "task.exploded", {"task_id": 1})
    assert count(store, "events") == 0


def test_the_stored_payload_is_the_validated_one(store):
    event = emit_event(
        store, U1, "reminders", "reminder.set", {"reminder_id": 3, "text": "call mom", "due": 1714557600}, now=5.0
    )
    assert event.payload == {"reminder_id": 3, "text": "call mom", "due": "2024-05-01T10:00:00Z", "every_seconds": None}
    assert events_after(store, U1, 0) == [event]


def test_every_builtin_type_has_required_fields_and_refuses_extras():
    names = {entry.name for entry in event_types()}
    assert {
        "task.created", "task.done", "note.saved", "email.received", "draft.saved",
        "reminder.set", "reminder.fired", "reminder.cancelled", "fact.learned",
    } <= names  # fmt: skip
    for entry in event_types():
        with pytest.raises(InvalidEvent, match="is required"):
            validate_event_payload(entry.name, {})
        assert entry.model.model_config.get("extra") == "forbid"


# What each built-in type requires, with a valid payload: the contract other agents (and
# outside programs through `events emit`) rely on.
REQUIRED = {
    "task.created": ({"task_id", "title"}, {"task_id": 1, "title": "Pay rent", "due": "2024-05-03"}),
    "task.done": ({"task_id", "title"}, {"task_id": 1, "title": "Pay rent"}),
    "note.saved": ({"note_id", "title"}, {"note_id": 2, "title": "Wifi"}),
    "email.received": ({"email_id", "sender", "subject", "dates"}, {"email_id": 3, "sender": "ram@example.com", "subject": "Report", "dates": []}),
    "draft.saved": ({"draft_id", "to", "subject"}, {"draft_id": 4, "to": "ram@example.com", "subject": "Re: Report"}),
    "reminder.set": ({"reminder_id", "text", "due"}, {"reminder_id": 5, "text": "call mom", "due": "2024-05-01T10:00:00Z"}),
    "reminder.fired": ({"reminder_id", "text"}, {"reminder_id": 5, "text": "call mom"}),
    "reminder.cancelled": ({"reminder_id", "text"}, {"reminder_id": 5, "text": "call mom"}),
    "fact.learned": ({"text"}, {"text": "Ann is vegetarian"}),
    "dispatch.sent": ({"team", "subject", "file"}, {"team": "crm", "subject": "Lead", "file": "x.md"}),
}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_each_builtin_type_refuses_a_payload_without_each_of_its_required_fields(name):
    required, valid = REQUIRED[name]
    entry = event_type(name)
    assert {field for field, info in entry.model.model_fields.items() if info.is_required()} == required
    validate_event_payload(name, valid)  # the sample is valid as it stands
    for field in sorted(required):
        with pytest.raises(InvalidEvent, match=f"event {name}: field '{field}' is required"):
            validate_event_payload(name, {k: v for k, v in valid.items() if k != field})


# -- one transaction with the tool's row --------------------------------------------------------


def test_an_invalid_event_inside_the_block_leaves_no_task_row(store):
    with pytest.raises(InvalidEvent), store.transaction():
        add_task(store, U1, "Pay rent")
        emit_event(store, U1, "tasks", "task.created", {"task_id": 1})  # no title
    assert list_tasks(store, U1) == [] and count(store, "events") == 0


def test_a_failing_row_write_leaves_no_event(store):
    with pytest.raises(InvalidRecord, match="needs a title"), store.transaction():
        emit_event(store, U1, "tasks", "task.created", task_created(1))
        add_task(store, U1, "   ")
    assert count(store, "events") == 0 and list_tasks(store, U1) == []


def test_row_and_event_commit_together_and_only_at_the_end_of_the_block(store, tmp_path):
    other = Store(tmp_path / "hub.db")  # another connection: what other processes see
    with store.transaction():
        task = add_task(store, U1, "Pay rent")
        emit_event(store, U1, "tasks", "task.created", task_created(task.id))
        assert count(store, "events") == 1  # visible to this connection...
        assert count(other, "events") == 0 and list_tasks(other, U1) == []  # ...not committed yet
    assert [t.title for t in list_tasks(other, U1)] == ["Pay rent"]
    assert [e.payload["task_id"] for e in events_after(other, U1, 0)] == [task.id]
    other.close()


def test_an_error_caught_inside_the_block_undoes_only_the_nested_part(store):
    with store.transaction():
        add_task(store, U1, "Pay rent")
        with pytest.raises(InvalidEvent):
            emit_event(store, U1, "tasks", "task.created", {"task_id": 1})
        emit_event(store, U1, "tasks", "task.created", task_created(1))
    assert [t.title for t in list_tasks(store, U1)] == ["Pay rent"]
    assert count(store, "events") == 1


# -- ids and cursors ----------------------------------------------------------------------------


def test_ids_strictly_increase_with_equal_timestamps_and_a_clock_that_steps_back(store):
    clock = [1000.0, 1000.0, 1000.0, 999.0, 10.0, 1000.0, 1000.0, 500.0, 500.0, 2000.0] * 3
    emitted = [emit_event(store, U1, "tasks", "task.created", task_created(i), now=ts) for i, ts in enumerate(clock)]
    ids = [e.id for e in emitted]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    # Consuming in small batches by cursor sees every event once, in emission order.
    seen = []
    while batch := unconsumed_events(store, U1, "inbox", interests={"task.created"}, limit=4):
        seen.extend(batch)
        advance_cursor(store, U1, "inbox", batch[-1].id)
    assert [e.payload["task_id"] for e in seen] == list(range(len(clock)))


def test_ids_are_never_reused_even_after_the_newest_events_are_erased(store):
    first = emit_event(store, U1, "tasks", "task.created", task_created(1))
    store.erase(U1)
    again = emit_event(store, U1, "tasks", "task.created", task_created(2))
    assert again.id > first.id


def test_a_cursor_only_moves_forward(store):
    for i in range(6):
        emit_event(store, U1, "tasks", "task.created", task_created(i))
    assert cursor_of(store, U1, "inbox") == 0
    assert advance_cursor(store, U1, "inbox", 5) == 5
    assert advance_cursor(store, U1, "inbox", 3) == 5  # never back
    assert cursor_of(store, U1, "inbox") == 5
    assert [e.id for e in unconsumed_events(store, U1, "inbox", interests={"task.created"})] == [6]
    with pytest.raises(InvalidRecord):
        advance_cursor(store, U1, "inbox", -1)


def test_a_cursor_never_passes_the_newest_event_so_later_events_are_not_skipped(store):
    emit_event(store, U1, "tasks", "task.created", task_created(1))
    assert advance_cursor(store, U1, "inbox", 10**9) == 1
    later = emit_event(store, U1, "tasks", "task.created", task_created(2))
    assert unconsumed_events(store, U1, "inbox", interests={"task.created"}) == [later]


def test_events_are_shown_again_until_the_cursor_moves_and_never_after(store):
    first = emit_event(store, U1, "inbox", "email.received", email(1))
    shown = unconsumed_events(store, U1, "tasks", interests={"email.received"})
    assert shown == [first]
    # The call crashed before it was recorded: the cursor did not move, the event comes again.
    assert unconsumed_events(store, U1, "tasks", interests={"email.received"}) == [first]
    # An event emitted while the call ran was not shown: advancing to the newest *shown* id keeps it.
    during = emit_event(store, U1, "inbox", "email.received", email(2))
    advance_cursor(store, U1, "tasks", shown[-1].id)
    assert unconsumed_events(store, U1, "tasks", interests={"email.received"}) == [during]
    advance_cursor(store, U1, "tasks", during.id)
    assert unconsumed_events(store, U1, "tasks", interests={"email.received"}) == []


# -- who sees what ------------------------------------------------------------------------------


def test_a_targeted_event_is_seen_by_its_target_only(store):
    broadcast = emit_event(store, U1, "inbox", "email.received", email(1))
    targeted = emit_event(store, U1, "inbox", "email.received", email(2), target="tasks")
    interests = {"email.received"}
    assert unconsumed_events(store, U1, "tasks", interests=interests) == [broadcast, targeted]
    assert unconsumed_events(store, U1, "notes", interests=interests) == [broadcast]
    # The target sees it whatever its interests; nobody else, whatever theirs.
    assert unconsumed_events(store, U1, "tasks", interests=set()) == [targeted]
    assert unconsumed_events(store, U1, "notes", interests={"*"}) == [broadcast]
    assert latest_events(store, U1) == [broadcast]
    assert latest_events(store, U1, for_agent="notes") == [broadcast]
    assert latest_events(store, U1, for_agent="tasks") == [broadcast, targeted]
    assert latest_events(store, U1, types=["email.*"], agents=["inbox"], for_agent="tasks") == [broadcast, targeted]
    assert latest_events(store, U1, agents=["inbox"], for_agent="notes") == [broadcast]
    # The raw log (not for agents' eyes) holds both.
    assert events_after(store, U1, 0, types=["email.received"]) == [broadcast, targeted]


def test_interests_select_broadcast_types_and_patterns_match_a_family(store):
    made = emit_event(store, U1, "tasks", "task.created", task_created(1))
    set_ = emit_event(store, U1, "reminders", "reminder.set", {"reminder_id": 1, "text": "call mom", "due": 100})
    fired = emit_event(store, U1, "hub", "reminder.fired", {"reminder_id": 1, "text": "call mom"})
    assert unconsumed_events(store, U1, "tasks", interests={"reminder.*"}) == [set_, fired]
    assert unconsumed_events(store, U1, "tasks", interests={"task.created", "reminder.fired"}) == [made, fired]
    assert unconsumed_events(store, U1, "tasks", interests=set()) == []
    assert unconsumed_events(store, U1, "tasks", interests="task.created") == [made]  # one name, not letters
    assert latest_events(store, U1, agents="tasks") == [made]


def test_latest_events_filters_by_emitter_and_type_newest_kept_oldest_first(store):
    emitted = []
    for i in range(5):
        emitted.append(emit_event(store, U1, "tasks", "task.created", task_created(i)))
        emitted.append(emit_event(store, U1, "inbox", "email.received", email(i)))
    assert latest_events(store, U1, limit=3) == emitted[-3:]
    assert latest_events(store, U1, agents=["inbox"], limit=2) == [emitted[7], emitted[9]]
    assert latest_events(store, U1, types=["task.*"], limit=2) == [emitted[6], emitted[8]]
    assert latest_events(store, U1, agents=["inbox"], types=["task.created"]) == []
    assert latest_events(store, U1, agents=[], limit=5) == []
    assert events_after(store, U1, emitted[5].id, agent="tasks") == [emitted[6], emitted[8]]
    assert events_after(store, U1, 0, types=["email.received"], limit=2) == [emitted[1], emitted[3]]


def test_events_of_one_scope_are_never_returned_for_another(store):
    mine = emit_event(store, U1, "inbox", "email.received", email(1), target="tasks")
    emit_event(store, U1, "inbox", "email.received", email(2))
    advance_cursor(store, U1, "tasks", mine.id)
    interests = {"*"}
    assert unconsumed_events(store, U2, "tasks", interests=interests) == []
    assert latest_events(store, U2, for_agent="tasks") == []
    assert events_after(store, U2, 0) == []
    assert cursor_of(store, U2, "tasks") == 0  # cursors are per scope too
    theirs = emit_event(store, U2, "inbox", "email.received", email(3))
    assert unconsumed_events(store, U2, "notes", interests=interests) == [theirs]
    assert all(e.scope == U1 for e in events_after(store, U1, 0))


# -- registry and summaries ---------------------------------------------------------------------


class PizzaOrdered(EventPayload):
    order_id: int
    topping: str


@pytest.fixture
def own_types():
    """Types this test registers are forgotten after it."""
    with scoped_event_types():
        yield


def test_a_plugin_registers_its_own_type_and_registering_it_again_is_harmless(store, own_types):
    entry = register_event_type(
        "pizza.ordered", PizzaOrdered, description="a pizza was ordered", summary="pizza #{order_id} with {topping}"
    )
    assert register_event_type("pizza.ordered", PizzaOrdered, description="a pizza was ordered") is entry
    assert event_type("pizza.ordered") is entry and entry in event_types()
    event = emit_event(store, U1, "pizza", "pizza.ordered", {"order_id": 7, "topping": "basil"})
    assert event.summary() == "pizza #7 with basil"
    with pytest.raises(InvalidEvent, match="field 'topping' is required"):
        emit_event(store, U1, "pizza", "pizza.ordered", {"order_id": 8})

    class Other(EventPayload):
        order_id: int

    with pytest.raises(ValueError, match="already registered"):
        register_event_type("pizza.ordered", Other, description="something else")
    assert event_type("pizza.ordered") is entry


def test_a_type_must_have_a_dotted_name_and_a_model_that_refuses_extra_fields():
    class Loose(BaseModel):
        value: int

    with pytest.raises(ValueError, match="forbid extra fields"):
        register_event_type("loose.thing", Loose, description="x")
    with pytest.raises(ValueError, match="dotted"):
        register_event_type("NoDots", PizzaOrdered, description="x")
    assert event_type("loose.thing") is None


def test_summaries_are_one_short_line_with_what_matters(store):
    mail = emit_event(
        store,
        U1,
        "inbox",
        "email.received",
        {
            "email_id": 4,
            "sender": "Ram <ram@x.org>",
            "subject": "Quarterly report",
            "dates": [{"text": "by Friday", "day": "2024-05-03", "deadline": True}],
        },
    )
    assert mail.summary() == 'email #4 from Ram <ram@x.org> "Quarterly report", deadline Fri 2024-05-03'
    reminder = emit_event(
        store, U1, "reminders", "reminder.set", {"reminder_id": 2, "text": "call mom", "due": "2024-05-01T18:00:00+02:00"}
    )
    assert reminder.summary() == 'reminder #2 set for Wed 2024-05-01 18:00: "call mom"'
    long = emit_event(store, U1, "tasks", "task.created", task_created(1, "word " * 200))
    assert "\n" not in long.summary() and len(long.summary()) <= SUMMARY_CHARS


# -- schema and erasure -------------------------------------------------------------------------


def test_an_older_database_gains_the_coordination_tables(tmp_path):
    import sqlite_utils

    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    for step in MIGRATIONS[:2]:
        step(sqlite_utils.Database(conn))
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    with Store(db) as store:
        assert store.query("PRAGMA user_version")[0][0] == SCHEMA_VERSION
        assert emit_event(store, U1, "tasks", "task.created", task_created(1)).id == 1


def file_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists())


def test_erasure_removes_events_and_cursors_down_to_the_file(tmp_path):
    db = tmp_path / "hub.db"
    secret, kept = "ZEBRAFISH7731", "PANGOLIN5150"
    with Store(db) as store:
        for scope, word in ((U1, secret), (U2, kept)):
            for i in range(50):
                event = emit_event(store, scope, "tasks", "task.created", task_created(i, f"{word} errand {i}"))
            advance_cursor(store, scope, "inbox", event.id)
        removed = store.erase(U1)
        assert removed["events"] == 50 and removed["cursors"] == 1
        assert events_after(store, U1, 0) == [] and cursor_of(store, U1, "inbox") == 0
        assert len(events_after(store, U2, 0)) == 50
    raw = file_bytes(db)
    assert secret.encode() not in raw
    assert kept.encode() in raw
