"""An agent's own memory beyond its lessons (seed 000, seed 003): the research its requests
found, with the sources, and the performance digest of its work; the lessons section lets
every kind of line in, so ten plans never push the medium lessons out."""

from __future__ import annotations

import asyncio
import json

from scopehub.agents import discover_agents
from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.context.lessons import LESSONS_HEADER, render_lessons
from scopehub.hub.context.tokens import get_tokenizer
from scopehub.hub.models import ModelResponse, ToolCall
from scopehub.hub.models.testing import ScriptedModel
from scopehub.memory import (
    AgentMemory,
    Lesson,
    NewMessage,
    Plan,
    Store,
    emit_event,
    list_knowledge,
    record_feedback,
    research_of,
)

NOW = 1_714_550_400.0
SCOPE = "user:1"
FRIDGE = "The wifi password is written on the fridge door, under the Lisbon magnet."


def make_hub(tmp_path, model) -> Hub:
    store = Store(tmp_path / "hub.db")
    return Hub(Deps(store=store, settings=load_settings(window=6, tail=2), model=model, clock=lambda: NOW), discover_agents())


def old_history(store: Store) -> None:
    store.append(NewMessage(scope=SCOPE, role="user", text=FRIDGE, ts=NOW - 30 * 86400, agent="general"))
    for n in range(8):  # the fridge message leaves the window: only search reaches it
        store.append(NewMessage(scope=SCOPE, role="user", text=f"small talk {n}", ts=NOW - 86400 + n, agent="general"))


def search_then(answer: str) -> list:
    return [ModelResponse(tool_calls=(ToolCall("c1", "search_memory", json.dumps({"query": "wifi password"})),)), answer]


def system_of(call) -> str:
    return "\n".join(m["content"] for m in call.messages if m["role"] == "system")


def test_what_a_request_found_is_kept_as_the_agents_research_with_its_sources(tmp_path):
    model = ScriptedModel([*search_then("You wrote that the wifi password is on the fridge door, under the Lisbon magnet."), "ok"])
    hub = make_hub(tmp_path, model)
    old_history(hub.store)

    async def talk() -> None:
        reply = await hub.handle(Inbound(scope=SCOPE, text="what was the wifi password?", agent="general"))
        await hub.after_send(reply)
        await hub.after_send(reply)  # the work after a reply may run again: kept once
        await hub.handle(Inbound(scope=SCOPE, text="thanks", agent="general"))

    asyncio.run(talk())
    [fragment] = list_knowledge(hub.store, SCOPE)
    assert fragment.agent == "general" and fragment.messages == (1,) and fragment.mode == "extractive"
    assert "fridge door" in fragment.text and "Lisbon magnet" in fragment.text
    assert research_of(hub.store, SCOPE, "general") == [fragment] and research_of(hub.store, SCOPE, "tasks") == []
    # The agent's next call lists it with its source; search finds it as knowledge.
    assert "- research: " in system_of(model.calls[-1]) and "(from #1; just now)" in system_of(model.calls[-1])
    assert any(hit.importance is not None for hit in hub.store.search(SCOPE, "fridge magnet"))


def test_a_reply_that_states_what_the_results_do_not_say_keeps_nothing(tmp_path):
    model = ScriptedModel(search_then("The wifi password is hunter2 since March 2021."))
    hub = make_hub(tmp_path, model)
    old_history(hub.store)

    async def talk() -> None:
        await hub.after_send(await hub.handle(Inbound(scope=SCOPE, text="what was the wifi password?", agent="general")))

    asyncio.run(talk())
    assert list_knowledge(hub.store, SCOPE) == []


def test_the_performance_digest_is_the_agents_own_measured_outcomes(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model)
    store = hub.store
    reply = store.append(NewMessage(scope=SCOPE, role="agent", text="Added.", ts=NOW - 3600, agent="tasks"))
    record_feedback(store, SCOPE, "tasks", reply_id=reply.id, source="reaction", signal="positive", text="👍", key="r1", now=NOW - 3500)
    record_feedback(store, SCOPE, "tasks", reply_id=reply.id, source="reaction", signal="negative", text="👎", key="r2", now=NOW - 3400)
    record_feedback(store, SCOPE, "tasks", reply_id=reply.id, source="correction", signal="negative", text="no, the work list", key="c1", now=NOW - 3300)
    for n in (1, 2):
        emit_event(store, SCOPE, "tasks", "task.created", {"task_id": n, "title": f"task {n}"}, now=NOW - 3000)
    emit_event(store, SCOPE, "tasks", "task.done", {"task_id": 1, "title": "task 1"}, now=NOW - 2000)
    # A reminder sent, and the person wrote 10 minutes later: acknowledged; one not followed.
    emit_event(store, SCOPE, "reminders", "reminder.fired", {"reminder_id": 1, "text": "call mom"}, now=NOW - 7200)
    store.append(NewMessage(scope=SCOPE, role="user", text="called her", ts=NOW - 6600))
    emit_event(store, SCOPE, "reminders", "reminder.fired", {"reminder_id": 2, "text": "water plants"}, now=NOW - 5000)
    emit_event(store, SCOPE, "tasks", "task.created", {"task_id": 3, "title": "too old"}, now=NOW - 60 * 86400)

    async def talk() -> None:
        await hub.handle(Inbound(scope=SCOPE, text="what is on my list?", agent="tasks"))
        await hub.handle(Inbound(scope=SCOPE, text="any reminders left?", agent="reminders"))

    asyncio.run(talk())
    tasks_call, reminders_call = model.calls[-2], model.calls[-1]
    assert "Your record (last 30 d): 👍 1, 👎 1, 1 corrected; tasks added 2, tasks done 1." in system_of(tasks_call)
    assert "Your record (last 30 d): reminders sent 2, acknowledged 1." in system_of(reminders_call)
    assert "👍" not in system_of(reminders_call)  # another agent's feedback is not its record


def test_ten_plans_never_push_every_medium_lesson_out():
    tokenizer = get_tokenizer()
    plans = tuple(Plan(i, SCOPE, "tasks", f"plan number {i}: keep the weekly list short and sorted", "active", 0, 0) for i in range(1, 11))
    lessons = tuple(
        Lesson(20 + i, SCOPE, "tasks", "observation", "medium", f"lesson {i}: the person means the work list", ts=float(i)) for i in range(3)
    )
    text = render_lessons(AgentMemory("tasks", lessons=lessons, plans=plans), tokenizer=tokenizer, budget=120)
    assert text.startswith(LESSONS_HEADER) and tokenizer.count(text) <= 120
    assert "lesson 0: the person means the work list" in text and "plan #1:" in text
