"""The scoping rules: window before filter, tail, also_sees, order, token accounting."""

from __future__ import annotations

import json

from scopehub.hub.context import AgentPrompt, build_context, select_history
from scopehub.hub.context.tokens import get_tokenizer
from tests.helpers import conversation, msg

PROMPT = AgentPrompt(name="tasks", persona="You are the tasks agent.", rules="Be brief.", tools=({"type": "function", "function": {"name": "add_task", "parameters": {"type": "object", "properties": {}}}},))


def filter_first(recent, agent, also_sees, window, tail):
    """The known pitfall, for contrast: filter the whole history, then window."""
    allowed = {agent, *also_sees}
    return [m for m in recent if m.agent in allowed][-window:]


def test_window_is_applied_before_the_agent_filter():
    # 100 messages, tasks owns only the oldest 50: a window of 40 over the newest holds none of them.
    recent = [msg(i, "tasks") for i in range(1, 51)] + [msg(i, "inbox") for i in range(51, 101)]
    history = select_history(recent, "tasks", window=40, tail=4)
    assert [m.id for m in history] == [97, 98, 99, 100]  # the tail only
    # Filtering first would still hand the agent a full window of 40 of its own messages.
    assert len(filter_first(recent, "tasks", (), 40, 4)) == 40


def test_tail_adds_the_last_messages_whatever_their_tag_without_duplicates():
    recent = conversation(["tasks", "tasks", "inbox", "inbox", "notes", "tasks", "inbox"])
    history = select_history(recent, "tasks", window=40, tail=4)
    assert [m.id for m in history] == [1, 2, 4, 5, 6, 7]  # 1, 2 own; 4..7 the tail; 6 once
    assert [m.id for m in history] == sorted(m.id for m in history)


def test_also_sees_admits_another_agents_messages_within_the_window():
    recent = conversation(["inbox", "inbox"] + ["general"] * 10 + ["tasks"])
    without = select_history(recent, "tasks", window=40, tail=2)
    with_inbox = select_history(recent, "tasks", ("inbox",), window=40, tail=2)
    assert {1, 2}.isdisjoint(m.id for m in without)
    assert {1, 2} <= {m.id for m in with_inbox}
    # but never beyond the window
    assert {1, 2}.isdisjoint(m.id for m in select_history(recent, "tasks", ("inbox",), window=5, tail=2))


def test_untagged_messages_only_reach_agents_through_the_tail():
    recent = conversation([None, "tasks", None, None, None, None])
    assert [m.id for m in select_history(recent, "tasks", window=40, tail=2)] == [2, 5, 6]


def test_build_context_sends_system_history_and_message_in_order():
    recent = [msg(1, "tasks", "add milk"), msg(2, "tasks", "Added milk.", role="agent"), msg(3, "inbox", "Saved the email.", role="agent")]
    ctx = build_context(PROMPT, recent, "and eggs", tokenizer=get_tokenizer(), facts_block='Facts:\n- "x"', window=40, tail=1)
    roles = [m["role"] for m in ctx.messages]
    assert roles == ["system", "user", "assistant", "assistant", "user"]
    assert ctx.messages[-1]["content"] == "and eggs"
    assert ctx.messages[3]["content"] == "[inbox agent] Saved the email."  # labelled as another agent's
    assert 'Facts:\n- "x"' in ctx.messages[0]["content"]


def test_every_section_is_counted_exactly_and_sums_to_total():
    tok = get_tokenizer()
    recent = [msg(i, "tasks" if i % 3 else "inbox", f"message number {i} about things") for i in range(1, 60)]
    ctx = build_context(PROMPT, recent, "what is due today?", tokenizer=tok, facts_block="Facts: a", window=40, tail=4)
    t = ctx.tokens
    assert t["persona"] == tok.count(PROMPT.persona) + 3
    assert t["rules"] == tok.count("Be brief.")
    assert t["tools"] == tok.count(json.dumps(list(PROMPT.tools), separators=(",", ":")))
    assert t["facts"] == tok.count("Facts: a")
    assert t["message"] == tok.count("what is due today?") + 3
    assert t["history"] == sum(tok.count(m["content"]) + 3 for m in ctx.messages[1:-1])
    assert t["total"] == sum(t[k] for k in ("persona", "rules", "tools", "facts", "history", "message"))
    # Full history: the same call with the whole 40-message window unfiltered.
    assert ctx.full_history_tokens > t["total"]
    full = build_context(AgentPrompt("x", PROMPT.persona, PROMPT.rules, PROMPT.tools), recent, "what is due today?", tokenizer=tok, facts_block="Facts: a", also_sees=("tasks", "inbox"), window=40, tail=4)
    assert ctx.full_history_tokens == full.tokens["total"]


def test_a_huge_message_is_trimmed_to_its_budget_for_the_model():
    ctx = build_context(PROMPT, [], "word " * 50_000, tokenizer=get_tokenizer(), message_tokens=100)
    assert ctx.tokens["message"] <= 103
    assert ctx.meta["message_trimmed"]
