"""``agents-hub facts list|add|forget`` and ``agents-hub forget``: a thin click layer over
:mod:`hub.facts` and :meth:`memory.Store.erase`. Mounted by :mod:`hub.cli`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from scopehub.memory import FACT_KINDS, Fact, InvalidScope, Store, validate_scope

from . import facts as facts_lib
from .settings import load_settings

__all__ = ["facts_group", "forget_command"]


def _open_store(ctx: click.Context) -> Store:
    """The store of the root command's ``--db`` (or HUB_DB), shared by the invocation."""
    root = ctx.find_root()
    obj = root.ensure_object(dict)
    if obj.get("store") is None:
        settings = obj.get("settings")
        if settings is None:
            settings = load_settings(**({"db": obj["db"]} if obj.get("db") else {}))
            obj["settings"] = settings
        obj["store"] = Store(Path(settings.db))
        root.call_on_close(obj["store"].close)
    return obj["store"]


def _scope(value: str) -> str:
    try:
        return validate_scope(value)
    except InvalidScope as exc:
        raise click.BadParameter(str(exc), param_hint="--scope") from None


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


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def _line(fact: Fact) -> str:
    when = _iso(fact.valid_from) or ""
    return f"#{fact.id} [{fact.kind}] {fact.text}  ({fact.key or 'no key'}, {fact.confidence}, {when[:10]})"


scope_option = click.option("--scope", "-s", required=True, help="user:<id> (one customer) or group:<id> (one group)")
json_option = click.option("--json", "as_json", is_flag=True, help="machine-readable output")


@click.group("facts")
def facts_group() -> None:
    """The facts kept about a scope and put into every agent call."""


@facts_group.command("list")
@scope_option
@json_option
@click.pass_context
def list_command(ctx: click.Context, scope: str, as_json: bool) -> None:
    """List the scope's current facts."""
    current = facts_lib.current(_open_store(ctx), _scope(scope))
    if as_json:
        _echo_json([_as_json(fact) for fact in current])
        return
    if not current:
        click.echo(f"no facts kept for {scope}")
    for fact in current:
        click.echo(_line(fact))


@facts_group.command("add")
@scope_option
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
    fact = facts_lib.remember(_open_store(ctx), _scope(scope), sentence, kind=kind, key=key)
    if as_json:
        _echo_json(_as_json(fact))
    else:
        click.echo(f"remembered {_line(fact)}")


@facts_group.command("forget")
@scope_option
@click.argument("target", nargs=-1, required=True)
@json_option
@click.pass_context
def forget_fact_command(ctx: click.Context, scope: str, target: tuple[str, ...], as_json: bool) -> None:
    """Delete facts by id (12 or #12), key or text, with their older versions."""
    gone = facts_lib.forget(_open_store(ctx), _scope(scope), " ".join(target))
    if as_json:
        _echo_json([_as_json(fact) for fact in gone])
        return
    if not gone:
        raise click.ClickException(f"no fact of {scope} matches {' '.join(target)!r}")
    for fact in gone:
        click.echo(f"forgotten #{fact.id} {fact.text}")


@click.command("forget")
@scope_option
@click.option("--yes", "-y", is_flag=True, help="do not ask for confirmation")
@json_option
@click.pass_context
def forget_command(ctx: click.Context, scope: str, yes: bool, as_json: bool) -> None:
    """Erase everything of a scope: messages, routes, facts and their history, vault,
    tasks, reminders, search index rows and token records, and scrub them from the file.
    """
    scope = _scope(scope)
    store = _open_store(ctx)
    if not yes:
        click.confirm(f"Erase everything of {scope} from {store.path}? This cannot be undone", abort=True)
    removed = store.erase(scope)
    if as_json:
        _echo_json({"scope": scope, "removed": removed})
        return
    summary = ", ".join(f"{count} {table}" for table, count in removed.items() if table != "scopes")
    click.echo(f"erased {scope}: {summary}")
