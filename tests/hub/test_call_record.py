"""A call record keeps what the call sent, so the call can be shown again byte for byte."""

from __future__ import annotations

import dataclasses
import json

from scopehub.hub.context import AgentPrompt, build_context
from scopehub.hub.context.record import replay_sent, sent_record
from scopehub.hub.context.tokens import get_tokenizer
from scopehub.memory import Message

PROMPT = AgentPrompt(
    name="tasks",
    persona="You are the tasks agent.",
    rules="Be brief.",
    tools=({"type": "function", "function": {"name": "add_task", "parameters": {"type": "object"}}},),
    optional_tools=({"type": "function", "function": {"name": "search_memory", "parameters": {"type": "object"}}},),
)
SECTIONS = {"facts_block": 'Facts:\n- "ann@example.com"', "lessons": "Lessons:\n- be brief", "awareness": "Team:\n- inbox saved an email", "digest": "Earlier: a trip"}


def group_history() -> list[Message]:
    scope = "group:-100"
    return [
        Message(1, scope, "user", "add milk", 1.0, agent="tasks", sender="ann"),
        Message(2, scope, "agent", "Added milk.", 2.0, agent="tasks"),
        Message(3, scope, "user", "save this email", 3.0, agent="inbox", sender="bob"),
        Message(4, scope, "agent", "Saved.", 4.0, agent="inbox"),
        Message(5, scope, "user", "/usage", 5.0, agent="hub", via="command", sender="ann"),
    ]


def test_a_recorded_call_replays_byte_identical_from_its_record_and_the_stored_messages():
    tok = get_tokenizer()
    recent = group_history()
    current = Message(6, "group:-100", "user", "and eggs " * 40, 6.0, agent="tasks", sender="ann")
    # The router rewrote the text the agent got, and the message was trimmed to 20 tokens.
    sent_text = "and eggs, please " * 40
    context = build_context(
        PROMPT, recent, sent_text, tokenizer=tok, window=40, tail=2, message_tokens=20, scope=current.scope, sender="ann", **SECTIONS
    )
    record = json.loads(json.dumps(sent_record(context, text=sent_text, stored_text=current.text, message_tokens=20)))
    assert record["sections"] == {"facts": SECTIONS["facts_block"], "lessons": "Lessons:\n- be brief", "awareness": "Team:\n- inbox saved an email", "digest": "Earlier: a trip"}
    assert record["history"] == [1, 2, 3, 4] and record["text"] == sent_text
    by_id = {m.id: m for m in recent}
    replayed, checks = replay_sent(record, PROMPT, [by_id[i] for i in record["history"]], current, tokenizer=tok)
    assert checks == {"identical": True, "stable": True, "history_complete": True}
    assert replayed.messages == context.messages and replayed.tools == context.tools and replayed.tokens == context.tokens


def test_the_record_tells_when_a_message_or_the_prompt_changed_since():
    tok = get_tokenizer()
    recent = group_history()[:4]
    current = Message(6, "group:-100", "user", "and eggs", 6.0, agent="tasks", sender="ann")
    context = build_context(PROMPT, recent, current.text, tokenizer=tok, scope=current.scope, sender="ann", **SECTIONS)
    record = sent_record(context, text=current.text, stored_text=current.text, message_tokens=4000)
    assert "text" not in record  # the stored message is the text: not kept twice
    edited = [*recent[:2], dataclasses.replace(recent[2], text="another email"), recent[3]]
    _, checks = replay_sent(record, PROMPT, edited, current, tokenizer=tok)
    assert checks == {"identical": False, "stable": True, "history_complete": True}
    _, checks = replay_sent(record, dataclasses.replace(PROMPT, persona="You are the new tasks agent."), recent, current, tokenizer=tok)
    assert not checks["identical"] and not checks["stable"]
    _, checks = replay_sent(record, PROMPT, recent[1:], current, tokenizer=tok)
    assert not checks["identical"] and not checks["history_complete"]
