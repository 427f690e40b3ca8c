"""Talk channels and each agent's own memory, as one compact hub tool: ``team``.

One tool with an ``action`` instead of eight (post_to_channel, read_channel, react, pin,
record a lesson, goal, plan...): every schema is paid on every call it is offered in, so
the hub offers it on every call only to agents that declare a channel or ask for it
(``AgentSpec.team_tool``); every other agent gets it when a zero-token trigger says the
call may use it (unread channel news, a correction, talk of the team or of a lesson, goal
or plan: :func:`scopehub.hub.context.offer.wants_team`). Every agent can run it.

Channels: the hub's ``team`` channel (every agent) and those the agents declare
(:func:`team_channels`). The tool reads the resolved channels from
``ToolContext.extra["channels"]``; an agent may post to and read only its own channels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from scopehub import memory

from ._memory_tool import search_memory
from ._spec import AgentSpec, Channel, Tool, ToolContext, tool

__all__ = [
    "TEAM_CHANNEL",
    "agent_tools",
    "channel_problems",
    "channels_of",
    "format_channel_message",
    "team",
    "team_channels",
]

TEAM_CHANNEL = Channel(name="team", purpose="Anything the whole team should know", members=("*",))
READ_LIMIT = 15  # messages a read returns besides the pins


def team_channels(specs: Iterable[AgentSpec]) -> dict[str, Channel]:
    """Every channel with its members resolved to agent names: ``team`` first, then declared ones.

    The declaring agent always belongs to its channel; ``"*"`` expands to every agent. A
    channel declared by several agents keeps the first purpose and the union of members.
    """
    specs = list(specs)
    everyone = tuple(spec.name for spec in specs)
    declared: dict[str, tuple[str, list[str]]] = {TEAM_CHANNEL.name: (TEAM_CHANNEL.purpose, ["*"])}
    for spec in specs:
        for channel in spec.channels:
            purpose, members = declared.setdefault(channel.name, (channel.purpose, []))
            members.extend([spec.name, *channel.members])
    resolved: dict[str, Channel] = {}
    for name, (purpose, members) in declared.items():
        names = everyone if "*" in members else tuple(agent for agent in everyone if agent in members)
        resolved[name] = Channel(name=name, purpose=purpose, members=names)
    return resolved


def channel_problems(specs: Iterable[AgentSpec]) -> list[str]:
    """Channel members that are not loaded agents, and one name declared with two purposes."""
    specs = list(specs)
    names = {spec.name for spec in specs}
    purposes: dict[str, str] = {TEAM_CHANNEL.name: TEAM_CHANNEL.purpose}
    problems: list[str] = []
    for spec in specs:
        for channel in spec.channels:
            problems.extend(
                f"{spec.name}: channel {channel.name!r} member {member!r} is not a loaded agent"
                for member in channel.members
                if member != "*" and member not in names
            )
            first = purposes.setdefault(channel.name, channel.purpose)
            if first != channel.purpose:
                problems.append(f"{spec.name}: channel {channel.name!r} is already declared with another purpose")
    return problems


def channels_of(agent: str, channels: Mapping[str, Channel]) -> list[str]:
    """The names of the channels ``agent`` belongs to."""
    return [name for name, channel in channels.items() if channel.includes(agent)]


def format_channel_message(message: memory.ChannelMessage, when: str = "", *, channel: bool = True) -> str:
    """One message as one line: ``#12 [team] tasks, 5 min ago (re #10, pinned; agree 2): text``."""
    head = f"#{message.id}" + (f" [{message.channel}]" if channel else "") + f" {message.agent}"
    if when:
        head += f", {when}"
    notes = []
    if message.reply_to:
        notes.append(f"re #{message.reply_to}")
    if message.pinned:
        notes.append("pinned")
    marks = ", ".join(f"{name} {count}" for name, count in message.reactions.items())
    extra = ", ".join(notes) + ("; " if notes and marks else "") + marks
    return f"{head}{f' ({extra})' if extra else ''}: {message.text}"


# -- the tool ---------------------------------------------------------------------------------


class TeamArgs(BaseModel):
    action: Literal["post", "read", "react", "lesson", "goal", "plan"]
    text: str | None = Field(None, description="react: agree, disagree, important, pin or unpin")
    channel: str | None = None
    id: int | None = Field(None, description="message to reply or react to; goal or plan to update")
    kind: str | None = Field(
        None, description="lesson: success, failure, observation, improvement; goal, plan: active, achieved, done, abandoned"
    )
    importance: Literal["low", "medium", "high"] | None = None
    progress: int | None = None


def _channels(ctx: ToolContext) -> Mapping[str, Channel]:
    channels = ctx.extra.get("channels")
    return channels if isinstance(channels, Mapping) else {TEAM_CHANNEL.name: TEAM_CHANNEL}


def _member_channel(ctx: ToolContext, agent: str, name: str | None) -> str:
    channels = _channels(ctx)
    mine = channels_of(agent, channels)
    chosen = (name or TEAM_CHANNEL.name).strip().lower().lstrip("#")
    if chosen not in mine:
        raise ValueError(f"you are not in a channel {chosen!r}; your channels: {', '.join(mine)}")
    return chosen


def _post(ctx: ToolContext, agent: str, args: TeamArgs) -> str:
    channel = _member_channel(ctx, agent, args.channel)
    if not args.text or not args.text.strip():
        raise ValueError("post needs text")
    posted = memory.post_to_channel(ctx.store, ctx.scope, channel, agent, args.text, reply_to=args.id, now=ctx.now())
    return f"Posted #{posted.id} in {channel}."


def _read(ctx: ToolContext, agent: str, args: TeamArgs) -> str:
    channels = _channels(ctx)
    if args.id is not None and not args.channel:
        found = memory.channel_message(ctx.store, ctx.scope, args.id)
        if found is None or found.channel not in channels_of(agent, channels):
            return f"No message #{args.id} in your channels."
        args = args.model_copy(update={"channel": found.channel})
    channel = _member_channel(ctx, agent, args.channel)
    messages = memory.read_channel(ctx.store, ctx.scope, channel, limit=READ_LIMIT, thread=args.id)
    header = f"Channel {channel}: {channels[channel].purpose}. Your channels: {', '.join(channels_of(agent, channels))}."
    if not messages:
        return f"{header}\nNo messages."
    return "\n".join([header, *(format_channel_message(m, channel=False) for m in messages)])


def _react(ctx: ToolContext, agent: str, args: TeamArgs) -> str:
    mark = (args.text or "").strip().lower()
    if args.id is None:
        raise ValueError("react needs the message id")
    found = memory.channel_message(ctx.store, ctx.scope, args.id)
    if found is None or found.channel not in channels_of(agent, _channels(ctx)):
        return f"No message #{args.id} in your channels."
    if mark in ("pin", "unpin"):
        memory.pin_channel_message(ctx.store, ctx.scope, args.id, pinned=mark == "pin")
        return f"{'Pinned' if mark == 'pin' else 'Unpinned'} #{args.id}."
    if mark not in memory.CHANNEL_REACTIONS:
        raise ValueError("react with text agree, disagree, important, pin or unpin")
    memory.react_to_channel_message(ctx.store, ctx.scope, args.id, agent, mark, now=ctx.now())
    return f"Reacted {mark} to #{args.id}."


def _lesson(ctx: ToolContext, agent: str, args: TeamArgs) -> str:
    if not args.text or not args.text.strip():
        raise ValueError("lesson needs text")
    kind = (args.kind or "observation").strip().lower()
    lesson = memory.add_lesson(
        ctx.store, ctx.scope, agent, args.text, kind=kind, importance=args.importance or "medium", now=ctx.now()
    )
    return f"Lesson #{lesson.id} kept ({lesson.kind}, {lesson.importance})."


def _goal(ctx: ToolContext, agent: str, args: TeamArgs) -> str:
    if args.id is None:
        if not args.text or not args.text.strip():
            raise ValueError("a new goal needs text")
        goal = memory.add_goal(ctx.store, ctx.scope, agent, args.text, progress=args.progress or 0, now=ctx.now())
    else:
        status = args.kind.strip().lower() if args.kind else None
        goal = memory.update_goal(
            ctx.store, ctx.scope, agent, args.id, status=status, progress=args.progress, text=args.text, now=ctx.now()
        )
        if goal is None:
            return f"You have no goal #{args.id}."
    return f"Goal #{goal.id} {goal.status}, {goal.progress}%: {goal.text}"


def _plan(ctx: ToolContext, agent: str, args: TeamArgs) -> str:
    if args.id is None:
        if not args.text or not args.text.strip():
            raise ValueError("a new plan needs text")
        plan = memory.add_plan(ctx.store, ctx.scope, agent, args.text, now=ctx.now())
    else:
        status = args.kind.strip().lower() if args.kind else None
        plan = memory.update_plan(ctx.store, ctx.scope, agent, args.id, status=status, text=args.text, now=ctx.now())
        if plan is None:
            return f"You have no plan #{args.id}."
    return f"Plan #{plan.id} {plan.status}: {plan.text}"


_ACTIONS = {"post": _post, "read": _read, "react": _react, "lesson": _lesson, "goal": _goal, "plan": _plan}


@tool
def team(ctx: ToolContext, args: TeamArgs) -> str:
    """Talk channels (post, read, react) and your own memory (lesson, goal, plan)."""
    if not ctx.agent:
        raise ValueError("the team tool needs the calling agent (the runtime sets it)")
    return _ACTIONS[args.action](ctx, ctx.agent, args)


def agent_tools(spec: AgentSpec, *, with_search: bool = True) -> tuple[Tool, ...]:
    """The tools an agent can run: its own, then the hub's (search_memory, team).

    Which schemas a call is *offered* is the context builder's choice (search_memory and,
    for agents without a channel, team only when the call may need them); a model that
    calls one it was not offered still gets it run: a miss costs a round, never the tool.
    """
    hub: Sequence[Tool] = ((search_memory,) if with_search else ()) + (team,)
    return (*spec.tools, *hub)
