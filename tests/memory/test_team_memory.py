"""Talk channels and each agent's own memory in the store: pruning rules (seed 000),
threads and reactions, cursors, and scope isolation."""

from __future__ import annotations

import pytest

from scopehub.memory import (
    ACTIVE_PLANS,
    CHANNEL_LIMIT,
    LESSON_LIMIT,
    MAX_PINS,
    AlreadyDone,
    InvalidRecord,
    Store,
    add_goal,
    add_lesson,
    add_plan,
    advance_channel_cursor,
    channel_cursor_of,
    get_feedback,
    goals_of,
    lessons_of,
    pin_channel_message,
    plans_of,
    post_to_channel,
    react_to_channel_message,
    read_channel,
    record_feedback,
    traits_of,
    unseen_channel_messages,
    update_goal,
    update_plan,
)

U1, U2 = "user:1", "group:2"


@pytest.fixture
def store():
    with Store(":memory:") as s:
        yield s


def test_a_channel_is_pruned_to_its_limit_and_the_pins_survive(store) -> None:
    first = post_to_channel(store, U1, "team", "general", "PINNED: the person is vegetarian", now=0)
    pin_channel_message(store, U1, first.id)
    old = post_to_channel(store, U1, "team", "tasks", "an old note", now=1)
    react_to_channel_message(store, U1, old.id, "general", "agree")
    for i in range(CHANNEL_LIMIT + 20):
        post_to_channel(store, U1, "team", "tasks", f"note {i}", now=2 + i)
    kept = read_channel(store, U1, "team", limit=1000)
    assert len(kept) == CHANNEL_LIMIT
    assert kept[0].text == "PINNED: the person is vegetarian" and kept[0].pinned  # older than everything, kept
    assert "an old note" not in {m.text for m in kept} and kept[-1].text == f"note {CHANNEL_LIMIT + 19}"
    assert store.query("SELECT count(*) FROM channel_reactions WHERE message_id = ?", (old.id,))[0][0] == 0
    # Pins are bounded, so they can never crowd out what was just said.
    for message in kept[1:MAX_PINS]:
        pin_channel_message(store, U1, message.id)
    with pytest.raises(InvalidRecord, match="unpin one first"):
        pin_channel_message(store, U1, kept[-1].id)
    post_to_channel(store, U1, "team", "tasks", "newest")
    assert read_channel(store, U1, "team", limit=1000)[-1].text == "newest"


def test_pruning_keeps_high_importance_lessons_over_newer_low_ones(store) -> None:
    for i in range(5):
        add_lesson(store, U1, "tasks", f"HIGH {i}", kind="failure", importance="high", now=i)
    for i in range(LESSON_LIMIT):
        add_lesson(store, U1, "tasks", f"low {i}", kind="observation", importance="low", now=100 + i)
    add_lesson(store, U1, "tasks", "MEDIUM newest", kind="improvement", importance="medium", now=1000)
    kept = lessons_of(store, U1, "tasks")
    assert len(kept) == LESSON_LIMIT
    texts = [x.text for x in kept]
    assert texts[:5] == ["HIGH 4", "HIGH 3", "HIGH 2", "HIGH 1", "HIGH 0"]  # high first, newest first within
    assert texts[5] == "MEDIUM newest"
    assert "low 0" not in texts and f"low {LESSON_LIMIT - 1}" in texts  # the oldest low ones went
    assert sum(t.startswith("low") for t in texts) == LESSON_LIMIT - 6


def test_threads_reactions_and_the_channel_cursor(store) -> None:
    root = post_to_channel(store, U1, "team", "general", "who handles the dentist email?")
    answer = post_to_channel(store, U1, "team", "inbox", "I kept it, deadline friday", reply_to=root.id)
    post_to_channel(store, U1, "other", "inbox", "elsewhere")
    with pytest.raises(InvalidRecord, match="no message"):
        post_to_channel(store, U1, "other", "inbox", "wrong thread", reply_to=root.id)
    react_to_channel_message(store, U1, answer.id, "general", "agree")
    react_to_channel_message(store, U1, answer.id, "general", "agree")  # once per agent
    react_to_channel_message(store, U1, answer.id, "tasks", "important")
    thread = read_channel(store, U1, "team", thread=root.id)
    assert [(m.text, m.reply_to) for m in thread] == [(root.text, None), (answer.text, root.id)]
    assert thread[1].reactions == {"agree": 1, "important": 1}
    # The digest: others' messages in the agent's channels, past its cursor, oldest first.
    assert [m.id for m in unseen_channel_messages(store, U1, "general", ["team"])] == [answer.id]
    assert advance_channel_cursor(store, U1, "general", answer.id) == answer.id
    assert unseen_channel_messages(store, U1, "general", ["team"]) == []
    assert advance_channel_cursor(store, U1, "general", 1) == answer.id  # never back
    assert advance_channel_cursor(store, U1, "tasks", 10_000) == answer.id + 1  # never past the newest
    assert channel_cursor_of(store, U2, "general") == 0


def test_goals_and_at_most_ten_active_plans(store) -> None:
    goal = add_goal(store, U1, "general", "learn the person's routines")
    assert update_goal(store, U1, "general", goal.id, progress=40).progress == 40
    assert update_goal(store, U1, "general", goal.id, status="achieved").progress == 100
    assert goals_of(store, U1, "general") == [] and len(goals_of(store, U1, "general", include_closed=True)) == 1
    assert update_goal(store, U1, "tasks", goal.id, progress=10) is None  # another agent's goal
    with pytest.raises(InvalidRecord):
        update_goal(store, U1, "general", goal.id, status="won")
    plans = [add_plan(store, U1, "general", f"plan {i}") for i in range(ACTIVE_PLANS)]
    with pytest.raises(InvalidRecord, match="10 active plans"):
        add_plan(store, U1, "general", "one too many")
    update_plan(store, U1, "general", plans[0].id, status="done")
    add_plan(store, U1, "general", "now it fits")
    with pytest.raises(InvalidRecord, match="10 active plans"):
        update_plan(store, U1, "general", plans[0].id, status="active")
    assert len(plans_of(store, U1, "general")) == ACTIVE_PLANS and plans_of(store, U1, "tasks") == []


def test_nothing_crosses_scopes_or_agents(store) -> None:
    add_lesson(store, U1, "tasks", "scope one lesson", kind="failure")
    post_to_channel(store, U1, "team", "general", "scope one note")
    assert lessons_of(store, U2, "tasks") == [] and lessons_of(store, U1, "notes") == []
    assert read_channel(store, U2, "team") == [] and unseen_channel_messages(store, U2, "tasks", ["team"]) == []
    note = read_channel(store, U1, "team")[0]
    assert react_to_channel_message(store, U2, note.id, "tasks", "agree") is None
    assert pin_channel_message(store, U2, note.id) is None


def test_a_redelivered_feedback_is_recorded_once(store) -> None:
    first = record_feedback(store, U1, "tasks", reply_id=3, source="reaction", signal="negative", text="👎", key="r:1")
    again = record_feedback(store, U1, "tasks", reply_id=3, source="reaction", signal="negative", text="👎", key="r:1")
    assert first is not None and again is None
    assert record_feedback(store, U2, "tasks", reply_id=3, source="reaction", signal="negative", text="👎", key="r:1")


def test_feedback_learnt_by_another_worker_meanwhile_is_not_learnt_twice(store) -> None:
    feedback = record_feedback(store, U1, "tasks", reply_id=3, source="reaction", signal="negative", text="👎", key="r:1")
    first = add_lesson(store, U1, "tasks", "Show the work list.", kind="failure", feedback_id=feedback.id, now=1)
    # A second worker whose claim ran out learns the same feedback: nothing is written.
    with pytest.raises(AlreadyDone):
        add_lesson(store, U1, "tasks", "Show the work list.", kind="failure", feedback_id=feedback.id, now=2)
    with pytest.raises(AlreadyDone):
        add_lesson(store, U1, "tasks", "Another wording of it.", kind="failure", feedback_id=feedback.id, now=2)
    assert [(x.text, x.seen) for x in lessons_of(store, U1, "tasks")] == [("Show the work list.", 1)]
    assert (get_feedback(store, U1, feedback.id).status, get_feedback(store, U1, feedback.id).lesson_id) == ("learnt", first.id)


def test_the_same_lesson_learnt_again_counts_once_more_instead_of_repeating(store) -> None:
    add_lesson(store, U1, "tasks", "Show the work list.", kind="failure", importance="low", topic="lists", now=1)
    add_lesson(store, U1, "tasks", "Something else.", kind="observation", now=2)
    again = add_lesson(store, U1, "tasks", "Show the work list.", kind="failure", importance="high", now=3)
    add_lesson(store, U1, "tasks", "Show the work list.", kind="failure", importance="medium", now=4)
    kept = lessons_of(store, U1, "tasks")
    assert [(x.text, x.importance, x.seen, x.ts) for x in kept] == [
        ("Show the work list.", "high", 3, 4.0),  # the higher importance stays; it is the newest
        ("Something else.", "medium", 1, 2.0),
    ]
    assert again.id == kept[0].id and again.seen == 2
    # Repeats count as evidence: three failures on one topic make a weakness.
    assert [(t.kind, t.topic, t.evidence) for t in traits_of(store, U1, "tasks")] == [("weakness", "list", 3)]
