"""What every command shares: the settings, the store of ``--db``, the hub, and the
``--scope`` and ``--json`` options. One way to open the store for every command.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import click

from scopehub.hub.settings import Settings, load_settings
from scopehub.hub.transports.terminal import DEFAULT_SCOPE
from scopehub.memory import InvalidScope, Store, open_store, validate_scope

if TYPE_CHECKING:
    from scopehub.hub.orchestrator import Hub

__all__ = ["DEFAULT_SCOPE", "echo_json", "hub_of", "json_option", "scope_option", "settings_of", "store_of"]


def settings_of(ctx: click.Context) -> Settings:
    """The settings of this invocation (environment, .env, then the root ``--db``)."""
    obj = ctx.find_root().ensure_object(dict)
    if "settings" not in obj:
        overrides: dict[str, Any] = {}
        if obj.get("db"):
            overrides["db"] = obj["db"]
        obj["settings"] = load_settings(**overrides)
        logging.basicConfig(level=obj["settings"].log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        from scopehub.hub.cli.faults import FaultLineFormatter

        for handler in logging.getLogger().handlers:  # a fault survived is one line, not a stack
            if type(handler.formatter) is logging.Formatter:
                handler.setFormatter(FaultLineFormatter(handler.formatter._fmt))
    return obj["settings"]


def store_of(ctx: click.Context, *, must_exist: bool = False) -> Store:
    """The store of ``--db`` (or ``HUB_DB``), opened once per invocation and closed at its end.

    Read-only commands pass ``must_exist`` so that a mistyped path is an error, not a new
    empty database.
    """
    root = ctx.find_root()
    obj = root.ensure_object(dict)
    if obj.get("store") is None:
        settings = settings_of(ctx)
        obj["store"] = open_store(settings.db, must_exist=must_exist, pg_erase_vacuum=settings.pg_erase_vacuum, pg_lock_timeout=settings.pg_lock_timeout)
        root.call_on_close(obj["store"].close)
    return obj["store"]


def hub_of(ctx: click.Context, *, model_required: bool = False, must_exist: bool = False) -> Hub:
    """The same hub every transport runs, on this invocation's store."""
    from scopehub.hub.app import build_hub

    return build_hub(settings_of(ctx), store=store_of(ctx, must_exist=must_exist), model_required=model_required)


def _check_scope(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return validate_scope(value)
    except InvalidScope as exc:
        raise click.BadParameter(str(exc)) from None


def scope_option(*, required: bool = False, every_scope: bool = False, help: str | None = None):
    """``--scope/-s``, validated: ``user:<id>`` (one customer) or ``group:<id>`` (one group).

    Defaults to the terminal chat's scope (:data:`DEFAULT_SCOPE`), so that what a newcomer
    typed in ``agents-hub chat`` is what ``facts list`` and ``search`` show. A command that
    erases a scope passes ``required=True``: the scope must then be named. A command that
    looks at every scope unless told one (``agents-hub claims``) passes ``every_scope=True``:
    no scope given is None.
    """
    options: dict[str, Any]
    if required:
        options = {"required": True}
    elif every_scope:
        options = {}
    else:
        options = {"default": DEFAULT_SCOPE, "show_default": True}
    # No `default=None` for a required option: click 8.3+ takes an explicit None as a value
    # given, and the command would run on scope None.
    return click.option(
        "--scope",
        "-s",
        callback=_check_scope,
        help=help or "user:<id> (one customer) or group:<id> (one group)",
        **options,
    )


json_option = click.option("--json", "as_json", is_flag=True, help="machine-readable output")


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON, non-ASCII kept readable."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))
