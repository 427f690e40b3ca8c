"""How people see what the agents keep: an agent's own memory and the talk channels, as
plain text for ``/agents <name>``, ``/channels`` and ``agents-hub memory|channels``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from scopehub.agents import Channel, format_channel_message
from scopehub.memory import AgentMemory, ChannelMessage

__all__ = ["format_channel", "format_channels", "format_memory"]


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d")


def format_memory(memory: AgentMemory) -> str:
    """Everything one agent keeps about itself in a chat, one item a line."""
    if memory.empty:
        return f"The {memory.agent} agent has learnt nothing in this chat yet. React 👍/👎 to its replies or use /feedback."
    lines = [f"The {memory.agent} agent keeps:"]
    if memory.lessons:
        lines.append(f"Lessons ({len(memory.lessons)}, most important first):")
        for lesson in memory.lessons:
            where = "from your feedback" if lesson.source == "feedback" else "its own"
            topic = f", {lesson.topic}" if lesson.topic else ""
            lines.append(f"#{lesson.id} [{lesson.kind}, {lesson.importance}{topic}] {lesson.text} ({where}, {_day(lesson.ts)})")
    if memory.weaknesses:
        lines.append("Weak at: " + ", ".join(f"{t.topic} ({t.evidence} failures)" for t in memory.weaknesses))
    if memory.strengths:
        lines.append("Strong at: " + ", ".join(f"{t.topic} ({t.evidence} successes)" for t in memory.strengths))
    for goal in memory.goals:
        lines.append(f"Goal #{goal.id} ({goal.status}, {goal.progress}%): {goal.text}")
    for plan in memory.plans:
        lines.append(f"Plan #{plan.id} ({plan.status}): {plan.text}")
    return "\n".join(lines)


def format_channels(channels: Mapping[str, Channel], stats: Mapping[str, Mapping[str, object]], everyone: int) -> str:
    """The channels with their purpose, members and how much is in them."""
    lines = ["Channels (read one with /channels <name>):"]
    for name, channel in channels.items():
        members = "all agents" if len(channel.members) == everyone else ", ".join(channel.members)
        count = stats.get(name, {})
        lines.append(
            f"#{name} - {channel.purpose} ({members}; {count.get('messages', 0)} messages, {count.get('pinned', 0) or 0} pinned)"
        )
    return "\n".join(lines)


def format_channel(channel: Channel, messages: list[ChannelMessage]) -> str:
    """One channel: its pins, then its newest messages, oldest first."""
    head = f"#{channel.name} - {channel.purpose}"
    if not messages:
        return f"{head}\nNo messages yet."
    return "\n".join([head, *(format_channel_message(m, _day(m.ts), channel=False) for m in messages)])
