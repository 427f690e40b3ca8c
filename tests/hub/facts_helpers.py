"""Builders the facts tests share: a hub with a scripted extractor, a clock, and readers of what a call carried."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from scopehub.agents import AgentRegistry, AgentSpec
from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.facts import FactKeeper
from scopehub.hub.models.testing import ScriptedModel
from scopehub.memory import Fact, NewFact, NewMessage, Store, add_fact

SCOPE = "user:1"


class Clock:
    """A clock that moves one second per reading."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def registry() -> AgentRegistry:
    reg = AgentRegistry()
    reg.add(AgentSpec(name="general", description="small talk and help", instructions="Be nice.", examples=("hi", "how are you")), "t")
    return reg


def make_hub(tmp_path, *, extractor: Any = None, agent: ScriptedModel | None = None, **settings: Any) -> Hub:
    store = Store(tmp_path / "hub.db")
    clock = Clock()
    keeper = FactKeeper(store, extractor, clock=clock)
    deps = Deps(
        store=store,
        settings=load_settings(db=tmp_path / "hub.db", **settings),
        model=agent if agent is not None else ScriptedModel(default="ok"),
        facts=keeper,
        clock=clock,
    )
    return Hub(deps, registry())


def say(hub: Hub, text: str, scope: str = SCOPE, **kw: Any):
    """Handle one message and run the after-send learning, as a transport does."""

    async def run():
        reply = await hub.handle(Inbound(scope=scope, text=text, **kw))
        await hub.after_send(reply)
        return reply

    return asyncio.run(run())


def system_of(call) -> str:
    """The leading system messages: the stable part, then the facts (and other context)."""
    assert call.messages[0]["role"] == "system"
    leading = [m["content"] for m in call.messages if m["role"] == "system"]
    return "\n\n".join(leading)


def facts_message_of(call) -> str:
    """The system message that follows the stable part: facts come after the cache breakpoint."""
    assert "cache_control" in call.messages[0] and call.messages[1]["role"] == "system"
    return call.messages[1]["content"]


def extraction(*facts: dict[str, Any]) -> str:
    return json.dumps({"facts": list(facts)})


def texts(facts: Sequence[Fact]) -> set[str]:
    return {fact.text for fact in facts}


def run_learning(store: Store, message_text: str, answer: str | Exception, scope: str = SCOPE):
    """Store the person's message, let a scripted extractor answer, reconcile; returns (decisions, extractor)."""
    extractor = ScriptedModel([answer])
    keeper = FactKeeper(store, extractor, clock=Clock(1_800_000_000.0))
    message = store.append(NewMessage(scope=scope, role="user", text=message_text))
    decisions = asyncio.run(keeper.learn_from(scope, message))
    return decisions, extractor


def seed(store: Store, *facts: tuple[str, str | None, str], scope: str = SCOPE) -> list[Fact]:
    """(text, key, confidence) facts, oldest first."""
    return [
        add_fact(store, scope, NewFact(text, key=key, confidence=confidence, kind="other"), now=1_000.0 + i)
        for i, (text, key, confidence) in enumerate(facts)
    ]


EMAIL_OLD = ("User's email is old@example.com", "user.email", "derived")


DIET = ("User is vegetarian", "user.diet", "derived")


OFFICE = ("User's office is in Cyber Hub", "user.office", "derived")
