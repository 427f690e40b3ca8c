"""The awareness block on a busy scope, through the hub: what the agent needs now comes first.

Live claims, then the newest news (an urgent email among 150 older events is in the next
call, the rest counted and passed over once), then the channels (unread newest first,
pins on every call): what each agent was sent, and where its cursors stand after.
"""

from __future__ import annotations

import asyncio

from scopehub.agents import discover_agents
from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.context.awareness import AWARENESS_HEADER
from scopehub.hub.models.testing import ScriptedModel
from scopehub.hub.orchestrator import AWARENESS_CONTEXT
from scopehub.memory import (
    Store,
    acquire_claim,
    channel_cursor_of,
    cursor_of,
    emit_event,
    pin_channel_message,
    post_to_channel,
)

NOW = 1_714_550_400.0
SCOPE = "user:1"


def make_hub(tmp_path, model) -> Hub:
    store = Store(tmp_path / "hub.db")
    return Hub(Deps(store=store, settings=load_settings(), model=model, clock=lambda: NOW), discover_agents())


def block_of(call) -> str:
    system = "\n".join(m["content"] for m in call.messages if m["role"] == "system")
    return system.split(AWARENESS_HEADER + "\n", 1)[1].split("\n\n", 1)[0] if AWARENESS_HEADER in system else ""


def note(store, n: int) -> None:
    """An event the general agent is interested in (the notes agent saved a note)."""
    emit_event(store, SCOPE, "notes", "note.saved", {"note_id": n, "title": f"shopping idea number {n}"}, now=NOW - 3600 + n)


def test_on_a_busy_scope_the_newest_urgent_email_is_in_the_next_call(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model)
    for n in range(150):  # a backlog the tasks agent was never shown
        note(hub.store, n)
    urgent = emit_event(
        hub.store,
        SCOPE,
        "inbox",
        "email.received",
        {"email_id": 9, "sender": "boss@example.com", "subject": "URGENT: the server is down", "dates": []},
        now=NOW - 60,
    )
    asyncio.run(hub.handle(Inbound(scope=SCOPE, text="what should I do first?", agent="general")))
    block = block_of(model.calls[-1])
    lines = block.splitlines()
    assert 'email #9 from boss@example.com "URGENT: the server is down"' in lines[0]  # the newest, first
    assert lines[-1].startswith("- … and ") and lines[-1].endswith(" more not shown (/events lists them)")
    listed = len(lines) - 1
    assert int(lines[-1].split()[3]) == 151 - listed  # every one of the others counted
    assert cursor_of(hub.store, SCOPE, "general") == urgent.id  # shown or counted: consumed once
    asyncio.run(hub.handle(Inbound(scope=SCOPE, text="and then?", agent="general")))
    # No news left: only what its collaborators did last (shown on every call, by design).
    again = block_of(model.calls[-1]).splitlines()
    assert "more not shown" not in "\n".join(again) and len(again) <= AWARENESS_CONTEXT


def test_live_claims_come_before_news_and_are_never_cut_for_it(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model)
    for n in range(40):
        note(hub.store, n)
    acquire_claim(hub.store, SCOPE, "reminder:3", "worker-a", note="reminders: sending a reminder: call mom", ttl=600, now=NOW - 30)
    asyncio.run(hub.handle(Inbound(scope=SCOPE, text="anything new?", agent="general")))
    lines = block_of(model.calls[-1]).splitlines()
    assert lines[:2] == ["Working now:", "- reminders: sending a reminder: call mom (since just now)"]
    assert "shopping idea number 39" in lines[2]  # then the newest news


def test_a_pinned_channel_message_stays_visible_on_every_call(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model)
    pin = post_to_channel(hub.store, SCOPE, "team", "general", "The person is vegetarian: never suggest meat.", now=NOW - 7200)
    pin_channel_message(hub.store, SCOPE, pin.id)
    for n in range(30):  # a busy channel after the pin
        post_to_channel(hub.store, SCOPE, "team", "notes", f"filed note {n} about the garden", now=NOW - 3600 + n)
    for text in ("/tasks plan my week", "/tasks and the weekend?", "/tasks thanks"):
        asyncio.run(hub.handle(Inbound(scope=SCOPE, text=text)))
    first, second, third = (block_of(call) for call in model.calls[-3:])
    for block in (first, second, third):
        assert "(pinned): The person is vegetarian: never suggest meat." in block
    # Unread channel news newest first, the rest counted; read once, then only the pin is left.
    assert "filed note 29 about the garden" in first and "filed note 0 about" not in first
    assert "more not shown (the team tool reads them)" in first
    assert "filed note" not in second and "filed note" not in third
    assert channel_cursor_of(hub.store, SCOPE, "tasks") == pin.id + 30
