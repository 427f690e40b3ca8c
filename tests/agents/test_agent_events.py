"""The agents record what they did as events, in the same transaction as the row, and
declare which events they emit, which they want to hear of, and whom they work with."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel, ValidationError

from scopehub import memory
from scopehub.agents import AgentRegistry, AgentSpec, ToolContext, discover_agents, tool
from scopehub.agents import _spec as spec_module
from scopehub.agents.inbox import draft_reply, keep_email
from scopehub.agents.notes import save_note
from scopehub.agents.reminders import cancel_reminder, record_delivery, set_reminder
from scopehub.agents.tasks import add_task, complete_task
from tests.agents.helpers import NOW, call, make_ctx

EMAIL = """From: Ram Kumar <ram@example.com>
Subject: Quarterly report
Date: Mon, 29 Apr 2024 09:00:00 +0000

Hi,

Please send me the figures by Friday. The board meets on May 7.

Thanks,
Ram
"""


def events(store: memory.Store, scope: str = "user:1") -> list[memory.Event]:
    return memory.events_after(store, scope, 0)


def test_adding_a_task_records_task_created_caused_by_the_message(store):
    message_id = store.append(memory.NewMessage(scope="user:1", role="user", text="add pay rent, due friday")).id
    call(add_task, make_ctx(store, message_id=message_id), title="Pay rent", due="friday")
    (event,) = events(store)
    assert (event.type, event.agent, event.target, event.message_id) == ("task.created", "tasks", None, message_id)
    assert event.payload == {"task_id": 1, "number": 1, "title": "Pay rent", "due": "2024-05-03"}
    assert event.summary() == 'task #1 added: "Pay rent" (due Fri 2024-05-03)'


def test_completing_a_task_records_task_done_once(store):
    ctx = make_ctx(store)
    call(add_task, ctx, title="Pay rent")
    call(complete_task, ctx, id=1)
    call(complete_task, ctx, id=1)  # already done: nothing new happened
    call(complete_task, ctx, id=99)  # no such task
    assert [e.type for e in events(store)] == ["task.created", "task.done"]
    assert events(store)[-1].payload == {"task_id": 1, "number": 1, "title": "Pay rent"}


def test_keeping_an_email_records_sender_subject_and_the_deadline_found(store):
    call(keep_email, make_ctx(store), text=EMAIL)
    (event,) = events(store)
    assert event.type == "email.received" and event.agent == "inbox"
    assert event.payload["sender"] == "Ram Kumar <ram@example.com>"
    assert event.payload["subject"] == "Quarterly report"
    assert event.payload["dates"] == [
        {"text": "Friday", "day": "2024-05-03", "deadline": True},  # "by Friday"
        {"text": "May 7", "day": "2024-05-07", "deadline": False},  # "meets on May 7"
    ]
    assert event.summary() == (
        'email #1 from Ram Kumar <ram@example.com> "Quarterly report", deadline Fri 2024-05-03, Tue 2024-05-07'
    )


def test_notes_drafts_and_reminders_record_their_events(store):
    ctx = make_ctx(store, tz="Europe/Berlin")
    call(save_note, ctx, text="wifi password is sunflower42\nin the kitchen")
    call(keep_email, ctx, text=EMAIL)
    call(draft_reply, ctx, email_id=1, body="Will do.")  # email #1: numbered among emails
    call(set_reminder, ctx, text="call mom", when="18:00")
    call(cancel_reminder, ctx, id=1)
    call(cancel_reminder, ctx, id=1)  # no longer active: nothing happens, nothing recorded
    recorded = events(store)
    assert [(e.type, e.agent) for e in recorded] == [
        ("note.saved", "notes"),
        ("email.received", "inbox"),
        ("draft.saved", "inbox"),
        ("reminder.set", "reminders"),
        ("reminder.cancelled", "reminders"),
    ]
    assert recorded[0].payload == {"note_id": 1, "title": "wifi password is sunflower42"}
    assert recorded[2].payload == {
        "draft_id": 1, "to": "Ram Kumar <ram@example.com>", "subject": "Re: Quarterly report", "reply_to": 1,
    }  # fmt: skip  (the first draft is draft #1, answering email #1, whatever note came before)
    # The reminder's time is kept in the person's zone, and shown as they would say it.
    assert recorded[3].payload["due"] == "2024-05-01T18:00:00+02:00"
    assert recorded[3].summary() == 'reminder #1 set for Wed 2024-05-01 18:00: "call mom"'
    assert recorded[4].payload == {"reminder_id": 1, "text": "call mom"}


def test_a_delivered_reminder_is_marked_sent_and_recorded_together(store):
    call(set_reminder, make_ctx(store), text="call mom", when="in 10 minutes")
    updated = record_delivery(store, "user:1", 1, NOW + 600)
    assert updated is not None and not updated.active
    fired = events(store)[-1]
    assert (fired.type, fired.agent, fired.payload) == ("reminder.fired", "reminders", {"reminder_id": 1, "text": "call mom"})
    assert record_delivery(store, "user:1", 42, NOW + 600) is None and len(events(store)) == 2


def test_a_tool_that_fails_records_nothing(store):
    ctx = make_ctx(store)
    with pytest.raises(ValueError, match="already past"):
        call(set_reminder, ctx, text="call mom", when="2020-01-01 09:00")
    with pytest.raises(ValueError, match="cannot read due date"):
        call(add_task, ctx, title="Pay rent", due="someday maybe")
    assert events(store) == [] and memory.list_tasks(store, "user:1") == []


def test_when_the_event_cannot_be_written_the_row_is_not_kept_either(store, monkeypatch):
    def broken(*args, **kwargs):
        raise memory.InvalidEvent("event task.created: field 'title' is required")

    monkeypatch.setattr(spec_module, "emit_event", broken)
    ctx = make_ctx(store)
    with pytest.raises(memory.InvalidEvent):
        call(add_task, ctx, title="Pay rent")
    with pytest.raises(memory.InvalidEvent):
        call(keep_email, ctx, text=EMAIL)
    with pytest.raises(memory.InvalidEvent):
        call(set_reminder, ctx, text="call mom", when="18:00")
    assert memory.list_tasks(store, "user:1") == []
    assert memory.list_vault_items(store, "user:1") == []
    assert memory.list_reminders(store, "user:1") == []


class AddArgs(BaseModel):
    title: str


@tool
def careless_add(ctx: ToolContext, args: AddArgs) -> str:
    """Add a task and describe it badly."""
    with ctx.transaction():
        task = memory.add_task(ctx.store, ctx.scope, args.title)
        ctx.emit("task.created", {"task_id": task.id})
    return "added"


def test_an_invalid_event_reaches_the_model_intact_and_undoes_the_tools_row(store):
    ctx = dataclasses.replace(make_ctx(store), agent="planner")
    with pytest.raises(memory.InvalidEvent) as caught:
        call(careless_add, ctx, title="Pay rent")
    # The runtime hands str(exc) to the model: it must say which field, on one short line.
    assert str(caught.value) == "event task.created: field 'title' is required"
    assert memory.list_tasks(store, "user:1") == [] and events(store) == []


def test_a_plugin_tool_emits_as_the_agent_the_runtime_names(store):
    @tool
    def good_add(ctx: ToolContext, args: AddArgs) -> str:
        """Add a task."""
        with ctx.transaction():
            task = memory.add_task(ctx.store, ctx.scope, args.title)
            ctx.emit("task.created", {"task_id": task.id, "title": task.title}, target="inbox")
        return "added"

    call(good_add, dataclasses.replace(make_ctx(store), agent="planner"), title="Pay rent")
    (event,) = events(store)
    assert (event.agent, event.target) == ("planner", "inbox")
    with pytest.raises(memory.InvalidEvent, match="no emitting agent"):
        call(good_add, make_ctx(store), title="Water plants")  # nobody said who acts
    assert [t.title for t in memory.list_tasks(store, "user:1")] == ["Pay rent"]


# -- declarations -------------------------------------------------------------------------------


def test_the_agents_declare_registered_types_and_known_collaborators():
    registry = discover_agents()
    assert registry.check_coordination() == []
    tasks, inbox = registry["tasks"], registry["inbox"]
    assert set(tasks.emits) == {"task.created", "task.done"}
    assert "email.received" in tasks.interests and "reminder.*" in tasks.interests
    assert "tasks" in inbox.collaborators and "email.received" in inbox.emits
    for spec in registry:
        assert spec.name not in spec.collaborators


def test_every_event_a_tool_records_is_one_its_agent_declares(store):
    registry = discover_agents()
    ctx = make_ctx(store)
    call(add_task, ctx, title="Pay rent")
    call(complete_task, ctx, id=1)
    call(save_note, ctx, text="gate code 4711")
    call(keep_email, ctx, text=EMAIL)
    call(draft_reply, ctx, email_id=1, body="ok")
    call(set_reminder, ctx, text="call mom", when="18:00")
    call(cancel_reminder, ctx, id=1)
    for event in events(store):
        assert event.type in registry[event.agent].emits, (event.agent, event.type)


def test_what_the_inbox_records_reaches_the_tasks_agent_and_not_the_notes_agent(store):
    registry = discover_agents()
    call(keep_email, make_ctx(store), text=EMAIL)
    shown = memory.unconsumed_events(store, "user:1", "tasks", interests=registry["tasks"].interests)
    assert [e.type for e in shown] == ["email.received"]
    assert memory.unconsumed_events(store, "user:1", "notes", interests=registry["notes"].interests) == []


def test_event_names_are_checked_for_form_at_once_and_against_the_registry_later():
    with pytest.raises(ValidationError, match="not an event type name"):
        AgentSpec(name="weather", description="d", instructions="i", emits=("Weather Changed",))
    with pytest.raises(ValidationError, match="not an agent name"):
        AgentSpec(name="weather", description="d", instructions="i", collaborators=("Bad Name",))
    # A plugin may name its own type before its module registers it.
    spec = AgentSpec(
        name="weather",
        description="d",
        instructions="i",
        emits=("forecast.issued",),
        interests=("storm.*", "task.created"),
        collaborators=("tasks", "nobody"),
    )
    registry = AgentRegistry()
    registry.add(spec, "test")
    assert registry.check_coordination() == [
        "weather: emits unknown event type 'forecast.issued'",
        "weather: interest 'storm.*' matches no registered event type",
        "weather: collaborator 'tasks' is not a loaded agent",
        "weather: collaborator 'nobody' is not a loaded agent",
    ]

    class ForecastIssued(memory.EventPayload):
        region: str

    memory.register_event_type("forecast.issued", ForecastIssued, description="a forecast was issued")
    assert spec.check_event_types() == ["weather: interest 'storm.*' matches no registered event type"]
