"""Agents coordinate through the hub: the awareness block, cursors, claims on work in flight.

Uses the five real agents (their tools emit events in the row's transaction) and a
scripted model, and asserts on what each agent was sent and what was stored.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from scopehub.agents import discover_agents
from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.context.awareness import AWARENESS_HEADER, render_awareness
from scopehub.hub.context.tokens import get_tokenizer
from scopehub.hub.models import ModelResponse, ToolCall
from scopehub.hub.models.testing import FunctionModel, ScriptedModel
from scopehub.hub.orchestrator import AWARENESS_HORIZON
from scopehub.memory import (
    Claim,
    Event,
    Store,
    acquire_claim,
    active_claims,
    cursor_of,
    emit_event,
    get_claim,
)

EMAIL = "From: Ram <ram@example.com>\nSubject: Quarterly report\n\nPlease send it by 2024-05-03."


def make_hub(tmp_path, model, **settings) -> Hub:
    store = Store(tmp_path / "hub.db")
    return Hub(Deps(store=store, settings=load_settings(**settings), model=model, clock=lambda: 1_714_550_400.0), discover_agents())


def system_of(call) -> str:
    return "\n".join(m["content"] for m in call.messages if m["role"] == "system")


def keep_email_then_answer():
    """inbox keeps the email (its tool emits email.received), then answers."""
    return [
        ModelResponse(tool_calls=(ToolCall("c1", "keep_email", json.dumps({"text": EMAIL})),)),
        "Kept the email from Ram.",
    ]


def test_an_event_reaches_the_next_call_of_an_interested_agent_and_no_other(tmp_path):
    model = ScriptedModel([*keep_email_then_answer(), "No notes.", "Still none.", "Nothing yet."])
    hub = make_hub(tmp_path, model)

    async def talk():
        await hub.handle(Inbound(scope="user:1", text="/inbox " + EMAIL))
        await hub.handle(Inbound(scope="user:1", text="/notes what notes do I have?"))
        # Two exchanges later the email is out of the last messages every agent sees.
        await hub.handle(Inbound(scope="user:1", text="/notes and now?"))
        await hub.handle(Inbound(scope="user:1", text="/tasks what is on my list?"))

    asyncio.run(talk())
    notes_call, tasks_call = model.calls[2], model.calls[4]
    assert AWARENESS_HEADER in system_of(tasks_call)  # tasks is interested in email.received
    assert "email #1 from Ram <ram@example.com>" in system_of(tasks_call) and "Quarterly report" in system_of(tasks_call)
    assert "Ram" not in system_of(notes_call)  # notes neither collaborates with inbox nor cares about emails
    # The inbox call that produced it was not told about its own event.
    assert AWARENESS_HEADER not in system_of(model.calls[0])
    calls = hub.store.calls("user:1")
    assert calls[3]["agent"] == "tasks"


def test_an_event_the_history_shows_is_not_repeated_but_counts_as_shown(tmp_path):
    model = ScriptedModel([*keep_email_then_answer(), "Nothing yet."])
    hub = make_hub(tmp_path, model)

    async def talk():
        await hub.handle(Inbound(scope="user:1", text="/inbox " + EMAIL))
        await hub.handle(Inbound(scope="user:1", text="/tasks what is on my list?"))

    asyncio.run(talk())
    tasks_call = model.calls[2]
    # The email and the inbox's reply are among the last messages: the tasks agent reads them there.
    assert any("Quarterly report" in m["content"] for m in tasks_call.messages if m["role"] == "user")
    assert AWARENESS_HEADER not in system_of(tasks_call)
    assert cursor_of(hub.store, "user:1", "tasks") == 1  # ...and the event is consumed


def test_an_event_already_shown_comes_back_while_the_talk_names_it(tmp_path):
    replies = ["Nothing yet.", "Hi!", "Hello again!", "Added."]
    model = ScriptedModel([*keep_email_then_answer(), "No notes.", "Still none.", *replies])
    hub = make_hub(tmp_path, model)
    start = hub.deps.clock()
    now = [start]
    hub.deps.clock = lambda: now[0]

    async def talk():
        await hub.handle(Inbound(scope="user:1", text="/inbox " + EMAIL))
        await hub.handle(Inbound(scope="user:1", text="/notes what notes do I have?"))
        await hub.handle(Inbound(scope="user:1", text="/notes and now?"))
        await hub.handle(Inbound(scope="user:1", text="/tasks what is on my list?"))  # shown, consumed
        # Hours later the inbox's event is no longer a collaborator's latest news.
        now[0] = start + AWARENESS_HORIZON + 3600
        await hub.handle(Inbound(scope="user:1", text="/tasks anything due?"))
        await hub.handle(Inbound(scope="user:1", text="/tasks ok thanks"))
        # Addressed to tasks as such (no also_sees: the email stays out of its history).
        await hub.handle(Inbound(scope="user:1", text="add a task to send the quarterly report", agent="tasks"))

    asyncio.run(talk())
    first, plain, named = model.calls[4], model.calls[5], model.calls[7]
    assert "Quarterly report" in system_of(first)
    assert cursor_of(hub.store, "user:1", "tasks") == 1
    assert "Quarterly report" not in system_of(plain)  # consumed: news is shown once
    # The person names the report again: the email is still in the window, not in the
    # tasks agent's history, so its event comes back.
    assert not any("Quarterly report" in m["content"] for m in named.messages if m["role"] != "system")
    assert "email #1 from Ram <ram@example.com>" in system_of(named)


def test_the_cursor_moves_only_after_the_call_is_recorded_and_events_show_once(tmp_path):
    model = ScriptedModel(["Noted.", "Still noted."])
    hub = make_hub(tmp_path, model)
    # notes is no collaborator of tasks: its event reaches tasks only because it targets it.
    event = emit_event(hub.store, "user:1", "notes", "note.saved", {"note_id": 4, "title": "packing list"}, target="tasks", now=hub.deps.clock())
    assert cursor_of(hub.store, "user:1", "tasks") == 0
    asyncio.run(hub.handle(Inbound(scope="user:1", text="/tasks what is on my list?")))
    assert "notes → you" in system_of(model.calls[0]) and "packing list" in system_of(model.calls[0])
    assert cursor_of(hub.store, "user:1", "tasks") == event.id
    asyncio.run(hub.handle(Inbound(scope="user:1", text="/tasks and now?")))
    assert "packing list" not in system_of(model.calls[1])  # consumed: shown once


def test_a_failed_call_does_not_consume_the_events_it_was_shown(tmp_path):
    def flaky(messages, tools):
        if any("Quarterly report" in m["content"] for m in messages if m["role"] == "system") and not flaky.failed:
            flaky.failed = True
            from scopehub.hub.errors import ModelUnavailable

            raise ModelUnavailable("provider down")
        return "ok"

    flaky.failed = False
    hub = make_hub(tmp_path, ScriptedModel([*keep_email_then_answer(), "No notes.", "Still none."]))
    asyncio.run(hub.handle(Inbound(scope="user:1", text="/inbox " + EMAIL)))
    # Two exchanges later the email is out of the last messages: the event is news in a block.
    asyncio.run(hub.handle(Inbound(scope="user:1", text="/notes what notes do I have?")))
    asyncio.run(hub.handle(Inbound(scope="user:1", text="/notes and now?")))
    hub.deps.model = FunctionModel(flaky)
    first = asyncio.run(hub.handle(Inbound(scope="user:1", text="/tasks what is on my list?")))
    assert first.kind == "error" and cursor_of(hub.store, "user:1", "tasks") == 0
    asyncio.run(hub.handle(Inbound(scope="user:1", text="/tasks try again")))
    assert "Quarterly report" in system_of(hub.deps.model.calls[-1])  # shown again, not lost
    assert cursor_of(hub.store, "user:1", "tasks") > 0


def test_events_of_one_scope_never_reach_another(tmp_path):
    model = ScriptedModel([*keep_email_then_answer(), "Nothing."])
    hub = make_hub(tmp_path, model)
    asyncio.run(hub.handle(Inbound(scope="user:1", text="/inbox " + EMAIL)))
    asyncio.run(hub.handle(Inbound(scope="user:2", text="/tasks what is on my list?")))
    assert "Ram" not in system_of(model.calls[-1])


def test_a_message_claimed_by_another_process_is_not_answered_twice(tmp_path):
    model = ScriptedModel(["first answer", "second answer"])
    hub = make_hub(tmp_path, model)
    other = Hub(Deps(store=Store(tmp_path / "hub.db"), settings=hub.settings, model=model, clock=hub.deps.clock), hub.registry)
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow(messages, tools):
        started.set()
        await release.wait()
        return "answered once"

    hub.deps.model = FunctionModel(slow)

    async def race():
        first = asyncio.create_task(hub.handle(Inbound(scope="user:1", text="hello there", ext_id="7")))
        await started.wait()
        # The same delivery reaches a second process while the first is still answering.
        second = await other.handle(Inbound(scope="user:1", text="hello there", ext_id="7"))
        claimed = get_claim(hub.store, "user:1", f"message:{hub.store.find_ext('user:1', '7').id}", now=hub.deps.clock())
        assert claimed is not None and claimed.holder == hub.holder
        release.set()
        return await first, second

    first, second = asyncio.run(race())
    assert first.text == "answered once" and second is None
    replies = [m for m in hub.store.messages("user:1") if m.role == "agent"]
    assert [m.text for m in replies] == ["answered once"]
    assert model.calls == []  # the second process never called its model
    assert active_claims(hub.store, "user:1", now=hub.deps.clock()) == []  # released


def test_a_message_whose_answering_process_died_is_answered_after_its_claim_runs_out(tmp_path):
    clock = [1000.0]
    model = ScriptedModel(["answered after recovery"])
    store = Store(tmp_path / "hub.db")
    hub = Hub(Deps(store=store, settings=load_settings(claim_ttl=30), model=model, clock=lambda: clock[0]), discover_agents())
    from scopehub.memory import NewMessage

    message = store.append(NewMessage(scope="user:1", role="user", text="what is on my list?", ts=clock[0], ext_id="9"))
    assert acquire_claim(store, "user:1", f"message:{message.id}", "dead-process", note="tasks: answering", ttl=30, now=clock[0])
    assert asyncio.run(hub.answer_stalled()) == []  # still claimed: nobody else answers
    clock[0] += 31  # the dead process's claim ran out (the TTL is the only expiry)
    (reply,) = asyncio.run(hub.answer_stalled())
    assert reply.text == "answered after recovery" and reply.message_id == message.id
    assert asyncio.run(hub.answer_stalled()) == []  # answered once


def test_the_awareness_block_keeps_its_budget_shows_the_newest_and_counts_what_it_passes_over():
    tokenizer = get_tokenizer()
    events = [
        Event(id=i, scope="user:1", ts=1000.0 + i, agent="inbox", type="note.saved", payload={"note_id": i, "title": f"note number {i} " * 3})
        for i in range(1, 21)
    ]
    block = render_awareness("tasks", unconsumed=events, older_unconsumed=5, now=2000.0, tokenizer=tokenizer, budget=80)
    assert 0 < tokenizer.count(block.text) <= 80
    shown = [int(line.split("note #", 1)[1].split(" ", 1)[0]) for line in block.text.splitlines() if "note #" in line]
    assert shown == list(range(20, 20 - len(shown), -1))  # the newest first, a contiguous run
    assert block.text.splitlines()[-1] == f"- … and {25 - len(shown)} more not shown (/events lists them)"
    assert (block.consumed_upto, block.passed_over) == (20, 25 - len(shown))  # counted: the cursor passes them
    # No room for a line and the count together: nothing is passed over uncounted.
    tiny = render_awareness("tasks", unconsumed=events, now=2000.0, tokenizer=tokenizer, budget=12)
    assert (tiny.text, tiny.consumed_upto) == ("", 0)
    claim = Claim(scope="user:1", key="reminder:3", holder="p", note="reminders: sending a reminder: call mom", acquired=1990.0, expires=2100.0)
    with_claim = render_awareness("tasks", claims=[claim], now=2000.0, tokenizer=tokenizer, budget=150)
    assert "reminders: sending a reminder: call mom" in with_claim.text
    own = render_awareness("reminders", claims=[claim], now=2000.0, tokenizer=tokenizer, budget=150)
    assert own.text == ""  # an agent is not told about its own work


def test_awareness_fails_open(tmp_path, monkeypatch, caplog):
    model = ScriptedModel(["fine"])
    hub = make_hub(tmp_path, model)
    emit_event(hub.store, "user:1", "inbox", "note.saved", {"note_id": 1, "title": "x"})

    def broken(*args, **kwargs):
        raise RuntimeError("events table unreadable")

    monkeypatch.setattr("scopehub.hub.orchestrator._sections.unconsumed_events", broken)
    reply = asyncio.run(hub.handle(Inbound(scope="user:1", text="/tasks what is on my list?")))
    assert reply.text == "fine" and AWARENESS_HEADER not in system_of(model.calls[0])
    assert "awareness unavailable" in caplog.text


@pytest.mark.parametrize("command", ["/events"])
def test_the_events_command_shows_what_the_agents_did(tmp_path, command):
    hub = make_hub(tmp_path, ScriptedModel(keep_email_then_answer()))
    asyncio.run(hub.handle(Inbound(scope="user:1", text="/inbox " + EMAIL)))
    reply = asyncio.run(hub.handle(Inbound(scope="user:1", text=command)))
    assert reply.kind == "command" and "inbox" in reply.text and "Quarterly report" in reply.text
    other = asyncio.run(hub.handle(Inbound(scope="user:2", text=command)))
    assert "Quarterly report" not in other.text
