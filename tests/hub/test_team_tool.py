"""The built-in agents get the ``team`` tool (channels, lessons, goals, plans) only on the
calls that may use it: unread channel news, a correction, talk of the team or of a lesson,
goal or plan. Every other call pays nothing for it, and the fixed-token average holds."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from scopehub.agents import discover_agents, team
from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.context import agent_prompt, build_context, fixed_tokens, get_tokenizer
from scopehub.hub.context.offer import wants_team
from scopehub.hub.models import ModelResponse, ToolCall
from scopehub.hub.models.testing import ScriptedModel
from scopehub.memory import Store, lessons_of, read_channel

SCOPE = "user:1"


def make_hub(model: Any) -> Hub:
    store = Store(":memory:")
    return Hub(Deps(store=store, settings=load_settings(), model=model, clock=lambda: 1_714_550_400.0), discover_agents())


def say(hub: Hub, text: str) -> None:
    asyncio.run(hub.handle(Inbound(scope=SCOPE, text=text)))


def tool_names(call: Any) -> list[str]:
    return [t["function"]["name"] for t in call.tools]


def system_of(call: Any) -> str:
    return "\n".join(m["content"] for m in call.messages if m["role"] == "system")


def team_call(action: str, **args: Any) -> ModelResponse:
    return ModelResponse(tool_calls=(ToolCall("t1", "team", json.dumps({"action": action, **args})),))


@pytest.mark.parametrize(
    ("text", "offered"),
    [
        ("what is on my list?", False),
        ("add buy milk, due friday", False),
        ("I plan to travel on friday", False),  # "plan" as people say it, not the agent's plan
        ("the team meeting is at 3, add it", False),
        ("please tell the team I prefer French", True),
        ("let the notes agent know about the move", True),
        ("no, I meant the work list", True),  # a correction: a lesson to record
        ("from now on use the work list", True),
        ("what is your plan?", True),
        ("post it in #findings", True),
    ],
)
def test_the_trigger_reads_the_message_alone(text: str, offered: bool) -> None:
    assert wants_team(text) is offered
    prompt = agent_prompt(discover_agents()["tasks"])
    built = build_context(prompt, [], text, tokenizer=get_tokenizer())
    assert ("team" in [t["function"]["name"] for t in built.tools]) is offered
    # What the call counts for its tools is what it carries.
    assert built.tokens["tools"] == fixed_tokens(prompt, get_tokenizer(), optional=False, team=offered)["tools"]


def test_a_builtin_agent_gets_the_tool_on_a_trigger_and_pays_nothing_otherwise() -> None:
    model = ScriptedModel(
        [
            "Nothing on your list.",
            team_call("lesson", text="'The work list' means the tasks tagged work.", kind="failure", importance="high"),
            "Sorry, here is the work list.",
            "Still nothing.",
        ]
    )
    hub = make_hub(model)
    say(hub, "/tasks what is on my list?")
    say(hub, "/tasks no, I meant the work list")
    say(hub, "/tasks anything else?")
    plain, corrected, _, later = model.calls
    assert "team" not in tool_names(plain) and "team" not in tool_names(later)
    assert "team" in tool_names(corrected)
    # The agent recorded its own lesson through the tool, and it reaches its next call.
    assert [lesson.text for lesson in lessons_of(hub.store, SCOPE, "tasks")] == ["'The work list' means the tasks tagged work."]
    assert "'The work list' means the tasks tagged work." in system_of(later)
    # The recorded tokens of the calls: the tool's schema is paid on the triggered call only.
    calls = [c for c in hub.store.calls(SCOPE) if c["agent"] == "tasks"]
    extra = json.dumps(team.schema(), separators=(",", ":"))
    assert calls[1]["tools"] - calls[0]["tools"] == pytest.approx(get_tokenizer().count(extra), abs=2)
    assert calls[2]["tools"] == calls[0]["tools"]


def test_a_post_through_the_tool_reaches_a_member_who_is_then_offered_the_tool_once() -> None:
    model = ScriptedModel(
        [
            team_call("post", text="The office moves to Friday."),
            "Told the team.",
            "No notes yet.",
            "Still none.",
        ]
    )
    hub = make_hub(model)
    say(hub, "/tasks please tell the team the office moves to Friday")
    assert [(m.agent, m.text) for m in read_channel(hub.store, SCOPE, "team")] == [("tasks", "The office moves to Friday.")]
    say(hub, "/notes what notes do I have?")
    say(hub, "/notes and now?")
    posting, _, first, second = model.calls
    assert "team" in tool_names(posting)
    # The member's awareness block carries the post, and it may answer it: the tool is offered.
    assert "From your channels:" in system_of(first) and "[team] tasks" in system_of(first)
    assert "The office moves to Friday." in system_of(first)
    assert "team" in tool_names(first)
    # Read once: the next call neither shows it nor pays for the tool.
    assert "The office moves to Friday." not in system_of(second)
    assert "team" not in tool_names(second)
