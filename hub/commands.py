"""Chat commands shared by every transport: /start /help /agents /usage /search, the
facts commands /remember /facts /forget, /feedback /channels for what the agents learn
and tell each other, and /settings for the chat's own time zone, language and agents.
Each returns the text to send back. (Who may run the ones that change a group is the
transport's to check: in Telegram only a group's administrators.)
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scopehub.hub.wording import plural
from scopehub.memory import Message, Usage

if TYPE_CHECKING:
    from scopehub.hub.orchestrator import Hub, Inbound

__all__ = [
    "COMMANDS",
    "HELP_TEXT",
    "LANGUAGES",
    "SETTINGS_USAGE",
    "format_digest_usage",
    "format_settings",
    "format_usage",
    "plural",
    "usage_figures",
]

HELP_TEXT = """I'm a team of specialist agents with one shared memory of this chat.
Just write; I route each message to the right agent. Or address one: /<agent> text or @agent.

/agents - who is on the team; /agents <name> - what that agent learnt here
/feedback <text> - tell the agent that just answered what was wrong (or right)
/channels - the agents' talk channels; /channels <name> - read one
/remember <fact> - keep a fact in every agent's view
/facts - what I keep about this chat
/forget <fact id or text> - drop a fact; /forget all - erase everything of this chat
/settings - this chat's time zone, language and agents (and how to change them)
/search <words> - search older messages and notes
/events - what the agents did recently
/usage - tokens sent, cached and billed, against full history
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


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.1%}" if whole else "0.0%"


def usage_figures(usage: Usage) -> dict[str, Any]:
    """The numbers `/usage`, `agents-hub usage` and `usage --json` show, from one place.

    ``cost`` is "unknown" when no call with usage has a price (a model litellm's cost map
    does not know), never 0; ``billed_tokens`` is None when none is known.
    """
    with_usage = usage.calls_reporting_usage
    billed_known = with_usage - usage.calls_billed_unknown
    cost_known = with_usage - usage.calls_cost_unknown
    return {
        "scope": usage.scope,
        "messages": usage.messages,
        "agent_calls": usage.agent_calls,
        "tokens_sent": usage.tokens_sent,
        "full_history_tokens": usage.full_history_tokens,
        "saving": round(usage.saving, 4),
        "provider_prompt_tokens": usage.prompt_tokens,
        "provider_completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "calls_reporting_usage": with_usage,
        "calls_reporting_cache": usage.calls_reporting_cache,
        # Calls whose provider said nothing about caching: their cached tokens are unknown, not 0.
        "calls_without_cache_report": with_usage - usage.calls_reporting_cache,
        "billed_tokens": round(usage.billed_tokens, 1) if billed_known > 0 else None,
        "calls_billed_unknown": usage.calls_billed_unknown,
        "cost": round(usage.cost, 6) if cost_known > 0 else ("unknown" if with_usage else 0.0),
        "calls_cost_unknown": usage.calls_cost_unknown,
        "router": {"calls": usage.router_calls, "tokens": usage.router_tokens},
        "fact_extraction": {"calls": usage.extractor_calls, "tokens": usage.extractor_tokens},
    }


def format_usage(usage: Usage) -> str:
    """The /usage and `agents-hub usage` summary."""
    f = usage_figures(usage)
    lines = [
        f"{plural(f['messages'], 'message')} stored, {plural(f['agent_calls'], 'agent call')}.",
        f"Tokens sent: {f['tokens_sent']:,}; with full history: {f['full_history_tokens']:,}; saved {f['saving']:.1%}.",
    ]
    if f["router"]["calls"] or f["fact_extraction"]["calls"]:
        lines.append(
            f"Hub model calls: LLM router {plural(f['router']['calls'], 'call')}, {f['router']['tokens']:,} tokens; "
            f"fact extraction {plural(f['fact_extraction']['calls'], 'call')}, {f['fact_extraction']['tokens']:,} tokens."
        )
    calls = f["calls_reporting_usage"]
    if not calls:
        lines.append("Provider usage: none reported (no model call returned token counts).")
        return "\n".join(lines)
    prompt = f["provider_prompt_tokens"]
    if f["calls_reporting_cache"]:
        cache = f"{f['cached_tokens']:,} cached ({_share(f['cached_tokens'], prompt)})"
        if f["cache_write_tokens"]:
            cache += f", {f['cache_write_tokens']:,} written to the cache"
        if f["calls_without_cache_report"]:
            cache += f"; {f['calls_without_cache_report']} of {calls} calls: provider reports no caching"
    else:
        cache = "caching not reported by the provider"
    lines.append(f"Provider input: {prompt:,} tokens over {calls} calls (tool rounds included); {cache}.")
    billed = f["billed_tokens"]
    billed_text = "unknown" if billed is None else f"{billed:,.0f} tokens"
    if billed is not None and f["calls_billed_unknown"]:
        billed_text += f" (+{f['calls_billed_unknown']} calls unknown)"
    cost = f["cost"]
    if cost == "unknown":
        cost_text = "unknown (model not in litellm's cost map)"
    else:
        cost_text = f"${cost:.4f}"
        if f["calls_cost_unknown"]:
            cost_text += f" (+{f['calls_cost_unknown']} calls of unknown price)"
    lines.append(f"Billed like {billed_text} at full input price; cost {cost_text}.")
    return "\n".join(lines)


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
    from scopehub.hub.budgets import budget_line
    from scopehub.memory import chat_settings, digest_usage

    text = format_usage(hub.store.usage(inbound.scope))
    timezone = chat_settings(hub.store, inbound.scope).timezone or hub.settings.timezone
    text += "\n" + budget_line(hub.store, hub.settings, inbound.scope, now=hub.deps.clock(), timezone=timezone)
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


async def _events(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    from scopehub.hub.context.awareness import relative_time
    from scopehub.memory import recent_events, summarize_event

    events = recent_events(hub.store, inbound.scope, limit=10)
    if not events:
        return "Nothing recorded yet: agents record what they do (tasks added, notes saved, emails kept...)."
    now = hub.deps.clock()
    lines = [f"{e.agent}, {relative_time(e.ts, now)}: {summarize_event(e)}" for e in events]
    return "What the agents did recently:\n" + "\n".join(lines)


async def _forget(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    target = argument.strip()
    if not target:
        return "Usage: /forget <fact id or text>, or /forget all to erase everything of this chat."
    if target.lower() == "all":
        # VACUUM rewrites the whole file: keep the event loop (other chats) running meanwhile.
        from scopehub.hub.erasure import erase_scope_everywhere

        removed = await asyncio.to_thread(erase_scope_everywhere, hub.store, hub.settings, inbound.scope)
        for hook in hub.erase_hooks:
            await hook(inbound.scope)
        return (
            f"Done: everything of this chat is erased ({plural(removed.get('messages', 0), 'message')}, "
            f"{plural(removed.get('facts', 0), 'fact')}, {plural(removed.get('vault', 0), 'note or email', 'notes and emails')}, "
            f"{plural(removed.get('tasks', 0), 'task')}, {plural(removed.get('reminders', 0), 'reminder')}, "
            f"{plural(removed.get('lessons', 0), 'lesson')}, {plural(removed.get('channel_messages', 0), 'channel message')})."
        )
    from scopehub.hub import facts

    forgotten = facts.forget(hub.store, inbound.scope, target, now=hub.deps.clock())
    if not forgotten:
        return f"No fact matches {target!r}. See /facts."
    return "Forgotten:\n" + "\n".join(f"#{f.id} {f.text}" for f in forgotten)


# Languages offered as buttons (any other is typed: /settings language <name>).
LANGUAGES: dict[str, str] = {
    "en": "English",
    "de": "Deutsch",
    "fr": "Français",
    "es": "Español",
    "it": "Italiano",
    "pt": "Português",
    "ru": "Русский",
    "zh": "中文",
}
SETTINGS_USAGE = (
    "Change them with /settings timezone <Area/City>, /settings language <language or auto>, "
    "/settings agents <name, name ...> (or all), /settings reset."
)
_LANGUAGE_RE = re.compile(r"^[^\W\d_][\w ()-]{0,31}$")


def format_settings(hub: Hub, scope: str) -> str:
    """What /settings shows: the chat's settings, each with the default it overrides."""
    from scopehub.memory import chat_settings

    current = chat_settings(hub.store, scope)
    team = hub.registry.names
    agents = [name for name in current.agents or () if name in hub.registry]
    language = current.language
    return "\n".join(
        [
            "Settings of this chat:",
            f"Time zone: {current.timezone or hub.settings.timezone}" + ("" if current.timezone else " (the default)"),
            f"Language: {LANGUAGES.get(language or '', language) if language else 'the one you write in'}",
            f"Agents: {', '.join(agents)} (of {', '.join(team)})" if agents else f"Agents: all ({', '.join(team)})",
            SETTINGS_USAGE,
        ]
    )


async def _settings(hub: Hub, inbound: Inbound, message: Message, argument: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from scopehub.memory import update_chat_settings

    name, _, value = argument.strip().partition(" ")
    name, value = name.lower(), value.strip()
    now = hub.deps.clock()
    if not name:
        return format_settings(hub, inbound.scope)
    if name == "reset":
        update_chat_settings(hub.store, inbound.scope, timezone=None, language=None, agents=None, now=now)
        return "Back to the defaults.\n" + format_settings(hub, inbound.scope)
    if name in ("timezone", "tz", "time"):
        if not value:
            return "Usage: /settings timezone <Area/City>, e.g. /settings timezone Europe/Berlin"
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            return f"I don't know the time zone {value!r}: use a name like Europe/Berlin, America/New_York or UTC."
        update_chat_settings(hub.store, inbound.scope, timezone=value, now=now)
        return f"Time zone set to {value}: reminders and due dates here use it."
    if name in ("language", "lang"):
        if value.lower() in ("", "auto", "default"):
            update_chat_settings(hub.store, inbound.scope, language=None, now=now)
            return "Language: the agents answer in the language you write in."
        language = LANGUAGES.get(value.lower(), value)
        if not _LANGUAGE_RE.match(language):
            return "Usage: /settings language <language or auto>, e.g. /settings language German"
        update_chat_settings(hub.store, inbound.scope, language=language, now=now)
        return f"Language set to {language}: the agents answer in it."
    if name == "agents":
        if value.lower() in ("", "all"):
            update_chat_settings(hub.store, inbound.scope, agents=None, now=now)
            return f"Every agent answers here: {', '.join(hub.registry.names)}."
        wanted = [part.strip().lstrip("/@").lower() for part in re.split(r"[,\s]+", value) if part.strip()]
        unknown = [part for part in wanted if part not in hub.registry]
        if unknown:
            return f"No agent {', '.join(map(repr, unknown))}. Agents: {', '.join(hub.registry.names)}."
        update_chat_settings(hub.store, inbound.scope, agents=wanted, now=now)
        return f"Only {', '.join(dict.fromkeys(wanted))} answer here now (/settings agents all for everyone)."
    return f"No setting {name!r}. " + SETTINGS_USAGE


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
    "events": _events,
    "settings": _settings,
}
