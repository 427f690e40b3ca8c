"""Chat commands shared by every transport: /start /help /agents /usage /search and the
facts commands /remember /facts /forget. Each returns the text to send back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from scopehub.memory import Message

if TYPE_CHECKING:
    from scopehub.hub.orchestrator import Hub, Inbound

__all__ = ["COMMANDS", "HELP_TEXT", "format_usage", "plural"]

HELP_TEXT = """I'm a team of specialist agents with one shared memory of this chat.
Just write; I route each message to the right agent. Or address one: /<agent> text or @agent.

/agents - who is on the team
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
    lines = [f"/{spec.name} - {spec.description}" for spec in hub.registry]
    return "Agents:\n" + "\n".join(lines)


def plural(count: int, singular: str, many: str | None = None) -> str:
    """``"1 fact"``, ``"3 facts"``, ``"0 facts"``; ``many`` for irregular plurals."""
    return f"{count:,} {singular if count == 1 else (many or singular + 's')}"


def format_usage(messages: int, calls: int, sent: int, full: int) -> str:
    """The /usage and `agents-hub usage` summary line."""
    saving = (1 - sent / full) if full else 0.0
    return (
        f"{plural(messages, 'message')} stored, {plural(calls, 'agent call')}.\n"
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
            f"Done: everything of this chat is erased ({plural(removed.get('messages', 0), 'message')}, "
            f"{plural(removed.get('facts', 0), 'fact')}, {plural(removed.get('vault', 0), 'note or email', 'notes and emails')}, "
            f"{plural(removed.get('tasks', 0), 'task')}, {plural(removed.get('reminders', 0), 'reminder')})."
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
    "usage": _usage,
    "search": _search,
    "remember": _remember,
    "facts": _facts,
    "forget": _forget,
}
