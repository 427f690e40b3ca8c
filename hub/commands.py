"""Chat commands shared by every transport: /start /help /agents /usage /search, the
facts commands /remember /facts /forget, and /feedback /channels for what the agents
learn and tell each other. Each returns the text to send back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from scopehub.memory import Message

if TYPE_CHECKING:
    from scopehub.hub.orchestrator import Hub, Inbound

__all__ = ["COMMANDS", "HELP_TEXT", "format_usage"]

HELP_TEXT = """I'm a team of specialist agents with one shared memory of this chat.
Just write; I route each message to the right agent. Or address one: /<agent> text or @agent.

/agents - who is on the team; /agents <name> - what that agent learnt here
/feedback <text> - tell the agent that just answered what was wrong (or right)
/channels - the agents' talk channels; /channels <name> - read one
/remember <fact> - keep a fact in every agent's view
/facts - what I keep about this chat
/forget <fact id or text> - drop a fact; /forget all - erase everything of this chat
/search <words> - search older messages and notes
/usage - tokens sent against what full history would cost
/help - this text"""


async def _start(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    return "Hello! " + HELP_TEXT


async def _help(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    return HELP_TEXT


async def _agents(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    name = argument.strip().lstrip("/@").lower()
    if name:
        from scopehub.hub.lessons import format_memory
        from scopehub.memory import agent_memory

        if name not in hub.registry:
            return f"No agent {name!r}. Agents: {', '.join(hub.registry.names)}."
        return format_memory(agent_memory(hub.store, inbound.scope, name))
    lines = [f"/{spec.name} - {spec.description}" for spec in hub.registry]
    return "Agents:\n" + "\n".join(lines) + "\n(/agents <name> shows what one of them learnt in this chat.)"


FEEDBACK_USAGE = "Usage: /feedback <what was wrong or right about my last reply>, e.g. /feedback no, I meant the work list"


async def _feedback(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    """Feedback on the last agent reply; the lesson is learnt after this answer is sent."""
    from scopehub.hub.lessons import text_signal

    text = argument.strip()
    if not text:
        return FEEDBACK_USAGE
    reply = hub.last_reply(inbound.scope, before_id=message.id)
    if reply is None:
        return "There is no reply of mine here to give feedback on yet."
    signal = text_signal(text)
    if hub.feedback_on(inbound.scope, reply, text, source="command", signal=signal, key=f"command:{message.id}") is None:
        return "Sorry, I could not keep that feedback; please try again."
    return f"Thanks: the {reply.agent} agent will learn from it (see /agents {reply.agent})."


async def _channels(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    from scopehub.hub.lessons import format_channel, format_channels
    from scopehub.memory import channel_stats, read_channel

    name = argument.strip().lstrip("#").lower()
    if not name:
        return format_channels(hub.channels, channel_stats(hub.store, inbound.scope), len(hub.registry))
    channel = hub.channels.get(name)
    if channel is None:
        return f"No channel {name!r}. Channels: {', '.join(hub.channels)}."
    return format_channel(channel, read_channel(hub.store, inbound.scope, name, limit=20))


def format_usage(messages: int, calls: int, sent: int, full: int) -> str:
    """The /usage and `agents-hub usage` summary line."""
    saving = (1 - sent / full) if full else 0.0
    return (
        f"{messages} messages stored, {calls} agent calls.\n"
        f"Tokens sent: {sent:,}; with full history: {full:,}; saved {saving:.1%}."
    )


async def _usage(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    usage = hub.store.usage(inbound.scope)
    return format_usage(usage.messages, usage.agent_calls, usage.tokens_sent, usage.full_history_tokens)


async def _search(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    if not argument.strip():
        return "Usage: /search <words>"
    hits = [hit for hit in hub.store.search(inbound.scope, argument, k=8) if not (hit.kind == "message" and hit.id == message.id)]
    if not hits:
        return "Nothing found."
    lines = []
    for hit in hits:
        when = datetime.fromtimestamp(hit.ts, tz=UTC).strftime("%Y-%m-%d")
        who = hit.agent or ("note" if hit.kind == "vault" else "you")
        lines.append(f"#{hit.id} {when} [{who}] {hit.snippet}")
    return "\n".join(lines)


async def _remember(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    from scopehub.hub import facts

    if not argument.strip():
        return "Usage: /remember <fact>, e.g. /remember Ram's email is ram@example.com"
    try:
        fact = facts.remember(hub.store, inbound.scope, argument, source_message=message.id, now=hub.deps.clock())
    except ValueError:  # nothing printable left once control characters are removed
        return "Usage: /remember <fact>, e.g. /remember Ram's email is ram@example.com"
    return f"Remembered (#{fact.id}): {fact.text}"


async def _facts(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    from scopehub.hub import facts

    current = facts.current(hub.store, inbound.scope)
    if not current:
        return "I keep no facts about this chat yet. Add one with /remember <fact>."
    return "Facts I keep:\n" + "\n".join(f"#{f.id} [{f.kind}] {f.text}" for f in current)


async def _forget(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    target = argument.strip()
    if not target:
        return "Usage: /forget <fact id or text>, or /forget all to erase everything of this chat."
    if target.lower() == "all":
        # VACUUM rewrites the whole file: keep the event loop (other chats) running meanwhile.
        removed = await asyncio.to_thread(hub.store.erase, inbound.scope)
        for hook in hub.erase_hooks:
            await hook(inbound.scope)
        return (
            f"Done: everything of this chat is erased ({removed.get('messages', 0)} messages, "
            f"{removed.get('facts', 0)} facts, {removed.get('vault', 0)} notes and emails, "
            f"{removed.get('tasks', 0)} tasks, {removed.get('reminders', 0)} reminders, "
            f"{removed.get('lessons', 0)} lessons, {removed.get('channel_messages', 0)} channel messages)."
        )
    from scopehub.hub import facts

    forgotten = facts.forget(hub.store, inbound.scope, target, now=hub.deps.clock())
    if not forgotten:
        return f"No fact matches {target!r}. See /facts."
    return "Forgotten:\n" + "\n".join(f"#{f.id} {f.text}" for f in forgotten)


COMMANDS: dict[str, Callable[..., Awaitable[str]]] = {
    "start": _start,
    "help": _help,
    "agents": _agents,
    "feedback": _feedback,
    "channels": _channels,
    "usage": _usage,
    "search": _search,
    "remember": _remember,
    "facts": _facts,
    "forget": _forget,
}
