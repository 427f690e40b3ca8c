"""``agents-hub console``: the operator's web console on the store and settings of every command."""

from __future__ import annotations

import click

from scopehub.hub.cli.options import settings_of, store_of

__all__ = ["console_command"]

EXTRA_HINT = "the console needs the 'console' extra: pip install 'scopehub[console]' (Starlette, Jinja2, uvicorn, python-multipart)"


@click.command("console")
@click.option("--listen", default="127.0.0.1", show_default=True, help="address to serve on; any but loopback needs HUB_CONSOLE_TOKEN")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="TCP port")
@click.option("--allow-writes", is_flag=True, help="allow forgetting a fact, cancelling a reminder and erasing a scope")
@click.pass_context
def console_command(ctx: click.Context, listen: str, port: int, allow_writes: bool) -> None:
    """Serve the web console: scopes, each message's route, each call's exact context,
    token savings and routing charts, each scope's memory. Read-only by default.

    With HUB_CONSOLE_TOKEN set, every request needs it (Authorization: Bearer <token>, or
    open /?token=<token> once: an HttpOnly cookie keeps it).
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
    app = create_app(ConsoleConfig(store=store, settings=settings, allow_writes=allow_writes))
    host = f"[{listen}]" if ":" in listen else listen
    access = "token required" if settings.console_token else "loopback only, no token"
    click.echo(f"console on http://{host}:{port}/ ({'writes allowed' if allow_writes else 'read-only'}, {access}); Ctrl-C stops it", err=True)
    uvicorn.run(app, host=listen, port=port, log_level=settings.log_level.lower(), access_log=False, server_header=False)
