"""``agents-hub facts list|add|forget`` and ``agents-hub forget``: a thin click layer over
:mod:`scopehub.hub.facts` and ``Store.erase``. Mounted by :mod:`scopehub.hub.cli`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from scopehub.hub import facts as facts_lib
from scopehub.hub.cli.options import echo_json, json_option, scope_option, settings_of, store_of
from scopehub.hub.erasure import erase_scope_everywhere
from scopehub.hub.wording import plural
from scopehub.memory import FACT_KINDS, Fact

__all__ = ["facts_group", "forget_command"]


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")


def _as_json(fact: Fact) -> dict[str, Any]:
    return {
        "id": fact.id,
        "text": fact.text,
        "kind": fact.kind,
        "key": fact.key,
        "confidence": fact.confidence,
        "valid_from": _iso(fact.valid_from),
    }


def _line(fact: Fact) -> str:
    when = _iso(fact.valid_from) or ""
    return f"#{fact.id} [{fact.kind}] {fact.text}  ({fact.key or 'no key'}, {fact.confidence}, {when[:10]})"




@click.group("facts")
def facts_group() -> None:
    """The facts kept about a scope and put into every agent call."""


@facts_group.command("list")
@scope_option()
@json_option
@click.pass_context
def list_command(ctx: click.Context, scope: str, as_json: bool) -> None:
    """List the scope's current facts."""
    current = facts_lib.current(store_of(ctx), scope)
    if as_json:
        echo_json([_as_json(fact) for fact in current])
        return
    if not current:
        click.echo(f"no facts kept for {scope}")
    for fact in current:
        click.echo(_line(fact))


@facts_group.command("add")
@scope_option()
@click.argument("text", nargs=-1, required=True)
@click.option("--kind", type=click.Choice(FACT_KINDS), default=None, help="the fact's kind (default: inferred)")
@click.option("--key", default=None, help="subject.attribute, e.g. ram.email (default: inferred)")
@json_option
@click.pass_context
def add_command(ctx: click.Context, scope: str, text: tuple[str, ...], kind: str | None, key: str | None, as_json: bool) -> None:
    """Keep an explicit fact (like /remember); it replaces a fact with the same key."""
    sentence = " ".join(text).strip()
    if not sentence:
        raise click.BadParameter("the fact needs some text", param_hint="TEXT")
    fact = facts_lib.remember(store_of(ctx), scope, sentence, kind=kind, key=key)
    if as_json:
        echo_json(_as_json(fact))
    else:
        click.echo(f"remembered {_line(fact)}")


@facts_group.command("forget")
@scope_option()
@click.argument("target", nargs=-1, required=True)
@json_option
@click.pass_context
def forget_fact_command(ctx: click.Context, scope: str, target: tuple[str, ...], as_json: bool) -> None:
    """Delete facts by id (12 or #12), key or text, with their older versions."""
    gone = facts_lib.forget(store_of(ctx), scope, " ".join(target))
    if as_json:
        echo_json([_as_json(fact) for fact in gone])
        return
    if not gone:
        raise click.ClickException(f"no fact of {scope} matches {' '.join(target)!r}")
    for fact in gone:
        click.echo(f"forgotten #{fact.id} {fact.text}")


@click.command("forget")
@scope_option(required=True, help="the scope to erase: user:<id> or group:<id> (never a default)")
@click.option("--yes", "-y", is_flag=True, help="do not ask for confirmation")
@json_option
@click.pass_context
def forget_command(ctx: click.Context, scope: str, yes: bool, as_json: bool) -> None:
    """Erase everything of a scope: messages, routes, facts and their history, vault,
    tasks, reminders, events, channels, agent memory, digest, search index rows, token
    records and Maildir files; then scrub them from disk (SQLite: secure delete and a
    checkpoint; PostgreSQL: VACUUM, or VACUUM FULL with HUB_PG_ERASE_VACUUM=full).
    """
    store = store_of(ctx)
    if not yes:
        click.confirm(f"Erase everything of {scope} from {store.path}? This cannot be undone", abort=True)
    removed = erase_scope_everywhere(store, settings_of(ctx), scope)
    if as_json:
        echo_json({"scope": scope, "removed": removed})
        return
    names = {"vault": "vault item"}  # else the table's name, singular when it ends in s
    summary = ", ".join(
        plural(count, names.get(table, table[:-1] if table.endswith("s") else table))
        for table, count in removed.items()
        if table != "scopes"
    )
    click.echo(f"erased {scope}: {summary}")
