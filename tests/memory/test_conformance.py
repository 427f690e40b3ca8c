"""One suite for every memory backend: what the hub relies on, scope by scope.

Run against each backend in ``tests/memory/backends.py``. A new backend passes this
before the hub may use it.
"""

from __future__ import annotations

import pytest

from scopehub.memory import (
    CHANNEL_LIMIT,
    TRAIT_EVIDENCE,
    CallRecord,
    DigestLine,
    DuplicateMessage,
    InvalidRecord,
    InvalidScope,
    LogRecord,
    MemoryStore,
    NewFact,
    NewMessage,
    acquire_claim,
    active_claims,
    add_fact,
    add_goal,
    add_knowledge,
    add_lesson,
    add_plan,
    add_reminder,
    add_task,
    add_vault_item,
    advance_channel_cursor,
    advance_cursor,
    agent_memory,
    cancel_reminder,
    channel_stats,
    complete_task,
    current_facts,
    cursor_of,
    digest_usage,
    drop_expired_claim,
    due_reminders,
    edit_task,
    emit_event,
    events_after,
    expired_claims,
    get_claim,
    get_digest,
    get_feedback,
    get_reminder,
    get_task,
    get_vault_item,
    goals_of,
    last_served_digest,
    latest_events,
    lessons_of,
    list_knowledge,
    list_reminders,
    list_tasks,
    mark_reminder_sent,
    messages_after,
    note_reminder_failure,
    pause_chat_reminders,
    pending_feedback,
    pending_reminders,
    pin_channel_message,
    plans_of,
    post_to_channel,
    react_to_channel_message,
    read_channel,
    recent_events,
    record_digest_failure,
    record_feedback,
    record_rejected_update,
    release_claim,
    renew_claim,
    research_of,
    resume_chat_reminders,
    save_digest,
    save_reflection,
    traits_of,
    unconsumed_events,
    unseen_channel_messages,
    update_chat_settings,
    update_goal,
    update_plan,
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
    # Of the last five, those after m6; of the last five up to m8, those after m5.
    assert [m.text for m in store.window(A, 5, after=ids[6])] == ["m7", "m8", "m9"]
    assert [m.text for m in store.window(A, 5, up_to=ids[8], after=ids[5])] == ["m6", "m7", "m8"]
    assert [m.text for m in store.window(A, 2, after=ids[1])] == ["m8", "m9"]
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


def test_a_failed_call_keeps_its_error_class_and_message_with_secrets_redacted(store):
    mid = say(store, A, "hi")
    message = (
        "AuthenticationError: Incorrect API key provided: sk-proj-abcdefghijklmnop1234."
        " Retried https://bob:hunter2secret@proxy.example/v1 with Authorization: Bearer eyJhbGciOiJIUzI1NiJ9xyz"
    )
    store.record_call(
        CallRecord(scope=A, agent="general", message_id=mid, via="local", also_sees=(), tokens={"total": 3},
                   full_history_tokens=3, ok=False, error_class="litellm.AuthenticationError", error_message=message)
    )  # fmt: skip
    store.record_call(CallRecord(scope=A, agent="general", message_id=mid, via="local", also_sees=(), tokens={}, full_history_tokens=0,
                                 extra={"tool_calls": [{"name": "add_task"}, {"name": "list_tasks"}]}))  # fmt: skip
    failed, fine = store.calls(A)
    assert (failed["tool_calls"], fine["tool_calls"]) == (0, 2)  # counted from the record, for the console's filter
    assert (failed["ok"], failed["error_class"]) == (0, "litellm.AuthenticationError")
    kept = failed["error_message"]
    assert kept.startswith("AuthenticationError: Incorrect API key provided: [redacted]")
    for secret in ("sk-proj-abcdefghijklmnop1234", "hunter2secret", "eyJhbGciOiJIUzI1NiJ9xyz"):
        assert secret not in kept
    assert "https://bob:[redacted]@proxy.example/v1" in kept
    assert (fine["error_class"], fine["error_message"]) == (None, None)


def test_a_failed_router_or_extractor_call_does_not_answer_the_message(store):
    """Only an agent's failed call is an answer (its apology was sent); the hub's own calls fail silently."""
    mid = say(store, A, "hi")
    for via in ("router", "extractor"):
        store.record_call(CallRecord(scope=A, agent="hub", message_id=mid, via=via, also_sees=(), tokens={}, full_history_tokens=0,
                                     ok=False, error_class="RouterError", error_message="router model timed out"))  # fmt: skip
    assert not store.is_answered(mid)
    store.record_call(CallRecord(scope=A, agent="general", message_id=mid, via="local", also_sees=(), tokens={}, full_history_tokens=0, ok=False))
    assert store.is_answered(mid)


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


# -- every table group, on every backend ------------------------------------------------


def scoped_tables(store: MemoryStore) -> list[str]:
    """The backend's tables with a ``scope`` column (what erase must empty for a scope)."""
    if store.dialect.is_sqlite:
        names = [row[0] for row in store.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return sorted(n for n in names if "scope" in {row[1] for row in store.query(f'PRAGMA table_info("{n}")')})
    return sorted(
        row[0]
        for row in store.query(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'scope'"
        )
    )


def rows_of(store: MemoryStore, scope: str) -> dict[str, int]:
    """Rows per table that belong to ``scope`` (non-empty tables only)."""
    counts = {t: store.query(f'SELECT count(*) FROM "{t}" WHERE scope = ?', (scope,))[0][0] for t in scoped_tables(store)}
    return {t: n for t, n in counts.items() if n}


def fill(store: MemoryStore, scope: str, tag: str) -> None:
    """One or more rows in every table group: messages, calls, facts, vault, tasks, reminders,
    events and cursors, claims, channels, agent memory, digest, reflection and knowledge."""
    asked = say(store, scope, f"{tag} question", ext_id=f"{tag}-1")
    store.append(NewMessage(scope=scope, role="agent", text=f"{tag} answer", reply_to=asked, agent="general"))
    store.record_call(
        CallRecord(scope=scope, agent="general", message_id=asked, via="local", also_sees=(), tokens={"total": 3},
                   full_history_tokens=9, extra={"digest": {"version": 1, "path": "fresh", "tokens": 12}})
    )  # fmt: skip
    add_fact(store, scope, NewFact(text=f"{tag} fact", kind="other", key=f"{tag}.key"))
    add_vault_item(store, scope, "note", f"{tag} note body", title=tag)
    add_task(store, scope, f"{tag} task")
    add_reminder(store, scope, f"{tag} reminder", due=1000.0, chat=f"chat-{tag}")
    event = emit_event(store, scope, "tasks", "task.created", {"task_id": 1, "title": f"{tag} task"})
    advance_cursor(store, scope, "general", event.id)
    acquire_claim(store, scope, f"job:{tag}", "worker-1", note="busy", ttl=60)
    posted = post_to_channel(store, scope, "team", "tasks", f"{tag} channel note")
    react_to_channel_message(store, scope, posted.id, "general", "agree")
    advance_channel_cursor(store, scope, "general", posted.id)
    feedback = record_feedback(store, scope, "general", reply_id=None, source="command", signal="negative", text=f"{tag} was wrong", key=f"{tag}-fb")
    add_lesson(store, scope, "general", f"{tag} lesson", kind="failure", topic="dates", feedback_id=feedback.id)
    for i in range(TRAIT_EVIDENCE - 1):  # enough failures on one topic to make a trait
        add_lesson(store, scope, "general", f"{tag} lesson {i}", kind="failure", topic="dates")
    add_goal(store, scope, "general", f"{tag} goal")
    add_plan(store, scope, "general", f"{tag} plan")
    save_digest(store, scope, [DigestLine(f"{tag} digest line", (asked,), 1.0)], upto_id=asked, covered=1, kind="full", mode="extractive")
    save_reflection(store, scope, message_upto=asked, event_upto=event.id, now=5.0)
    add_knowledge(store, scope, f"{tag} knows", importance=0.5, messages=[asked], ts=5.0)
    update_chat_settings(store, scope, timezone="Europe/Berlin", language=tag, now=5.0)
    record_rejected_update(store, update_id=7, scope=scope, reason="TypeError: unreadable", body=f"{tag} update", now=5.0)


def test_erase_empties_every_table_of_the_scope_and_only_that_scope(store):
    fill(store, A, "ann")
    fill(store, B, "grp")
    before_b = rows_of(store, B)
    # Every table group is covered by fill(): each scoped table (except the kept counters) has rows.
    assert set(before_b) >= set(scoped_tables(store)) - {"scope_counters", "search_scopes"} - {
        t for t in scoped_tables(store) if t.startswith("search")
    }
    removed = store.erase(A)
    assert removed["events"] == 1 and removed["channel_messages"] == 1 and removed["lessons"] == TRAIT_EVIDENCE
    left = rows_of(store, A)
    assert set(left) <= {"scope_counters"}  # numbers are never given twice, so the counters stay
    assert rows_of(store, B) == before_b
    assert add_task(store, A, "after forget").id == 2  # not #1 again


def test_events_cursors_are_per_scope_and_never_go_back(store):
    first = emit_event(store, A, "tasks", "task.created", {"task_id": 1, "title": "milk"})
    emit_event(store, B, "tasks", "task.created", {"task_id": 1, "title": "other scope"})
    aimed = emit_event(store, A, "inbox", "task.created", {"task_id": 2, "title": "for notes"}, target="notes")
    third = emit_event(store, A, "tasks", "task.done", {"task_id": 1, "title": "milk"})
    assert [e.id for e in events_after(store, A, 0)] == [first.id, aimed.id, third.id]
    assert [e.id for e in events_after(store, A, first.id, types=["task.*"])] == [aimed.id, third.id]
    assert [e.id for e in events_after(store, A, 0, agent="inbox")] == [aimed.id]
    assert [e.payload["title"] for e in latest_events(store, A, limit=5)] == ["milk", "milk"]  # broadcasts only
    assert [e.id for e in latest_events(store, A, for_agent="notes", agents=["inbox", "tasks"])] == [first.id, aimed.id, third.id]
    assert [e.id for e in latest_events(store, A, types=["task.done"])] == [third.id]
    assert [e.id for e in unconsumed_events(store, A, "notes", interests=["task.done"])] == [aimed.id, third.id]
    assert [e.id for e in unconsumed_events(store, A, "general", interests=["task.*"])] == [first.id, third.id]
    assert advance_cursor(store, A, "notes", aimed.id) == aimed.id
    assert advance_cursor(store, A, "notes", first.id) == aimed.id  # never back
    assert advance_cursor(store, A, "notes", 10**9) == third.id  # never past the newest
    assert cursor_of(store, B, "notes") == 0 and unconsumed_events(store, A, "notes", interests=["task.*"]) == []
    assert [e.id for e in recent_events(store, A, limit=2)] == [aimed.id, third.id]


def test_claims_are_exclusive_until_released_or_expired(store):
    assert acquire_claim(store, A, "digest", "w1", note="compacting", ttl=30, now=100.0).holder == "w1"
    assert acquire_claim(store, A, "digest", "w2", note="me too", ttl=30, now=110.0) is None
    assert acquire_claim(store, B, "digest", "w2", note="other scope", ttl=30, now=110.0).holder == "w2"
    assert renew_claim(store, A, "digest", "w1", ttl=30, now=120.0) and not renew_claim(store, A, "digest", "w2", ttl=30, now=120.0)
    assert get_claim(store, A, "digest", now=140.0).holder == "w1"  # renewed to 150
    assert [c.key for c in expired_claims(store, prefix="dig", now=151.0)] == ["digest", "digest"]
    assert acquire_claim(store, A, "digest", "w2", note="took over", ttl=30, now=151.0).holder == "w2"  # expired: taken
    assert not release_claim(store, A, "digest", "w1") and release_claim(store, A, "digest", "w2")
    assert [c.holder for c in active_claims(store, B, now=120.0)] == ["w2"]
    assert drop_expired_claim(store, B, "digest", now=200.0) and get_claim(store, B, "digest", now=120.0) is None


def test_channels_threads_reactions_pins_and_cursors(store):
    first = post_to_channel(store, A, "team", "tasks", "who takes the invoice?", now=1.0)
    reply = post_to_channel(store, A, "team", "inbox", "I do", reply_to=first.id, now=2.0)
    post_to_channel(store, B, "team", "tasks", "other scope", now=3.0)
    with pytest.raises(InvalidRecord):
        post_to_channel(store, A, "other", "tasks", "wrong channel", reply_to=first.id)
    react_to_channel_message(store, A, first.id, "notes", "agree")
    shown = react_to_channel_message(store, A, first.id, "notes", "agree")  # twice counts once
    assert shown.reactions == {"agree": 1}
    assert react_to_channel_message(store, B, first.id, "notes", "agree") is None
    assert pin_channel_message(store, A, first.id).pinned
    assert [m.text for m in read_channel(store, A, "team")] == ["who takes the invoice?", "I do"]
    assert [m.id for m in read_channel(store, A, "team", thread=first.id)] == [first.id, reply.id]
    assert [m.id for m in unseen_channel_messages(store, A, "tasks", ["team"])] == [reply.id]  # not its own
    assert advance_channel_cursor(store, A, "tasks", 10**9) == reply.id and unseen_channel_messages(store, A, "tasks", ["team"]) == []
    assert channel_stats(store, A)["team"]["messages"] == 2 and channel_stats(store, A)["team"]["pinned"] == 1
    for i in range(CHANNEL_LIMIT + 5):
        post_to_channel(store, A, "team", "tasks", f"note {i}", now=10.0 + i)
    kept = read_channel(store, A, "team", limit=1000)
    assert len(kept) == CHANNEL_LIMIT and kept[0].id == first.id  # the pin survives pruning
    assert [m.text for m in read_channel(store, B, "team")] == ["other scope"]


def test_agent_memory_lessons_traits_goals_plans_feedback(store):
    for i in range(3):
        add_lesson(store, A, "tasks", f"dates: check the year {i}", kind="failure", topic="Dates", importance="high")
    again = add_lesson(store, A, "tasks", "dates: check the year 0", kind="failure", topic="dates")
    assert again.seen == 2 and again.importance == "high"
    assert [t.kind for t in traits_of(store, A, "tasks")] == ["weakness"] and traits_of(store, B, "tasks") == []
    assert len(lessons_of(store, A, "tasks")) == 3 and lessons_of(store, A, "notes") == []
    goal = add_goal(store, A, "tasks", "answer faster")
    assert update_goal(store, A, "tasks", goal.id, progress=40).progress == 40
    assert update_goal(store, B, "tasks", goal.id, progress=90) is None
    plan = add_plan(store, A, "tasks", "ask for dates first")
    assert update_plan(store, A, "tasks", plan.id, status="done").status == "done"
    assert [g.text for g in goals_of(store, A, "tasks")] == ["answer faster"] and plans_of(store, A, "tasks") == []
    fb = record_feedback(store, A, "tasks", reply_id=None, source="reaction", signal="negative", text="👎", key="r-1")
    assert record_feedback(store, A, "tasks", reply_id=None, source="reaction", signal="negative", text="👎", key="r-1") is None
    assert [f.id for f in pending_feedback(store, A)] == [fb.id]
    add_lesson(store, A, "tasks", "say less", kind="improvement", feedback_id=fb.id)
    assert pending_feedback(store, A) == [] and get_feedback(store, A, fb.id).status == "learnt"
    memory = agent_memory(store, A, "tasks")
    assert memory.goals and memory.lessons


def test_digest_versions_usage_reflection_and_knowledge(store):
    mid = say(store, A, "we moved to Pune")
    first = save_digest(store, A, [DigestLine("moved to Pune", (mid,), 1.0)], upto_id=mid, covered=1, kind="full", mode="extractive",
                        usage={"model_calls": 1, "prompt_tokens": 10})  # fmt: skip
    assert first.version == 1 and get_digest(store, B) is None
    assert save_digest(store, A, [], upto_id=mid, covered=1, kind="incremental", mode="extractive", expect_version=0) is None
    second = save_digest(store, A, [], upto_id=mid, covered=1, kind="incremental", mode="extractive", expect_version=1)
    assert second.version == 2 and second.stats["model_calls"] == 1
    record_digest_failure(store, A, "model timed out", retry_after=60)
    assert get_digest(store, A).stats["failed"] == 1
    for path, tokens in (("fresh", 12), ("fresh", 8), ("stale", 5)):
        store.record_call(CallRecord(scope=A, agent="general", message_id=mid, via="local", also_sees=(), tokens={"total": 1},
                                     full_history_tokens=1, extra={"digest": {"version": 2, "path": path, "tokens": tokens}}))  # fmt: skip
    usage = digest_usage(store, A)
    assert (usage["calls"], usage["tokens"], usage["paths"]["fresh"], usage["paths"]["stale"]) == (3, 25, 2, 1)
    assert last_served_digest(store, A) == 2 and last_served_digest(store, B) is None
    assert messages_after(store, A, 0) == 1
    save_reflection(store, A, message_upto=mid, event_upto=4, now=10.0)
    assert save_reflection(store, A, message_upto=0, event_upto=1, now=11.0).event_upto == 4  # never back
    add_knowledge(store, A, "Ann lives in Pune", importance=0.8, messages=[mid], ts=10.0)
    assert [k.text for k in list_knowledge(store, A)] == ["Ann lives in Pune"] and list_knowledge(store, B) == []


def test_reminder_delivery_state_and_task_numbers(store):
    one = add_reminder(store, A, "pay rent", due=100.0, chat="42", every_seconds=3600)
    add_task(store, B, "b1")
    assert [add_task(store, A, t).id for t in ("a1", "a2")] == [1, 2]  # per-scope numbers
    assert note_reminder_failure(store, A, one.id, retry_at=160.0) == 1
    assert pause_chat_reminders(store, "42", now=170.0) == 1 and due_reminders(store, 10_000.0) == []
    assert resume_chat_reminders(store, "42") == 1 and [r.id for r in due_reminders(store, 10_000.0)] == [one.id]
    sent = mark_reminder_sent(store, A, one.id, now=7300.0)
    assert (sent.due, sent.failures, sent.active) == (10_900.0, 0, True)
    assert [r.text for r in pending_reminders(store)] == ["pay rent"]
    assert edit_task(store, A, 2, title="a2!", due=None, done=True).done and [t.title for t in list_tasks(store, A)] == ["a1"]
    assert cancel_reminder(store, A, one.id).active is False


def test_move_scope_renumbers_and_keeps_the_new_scopes_rows(store):
    old, new = "group:-1", "group:-1001"
    say(store, old, "before the upgrade", ext_id="m1")
    say(store, old, "clashing", ext_id="same")
    add_task(store, old, "old task")
    add_reminder(store, old, "old reminder", due=100.0, chat="-1")
    emit_event(store, old, "tasks", "task.created", {"task_id": 1, "title": "old task"})
    say(store, new, "first in the supergroup", ext_id="same")
    add_task(store, new, "new task")
    moved = store.move_scope(old, new, old_chat="-1", new_chat="-1001")
    assert moved["messages"] == 1 and moved["tasks"] == 1 and moved["events"] == 1
    assert rows_of(store, old) == {} and old not in store.scopes()
    assert [m.text for m in store.window(new, 10)] == ["before the upgrade", "first in the supergroup"]
    assert [(t.id, t.title) for t in list_tasks(store, new)] == [(1, "new task"), (2, "old task")]
    assert add_task(store, new, "next").id == 3
    assert [r.chat for r in list_reminders(store, new)] == ["-1001"]
    assert store.move_scope(old, new) == {}  # nothing left to move


def test_edit_text_and_usage_overheads(store):
    mid = say(store, A, "meet at 5")
    assert store.edit_text(A, mid, "meet at 6") and not store.edit_text(B, mid, "x")
    assert store.get(A, mid).text == "meet at 6"
    store.record_call(CallRecord(scope=A, agent="router", message_id=mid, via="router", also_sees=(), tokens={},
                                 full_history_tokens=0, prompt_tokens=7, completion_tokens=3))  # fmt: skip
    store.record_call(CallRecord(scope=A, agent="general", message_id=mid, via="local", also_sees=(), tokens={"total": 5},
                                 full_history_tokens=9, prompt_tokens=50, completion_tokens=5, cost=None))  # fmt: skip
    usage = store.usage(A)
    assert (usage.router_calls, usage.router_tokens, usage.agent_calls, usage.calls_cost_unknown) == (1, 10, 1, 1)
    assert not store.is_answered(mid)
    store.append(NewMessage(scope=A, role="agent", text="ok", reply_to=mid, agent="general"))
    assert store.is_answered(mid)


def test_a_batch_of_reads_gives_each_query_its_own_rows_in_order(store):
    # PostgreSQL sends the batch as one query text with the values quoted client-side:
    # each statement must still get its own rows, a value with quotes and a semicolon
    # stays a value, and no statement reads another scope's rows.
    hostile = "it's; DROP TABLE messages; --"
    say(store, A, "buy milk")
    say(store, A, hostile)
    say(store, B, "group chatter")
    rows = store.query_batch(
        [
            ("SELECT text FROM messages WHERE scope = ? ORDER BY id", (A,)),
            ("SELECT count(*) FROM messages WHERE text = ?", (hostile,)),
            ("SELECT text FROM messages WHERE scope = ? AND text = ?", (B, "buy milk")),
            ("SELECT text FROM messages WHERE scope = ?", (B,)),
        ]
    )
    assert [[tuple(row) for row in part] for part in rows] == [[("buy milk",), (hostile,)], [(1,)], [], [("group chatter",)]]
    assert store.count_messages() == 3  # the quoted value dropped nothing


def test_a_kept_item_is_found_as_its_body_once_and_its_own_title_before_it(store):
    # A note titled by its own first line ("the spare key is under the blue pot") was shown
    # as title and body, the same words twice, and the bot answered with both.
    add_vault_item(store, A, "note", "the spare key is under the blue pot", title="the spare key is under the blue pot")
    add_vault_item(store, A, "note", "a very long first line about the boiler service and the plumber's visit", title="a very long first line about the…")
    add_vault_item(store, A, "note", "door code 1234", title="gate")
    texts = {hit.text for hit in store.search(A, "spare key boiler door", k=10) if hit.kind == "vault"}
    assert texts == {
        "the spare key is under the blue pot",
        "a very long first line about the boiler service and the plumber's visit",
        "gate\ndoor code 1234",
    }


def test_the_reminders_due_in_one_scope_are_that_scopes_only(store):
    # After an answer the worker schedules what that scope has due (not every scope's).
    mine = add_reminder(store, A, "call mom", due=1000.0, chat="1")
    theirs = add_reminder(store, B, "group call", due=900.0, chat="-100")
    add_reminder(store, A, "later", due=5000.0, chat="1")
    assert [(r.scope, r.id) for r in due_reminders(store, 2000.0, scope=A)] == [(A, mine.id)]
    assert [(r.scope, r.id) for r in due_reminders(store, 2000.0)] == [(B, theirs.id), (A, mine.id)]


def test_an_awareness_block_reads_in_one_batch_what_each_read_gives_alone(store):
    """The awareness block's batched reads (memory.awareness_reads) are the rows the reads it
    replaces give one by one: cursors, interests, collaborators, claims, unseen and pinned
    channel messages with their reactions; another agent's or another scope's never."""
    from scopehub.memory import (
        acquire_claim,
        active_claims,
        advance_channel_cursor,
        advance_cursor,
        awareness_reads,
        cursor_of,
        latest_events,
        pin_channel_message,
        pinned_channel_messages,
        post_to_channel,
        react_to_channel_message,
        unseen_channel_messages,
    )

    now = 1_800_000_000.0
    first = emit_event(store, A, "tasks", "task.created", {"task_id": 1, "title": "milk"}, now=now)
    emit_event(store, A, "tasks", "task.created", {"task_id": 2, "title": "for inbox"}, target="inbox", now=now + 1)
    emit_event(store, A, "tasks", "task.created", {"task_id": 3, "title": "for calendar"}, target="calendar", now=now + 2)
    emit_event(store, A, "calendar", "task.created", {"task_id": 4, "title": "bread"}, now=now + 3)
    emit_event(store, B, "tasks", "task.created", {"task_id": 5, "title": "other scope"}, now=now + 4)
    advance_cursor(store, A, "inbox", first.id)
    seen = post_to_channel(store, A, "team", "tasks", "seen already", now=now)
    advance_channel_cursor(store, A, "inbox", seen.id)
    news = post_to_channel(store, A, "team", "calendar", "news; with 'quotes'", now=now + 5)
    post_to_channel(store, A, "team", "inbox", "my own", now=now + 6)
    pin_channel_message(store, A, seen.id)
    react_to_channel_message(store, A, news.id, "tasks", "agree", now=now + 7)
    acquire_claim(store, A, "answer:7", "someone", note="answering", ttl=60.0, now=now)
    interests, collaborators, channels = ["task.*"], ["tasks", "calendar"], ["team"]

    read = awareness_reads(
        store, A, "inbox", interests=interests, interesting=20, collaborators=collaborators, collaborator_events=3,
        channels=channels, unseen=10, pins=20, now=now + 10,
    )  # fmt: skip
    assert read.cursor == cursor_of(store, A, "inbox") == first.id
    assert read.interesting == latest_events(store, A, types=interests, limit=20, for_agent="inbox")
    assert [e.payload["task_id"] for e in read.interesting] == [1, 2, 4]
    assert read.collaborators == latest_events(store, A, agents=collaborators, limit=3, for_agent="inbox")
    assert read.claims == active_claims(store, A, now=now + 10)
    assert read.unseen == unseen_channel_messages(store, A, "inbox", channels, limit=10, newest=True)
    assert [(m.text, m.reactions) for m in read.unseen] == [("news; with 'quotes'", {"agree": 1})]
    assert read.pinned == pinned_channel_messages(store, A, channels, not_by="inbox", limit=20)
    assert [m.text for m in read.pinned] == ["seen already"]
    nothing = awareness_reads(
        store, B, "inbox", interests=[], interesting=20, collaborators=[], collaborator_events=3,
        channels=[], unseen=10, pins=20, now=now + 10,
    )  # fmt: skip
    assert (nothing.cursor, nothing.interesting, nothing.collaborators, nothing.claims, nothing.unseen, nothing.pinned) == (
        0, [], [], [], [], []
    )  # fmt: skip


def test_the_digest_read_with_its_counts_in_one_batch_is_what_each_read_gives_alone(store):
    """memory.read_digest (a call's digest section, the compaction check) gives the digest,
    the messages after it (below a message) and the version last served, as get_digest,
    messages_after and last_served_digest do one by one; another scope's never count."""
    from scopehub.memory import CallRecord, last_served_digest, messages_after, read_digest

    assert read_digest(store, A) == read_digest(store, A, served=True)
    none = read_digest(store, A, served=True)
    assert (none.digest, none.after, none.served) == (None, 0, None)
    ids = [store.append(NewMessage(scope=A, role="user", text=f"message {n}")).id for n in range(6)]
    store.append(NewMessage(scope=B, role="user", text="other scope"))
    assert read_digest(store, A).after == messages_after(store, A, 0) == 6
    made = save_digest(store, A, [DigestLine("moved to Pune", (ids[1],), 1.0)], upto_id=ids[1], covered=2, kind="full", mode="extractive")
    store.record_call(
        CallRecord(scope=A, agent="general", message_id=ids[4], via="local", also_sees=(), tokens={}, full_history_tokens=1,
                   extra={"digest": {"version": made.version, "path": "full"}})
    )  # fmt: skip
    read = read_digest(store, A, before_id=ids[4], served=True)
    assert read.digest == get_digest(store, A)
    assert read.after == messages_after(store, A, ids[1], before_id=ids[4]) == 2
    assert read.served == last_served_digest(store, A) == made.version
    assert read_digest(store, A).after == messages_after(store, A, ids[1]) == 4
    assert read_digest(store, B, served=True) == read_digest(store, B)  # nothing served there


def test_an_agents_research_is_read_newest_first_in_one_query(store, monkeypatch):
    """What an agent's requests found, as its calls show it: its own, of its scope only,
    newest first, at most ``limit``; one query (it was one per item, on every agent call)."""
    asked, other = say(store, "user:1", "what did I plan?"), say(store, "user:2", "and I?")
    for n in range(4):
        add_knowledge(store, "user:1", f"tasks found {n}", importance=0.5, messages=[asked], ts=10.0 + n, agent="tasks")
    add_knowledge(store, "user:1", "notes found", importance=0.5, messages=[asked], ts=20.0, agent="notes")
    add_knowledge(store, "user:2", "another scope's", importance=0.5, messages=[other], ts=30.0, agent="tasks")
    queries = []
    query = store.query
    monkeypatch.setattr(store, "query", lambda *args, **kw: queries.append(args[0]) or query(*args, **kw))
    found = research_of(store, "user:1", "tasks", limit=3)
    assert [k.text for k in found] == ["tasks found 3", "tasks found 2", "tasks found 1"]
    assert all(k.agent == "tasks" and k.scope == "user:1" for k in found)
    assert len(queries) == 1
