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

__all__ = ["COMMANDS", "HELP_TEXT", "format_digest_usage", "format_usage"]

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


def format_usage(messages: int, calls: int, sent: int, full: int) -> str:
    """The /usage and `agents-hub usage` summary line."""
    saving = (1 - sent / full) if full else 0.0
    return (
        f"{messages} messages stored, {calls} agent calls.\n"
        f"Tokens sent: {sent:,}; with full history: {full:,}; saved {saving:.1%}."
    )


def format_digest_usage(digest: dict) -> str:
    """The digest's share of /usage: its tokens across calls, the paths calls took, compaction cost."""
    paths = digest["paths"]
    shown = ", ".join(f"{name} {paths[name]}" for name in ("cached", "incremental", "full", "full_recompact", "none"))
    compactions = sum(digest["compactions"].values())
    return (
        f"Digest: {digest['tokens']:,} tokens over {digest['calls']} calls ({shown}); "
        f"{compactions} compactions, {digest['failed']} failed, "
        f"{digest['prompt_tokens'] + digest['completion_tokens']:,} model tokens."
    )


async def _usage(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    from scopehub.memory import digest_usage

    usage = hub.store.usage(inbound.scope)
    text = format_usage(usage.messages, usage.agent_calls, usage.tokens_sent, usage.full_history_tokens)
    try:
        digest = digest_usage(hub.store, inbound.scope)
    except Exception:  # the digest's figures are extra: /usage answers without them
        return text
    if digest["calls"] or any(digest["compactions"].values()) or digest["failed"]:
        text += "\n" + format_digest_usage(digest)
    return text


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
        if hit.importance is not None:
            who = f"knowledge {hit.importance:.2f}"
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
            f"{removed.get('tasks', 0)} tasks, {removed.get('reminders', 0)} reminders)."
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
