"""``agents-hub channels list|read`` and ``agents-hub memory show``: what the agents tell
each other and what each keeps about itself, per scope. A thin click layer over
:mod:`scopehub.memory` and :mod:`scopehub.hub.lessons`. Mounted by :mod:`scopehub.hub.cli`.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import click

from scopehub.hub.cli.options import echo_json, json_option, scope_option, settings_of, store_of
from scopehub.memory import ChannelMessage

__all__ = ["channels_group", "memory_group"]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")


def _catalogue() -> tuple[Any, dict[str, Any]]:
    """The agents (discovered like the hub does) and their channels."""
    from scopehub.agents import discover_agents, team_channels

    registry = discover_agents()
    return registry, team_channels(registry)


def _message_json(message: ChannelMessage) -> dict[str, Any]:
    return {
        "id": message.id,
        "channel": message.channel,
        "agent": message.agent,
        "text": message.text,
        "ts": _iso(message.ts),
        "reply_to": message.reply_to,
        "pinned": message.pinned,
        "reactions": message.reactions,
    }


@click.group("channels")
def channels_group() -> None:
    """The agents' talk channels: notes they leave each other, per scope."""


@channels_group.command("list")
@scope_option()
@json_option
@click.pass_context
def channels_list(ctx: click.Context, scope: str, as_json: bool) -> None:
    """Every channel: purpose, members, messages and pins in the scope."""
    from scopehub.hub.lessons import format_channels
    from scopehub.memory import channel_stats

    registry, channels = _catalogue()
    stats = channel_stats(store_of(ctx, must_exist=True), scope)
    if as_json:
        echo_json(
            [
                {
                    "name": name,
                    "purpose": channel.purpose,
                    "members": list(channel.members),
                    "messages": stats.get(name, {}).get("messages", 0),
                    "pinned": stats.get(name, {}).get("pinned", 0) or 0,
                }
                for name, channel in channels.items()
            ]
        )
        return
    click.echo(format_channels(channels, stats, len(registry)).replace(" (read one with /channels <name>)", ""))


@channels_group.command("read")
@click.argument("name", default="team")
@scope_option()
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000), help="newest messages besides the pins")
@click.option("--thread", type=int, default=None, help="one message and its replies")
@json_option
@click.pass_context
def channels_read(ctx: click.Context, name: str, scope: str, limit: int, thread: int | None, as_json: bool) -> None:
    """A channel's pinned messages, then its newest ones (default channel: team)."""
    from scopehub.hub.lessons import format_channel
    from scopehub.memory import read_channel

    _, channels = _catalogue()
    if name not in channels:
        raise click.BadParameter(f"unknown channel {name!r}; channels: {', '.join(channels)}", param_hint="NAME")
    messages = read_channel(store_of(ctx, must_exist=True), scope, name, limit=limit, thread=thread)
    if as_json:
        echo_json([_message_json(m) for m in messages])
        return
    click.echo(format_channel(channels[name], messages))


@click.group("memory")
def memory_group() -> None:
    """Each agent's own memory per scope: lessons, strengths, weaknesses, goals, plans."""


@memory_group.command("show")
@scope_option()
@click.option("--agent", "-a", required=True, help="the agent whose memory to show")
@json_option
@click.pass_context
def memory_show(ctx: click.Context, scope: str, agent: str, as_json: bool) -> None:
    """What AGENT keeps about itself in the scope, and the lessons section its calls get."""
    import time

    from scopehub.hub.context.tokens import get_tokenizer
    from scopehub.hub.lessons import format_memory
    from scopehub.hub.orchestrator._sections import lessons_section
    from scopehub.memory import agent_memory

    registry, _ = _catalogue()
    if agent not in registry:
        raise click.BadParameter(f"unknown agent {agent!r}; agents: {', '.join(registry.names)}", param_hint="--agent")
    store = store_of(ctx, must_exist=True)
    memory = agent_memory(store, scope, agent)
    tokenizer = get_tokenizer()
    budget = settings_of(ctx).lessons_tokens
    # What the calls get: the memory with the agent's record and research, as the hub reads it.
    section = lessons_section(store, scope, agent, tokenizer=tokenizer, budget=budget, now=time.time())
    if as_json:

        def rows(items: Any) -> list[dict[str, Any]]:
            return [{k: (_iso(v) if k in ("ts", "created", "updated") else v) for k, v in asdict(x).items() if k != "scope"} for x in items]

        echo_json(
            {
                "scope": scope,
                "agent": agent,
                "lessons": rows(memory.lessons),
                "strengths": rows(memory.strengths),
                "weaknesses": rows(memory.weaknesses),
                "goals": rows(memory.goals),
                "plans": rows(memory.plans),
                "section": section,
                "section_tokens": tokenizer.count(section),
                "budget": budget,
            }
        )
        return
    click.echo(format_memory(memory))
    click.echo(f"--- lessons section sent with each {agent} call: {tokenizer.count(section)} tokens (budget {budget})")
    if section:
        click.echo(section)
