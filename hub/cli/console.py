"""``agents-hub console``: the operator's web console on the store and settings of every command."""

from __future__ import annotations

import click

from scopehub.hub.cli.options import settings_of, store_of

__all__ = ["console_command"]

EXTRA_HINT = "the console needs the 'console' extra: pip install 'scopehub[console]' (Starlette, Jinja2, uvicorn, python-multipart)"


@click.command("console")
@click.option("--listen", default="127.0.0.1", show_default=True, help="address to serve on; any but loopback needs HUB_CONSOLE_TOKEN")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="TCP port")
@click.option(
    "--allow-writes",
    is_flag=True,
    help="allow correcting, adding and forgetting facts, cancelling reminders, erasing scopes, replaying a message and the sandbox chat",
)
@click.option(
    "--session-hours", default=12.0, show_default=True, type=click.FloatRange(0.05, 24 * 30), help="how long a login lasts"
)
@click.pass_context
def console_command(ctx: click.Context, listen: str, port: int, allow_writes: bool, session_hours: float) -> None:
    """Serve the web console: find (search, filters, jumps), follow (messages, replies and
    calls linked both ways), read (each call's exact context, tool loop and failure, each
    scope's memory, charts) and, with --allow-writes, fix. Read-only by default.

    With HUB_CONSOLE_TOKEN set (16 characters at least), every request needs it: log in at
    /login (a signed session cookie, never the token, keeps it for --session-hours), or
    send Authorization: Bearer <token>.
    """
    import importlib.util

    missing = [name for name in ("starlette", "jinja2", "uvicorn", "python_multipart") if importlib.util.find_spec(name) is None]
    if missing:
        raise click.ClickException(f"{EXTRA_HINT}; missing: {', '.join(missing)}")
    import uvicorn

    from scopehub.hub.console import ConsoleConfig, ConsoleRefused, check_listen, create_app

    settings = settings_of(ctx)
    try:
        check_listen(listen, settings.console_token)
    except ConsoleRefused as exc:
        raise click.ClickException(str(exc)) from None
    store = store_of(ctx, must_exist=True)

    def hub_factory() -> object:
        # Built on first need (a replay, the sandbox): the agents, the router and the model.
        from scopehub.hub.app import build_hub

        return build_hub(settings, store=store, model_required=False)

    config = ConsoleConfig(store=store, settings=settings, allow_writes=allow_writes, session_hours=session_hours, hub_factory=hub_factory)
    app = create_app(config)
    host = f"[{listen}]" if ":" in listen else listen
    access = "token required" if settings.console_token else "loopback only, no token"
    click.echo(f"console on http://{host}:{port}/ ({'writes allowed' if allow_writes else 'read-only'}, {access}); Ctrl-C stops it", err=True)
    uvicorn.run(app, host=listen, port=port, log_level=settings.log_level.lower(), access_log=False, server_header=False)
