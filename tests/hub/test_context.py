"""The scoping rules: window before filter, tail, also_sees, order, token accounting."""

from __future__ import annotations

import json

from scopehub.hub.context import (
    AgentPrompt,
    agent_prompt,
    build_context,
    fixed_tokens,
    select_history,
    stable_prefix,
)
from scopehub.hub.context.tokens import get_tokenizer
from tests.helpers import TASKS, conversation, msg

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


def test_build_context_sends_stable_part_context_history_and_message_in_order():
    recent = [msg(1, "tasks", "add milk"), msg(2, "tasks", "Added milk.", role="agent"), msg(3, "inbox", "Saved the email.", role="agent")]
    ctx = build_context(PROMPT, recent, "and eggs", tokenizer=get_tokenizer(), facts_block='Facts:\n- "x"', window=40, tail=1)
    roles = [m["role"] for m in ctx.messages]
    assert roles == ["system", "system", "user", "assistant", "assistant", "user"]
    assert ctx.messages[0]["content"] == "You are the tasks agent.\n\nBe brief."  # persona, rules: nothing that changes
    assert ctx.messages[1]["content"] == 'Facts:\n- "x"'
    assert ctx.messages[-1]["content"] == "and eggs"
    assert ctx.messages[4]["content"] == "[inbox agent] Saved the email."  # labelled as another agent's


def test_extra_sections_follow_facts_in_a_fixed_order_and_empty_ones_cost_nothing():
    tok = get_tokenizer()
    ctx = build_context(
        PROMPT, [], "hi", tokenizer=tok, facts_block="F", digest="D", awareness="A", lessons="L", window=40, tail=4
    )
    assert ctx.messages[1] == {"role": "system", "content": "F\n\nL\n\nA\n\nD"}
    bare = build_context(PROMPT, [], "hi", tokenizer=tok, awareness="A")
    assert bare.messages[1]["content"] == "A"
    assert {name: bare.tokens[name] for name in ("facts", "lessons", "digest")} == {"facts": 0, "lessons": 0, "digest": 0}
    none = build_context(PROMPT, [], "hi", tokenizer=tok)
    assert [m["role"] for m in none.messages] == ["system", "user"]
    assert none.tokens["awareness"] == 0
    # What a section adds to the call is exactly what it is counted at.
    assert bare.tokens["total"] - none.tokens["total"] == bare.tokens["awareness"] == tok.count("A") + 3
    with_all = ctx.tokens
    assert with_all["lessons"] == with_all["awareness"] == with_all["digest"] == tok.count("\n\nL")


def test_two_calls_of_one_agent_share_the_stable_prefix_whatever_their_facts_and_history():
    tok = get_tokenizer()
    prompt = agent_prompt(TASKS)
    first = build_context(prompt, [msg(1, "tasks", "add milk")], "add eggs", tokenizer=tok, facts_block="Facts: Ram's email is r@x")
    second = build_context(
        prompt,
        [msg(1, "tasks", "add milk"), msg(2, "inbox", "pasted an email"), msg(3, "tasks", "add eggs")],
        "what is on my list",
        tokenizer=tok,
        facts_block="Facts: the office is in Cyber Hub",
        lessons="Lessons: confirm dates",
    )
    assert stable_prefix(first) == stable_prefix(second)
    # Byte-identical as serialised for the wire, up to the cache breakpoint.
    wire = [json.dumps([*c.tools, *c.messages[:1]], separators=(",", ":")) for c in (first, second)]
    assert wire[0] == wire[1]
    assert first.messages[0]["cache_control"] == {"type": "ephemeral"}
    assert "Ram" not in wire[0] and "Cyber Hub" not in wire[1]  # facts come after the breakpoint
    assert first.messages[1]["content"] != second.messages[1]["content"]
    # The stable part is what `agents-hub agents` counts, to the token.
    assert first.stable_tokens == sum(fixed_tokens(prompt, tok, optional=False).values())


def test_search_memory_is_offered_only_when_the_call_may_need_the_archive():
    tok = get_tokenizer()
    prompt = agent_prompt(TASKS)
    plain = build_context(prompt, [msg(1, "tasks")], "add buy milk", tokenizer=tok)
    assert "search_memory" not in {t["function"]["name"] for t in plain.tools}
    past = build_context(prompt, [msg(1, "tasks")], "what did I say about the plumber last week?", tokenizer=tok)
    assert [t["function"]["name"] for t in past.tools][-1] == "search_memory"
    full = build_context(prompt, [msg(i, "inbox") for i in range(1, 41)], "add buy milk", tokenizer=tok, window=40)
    assert "search_memory" in {t["function"]["name"] for t in full.tools}  # older messages exist
    assert past.tokens["tools"] - plain.tokens["tools"] > 30  # what not offering it saves per call
    always = agent_prompt(TASKS.model_copy(update={"offer_search": "always"}))
    assert "search_memory" in {t["function"]["name"] for t in build_context(always, [], "add milk", tokenizer=tok).tools}


def test_a_huge_message_is_trimmed_to_its_budget_for_the_model():
    ctx = build_context(PROMPT, [], "word " * 50_000, tokenizer=get_tokenizer(), message_tokens=100)
    assert ctx.tokens["message"] <= 103
    assert ctx.meta["message_trimmed"]


def test_history_and_message_tokens_are_what_their_provider_messages_cost_framing_included():
    from scopehub.hub.context.tokens import count_message_tokens
    from scopehub.memory import Message

    tok = get_tokenizer()
    recent = [
        Message(id=1, scope="group:5", role="user", text="add buy milk", ts=1.0, agent="tasks", sender="Ann"),
        Message(id=2, scope="group:5", role="agent", text="Added milk.", ts=2.0, agent="tasks"),
        Message(id=3, scope="group:5", role="agent", text="Your note is saved.", ts=3.0, agent="notes"),
    ]
    built = build_context(PROMPT, recent, "and eggs", tokenizer=tok, scope="group:5", sender="Bob", window=40, tail=4)
    history_sent = built.messages[1:-1]  # between the system message and the current one
    assert [m["content"] for m in history_sent] == ["Ann: add buy milk", "Added milk.", "[notes agent] Your note is saved."]
    # Each message's role framing and its label ("Ann: ", "[notes agent] ") are counted, exactly as sent.
    assert built.tokens["history"] == count_message_tokens(tok, history_sent)
    # ... and the framing is what OpenAI's cookbook counts: 3 tokens a message (role and
    # separators), independent of the hub's own constant, so dropping it fails here too.
    assert built.tokens["history"] == sum(tok.count(m["content"]) for m in history_sent) + 3 * len(history_sent)
    assert built.tokens["message"] == count_message_tokens(tok, built.messages[-1:]) and built.messages[-1]["content"] == "Bob: and eggs"
