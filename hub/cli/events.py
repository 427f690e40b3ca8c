"""``agents-hub events list|emit``: the scope's event log, for people and scripts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from scopehub.hub.cli.options import echo_json, json_option, scope_option, store_of
from scopehub.memory import (
    Event,
    emit_event,
    event_type,
    events_after,
    expand_event_types,
    recent_events,
    summarize_event,
)

OPERATOR = "operator"  # the console's writes are attributed to it (hub.console.app.OPERATOR)

__all__ = ["events_group"]


def _as_json(event: Event) -> dict[str, Any]:
    return {
        "id": event.id,
        "ts": datetime.fromtimestamp(event.ts, tz=UTC).isoformat(timespec="seconds"),
        "agent": event.agent,
        "target": event.target,
        "type": event.type,
        "payload": event.payload,
        "message_id": event.message_id,
        "summary": summarize_event(event),
    }


@click.group("events")
def events_group() -> None:
    """What the agents did: schema-validated events with one id per event (the cursor)."""


@events_group.command("list")
@scope_option()
@click.option("--agent", "-a", default=None, help="only events this agent emitted")
@click.option("--type", "-t", "types", multiple=True, help="only these types (repeatable; patterns like reminder.* allowed)")
@click.option("--after", type=click.IntRange(0), default=None, help="events with an id above this one, oldest first")
@click.option("--limit", "-n", type=click.IntRange(1, 10_000), default=20, show_default=True, help="how many")
@json_option
@click.pass_context
def list_command(
    ctx: click.Context, scope: str, agent: str | None, types: tuple[str, ...], after: int | None, limit: int, as_json: bool
) -> None:
    """List the scope's events: the newest, or those after an id (with --after)."""
    store = store_of(ctx, must_exist=True)
    if after is not None:
        events = events_after(store, scope, after, limit=limit, types=types or None, agent=agent)
    else:  # the newest, targeted ones too: it is the person's log
        events = recent_events(store, scope, limit=limit, agent=agent, types=types or None)
    if as_json:
        echo_json([_as_json(e) for e in events])
        return
    if not events:
        click.echo(f"no events in {scope}")
        # A plain name no type here has is most often a typo or an agent's name (-t inbox
        # for --agent inbox); kept as a filter all the same: a plugin elsewhere may emit it.
        unknown = [name for name in expand_event_types(types) if event_type(name) is None]
        if unknown:
            click.echo(f"no registered event type is called {', '.join(map(repr, unknown))} (-t takes a type such as task.created; --agent an agent)", err=True)
    for event in events:
        when = datetime.fromtimestamp(event.ts, tz=UTC).strftime("%Y-%m-%d %H:%M")
        target = f" → {event.target}" if event.target else ""
        click.echo(f"#{event.id:<6} {when}  {event.agent}{target}  {event.type:<18} {summarize_event(event)}")


@events_group.command("emit")
@scope_option()
@click.option("--agent", "-a", required=True, help="the emitting agent")
@click.option("--type", "-t", "type_", required=True, help="a registered event type, e.g. task.created")
@click.option("--payload", "-p", required=True, help="the payload as a JSON object")
@click.option("--target", default=None, help="one agent it is for (default: broadcast)")
@json_option
@click.pass_context
def emit_command(ctx: click.Context, scope: str, agent: str, type_: str, payload: str, target: str | None, as_json: bool) -> None:
    """Append one event (validated against its type; a bad payload is refused, naming the field).

    The emitting agent and the target must be agents of this hub (or the console's
    ``operator``): an event from a misspelt name would reach nobody's awareness as meant.
    """
    from scopehub.agents import discover_agents

    known = [*discover_agents().names, OPERATOR]
    for value, hint in ((agent, "--agent"), (target, "--target")):
        if value is not None and value not in known:
            raise click.BadParameter(f"unknown agent {value!r}; agents: {', '.join(known)}", param_hint=hint)
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--payload") from None
    if not isinstance(data, dict):
        raise click.BadParameter("a JSON object, e.g. '{\"title\": \"buy milk\"}'", param_hint="--payload")
    event = emit_event(store_of(ctx), scope, agent, type_, data, target=target)
    if as_json:
        echo_json(_as_json(event))
    else:
        click.echo(f"#{event.id} {event.type}: {summarize_event(event)}")
