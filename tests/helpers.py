"""Small builders shared by tests."""

from __future__ import annotations

from collections.abc import Iterable

from scopehub.agents import AgentRegistry, AgentSpec
from scopehub.memory import Message


def msg(id: int, agent: str | None, text: str = "", role: str = "user", scope: str = "user:1") -> Message:
    """A stored-looking message (ts follows id)."""
    return Message(id=id, scope=scope, role=role, text=text or f"message {id} for {agent}", ts=float(id), agent=agent)


def conversation(tags: Iterable[str | None], scope: str = "user:1") -> list[Message]:
    """Messages 1..n tagged as given, alternating user/agent roles."""
    return [msg(i, tag, role="user" if i % 2 else "agent", scope=scope) for i, tag in enumerate(tags, start=1)]


GENERAL = AgentSpec(name="general", description="small talk and help", instructions="Be nice.", examples=("hi", "how are you", "tell me a joke"))
TASKS = AgentSpec(
    name="tasks",
    description="to-do list: add, list and complete tasks",
    instructions="Manage tasks.",
    examples=("add buy milk to my tasks", "what is on my todo list"),
    keywords=("task", "todo"),
)


def registry_of(*specs: AgentSpec) -> AgentRegistry:
    """A registry of small test agents (general and tasks first)."""
    registry = AgentRegistry()
    for spec in (GENERAL, TASKS, *specs):
        registry.add(spec, "test")
    return registry
