"""``agents-hub telegram``: run the bot with long polling or a webhook."""

from __future__ import annotations

import logging
import re
from urllib.parse import urlparse

import click

from scopehub.hub.cli.options import settings_of, store_of
from scopehub.hub.errors import ConfigError

__all__ = ["telegram_command"]

log = logging.getLogger(__name__)

_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")


@click.group("telegram", invoke_without_command=True)
@click.option("--webhook-url", default=None, help="public HTTPS URL Telegram posts updates to (default: long polling)")
@click.option("--listen", default="0.0.0.0", show_default=True, help="address the webhook server binds")
@click.option("--port", default=8443, show_default=True, type=click.IntRange(1, 65535), help="port the webhook server binds")
@click.option("--url-path", default=None, help="local path of the webhook (default: the path of --webhook-url)")
@click.option(
    "--secret-token",
    envvar="TELEGRAM_WEBHOOK_SECRET",
    default=None,
    help=(
        "secret Telegram sends with every webhook request (env TELEGRAM_WEBHOOK_SECRET); "
        "default: one the deployment's first worker makes and keeps in the database"
    ),
)
@click.option(
    "--no-set-webhook",
    is_flag=True,
    help="do not register --webhook-url with Telegram at start (another worker or a deploy step does)",
)
@click.pass_context
def telegram_command(
    ctx: click.Context,
    webhook_url: str | None,
    listen: str,
    port: int,
    url_path: str | None,
    secret_token: str | None,
    no_set_webhook: bool,
) -> None:
    """Run the Telegram bot (long polling, or a webhook with --webhook-url).

    With --webhook-url it is one stateless worker: run as many as you like, on one host or
    several, behind a reverse proxy and on one PostgreSQL database (HUB_DB=postgresql://...).
    Each update is answered once, each chat's messages in order, each reminder fired once.
    `agents-hub telegram invite` makes an invite code for a closed bot.
    """
    if ctx.invoked_subcommand is not None:
        return
    from scopehub.hub.app import build_hub
    from scopehub.hub.transports.telegram import ALLOWED_UPDATES, build_application

    settings = settings_of(ctx)
    secret_token = secret_token or settings.telegram_webhook_secret or None  # .env counts too
    if not settings.telegram_bot_token:
        raise ConfigError("TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and put its token in the environment or .env")
    if webhook_url is None and (url_path or secret_token):
        raise click.UsageError("--url-path and --secret-token need --webhook-url")
    if webhook_url is not None and urlparse(webhook_url).scheme not in ("https", "http"):
        raise click.BadParameter("expected an https:// URL", param_hint="--webhook-url")
    if secret_token is not None and not _SECRET_RE.match(secret_token):
        raise click.BadParameter("1-256 characters of A-Z, a-z, 0-9, _ and -", param_hint="--secret-token")
    # One line per failure (tracebacks at DEBUG); httpx logs every request URL at INFO, and
    # the URL carries the bot token; litellm writes its INFO lines to stdout.
    from scopehub.hub.transports.telegram.logs import install_quiet_logs

    install_quiet_logs(settings.log_level)
    hub = build_hub(settings, store=store_of(ctx), model_required=True)
    application = build_application(hub, settings, watch_maildir=True)
    updates = list(ALLOWED_UPDATES)  # messages, edits (they correct the stored text) and reactions (feedback)
    if webhook_url is None:
        log.info("starting the Telegram bot with long polling")
        application.run_polling(allowed_updates=updates)
        return
    path = url_path if url_path is not None else urlparse(webhook_url).path.lstrip("/")
    log.info("starting the Telegram bot with a webhook on %s:%s/%s", listen, port, path)
    # Our own server, not PTB's: "received" only once the update is stored, so several
    # workers behind a reverse proxy can be killed and restarted without losing one.
    from scopehub.hub.transports.telegram.webhook import run_webhook

    run_webhook(
        application,
        listen=listen,
        port=port,
        url_path=path,
        webhook_url=None if no_set_webhook else webhook_url,
        secret_token=secret_token,
        allowed_updates=updates,
    )


@telegram_command.command("invite")
@click.option("--uses", default=1, show_default=True, type=click.IntRange(1, 10_000), help="how many people the code lets in")
@click.option("--days", default=7.0, show_default=True, type=click.FloatRange(min=0.01), help="how long the code lasts")
@click.option("--note", default="", help="who it is for (kept with the code)")
@click.option("--bot-username", default=None, help="the bot's @username, for the t.me link (default: the code only)")
@click.pass_context
def invite_command(ctx: click.Context, uses: int, days: float, note: str, bot_username: str | None) -> None:
    """Make an invite code for a closed bot (HUB_ALLOWED_USERS / HUB_ALLOWED_CHATS set).

    Whoever sends the bot /start <code> (or opens the printed link) is let in. Prints the
    code, then the link.
    """
    import time

    from scopehub.hub.transports.telegram.access import invite_link, make_invite_code
    from scopehub.memory import create_invite

    settings = settings_of(ctx)
    if not (settings.allowed_user_ids or settings.allowed_chat_ids):
        raise click.ClickException("the bot is open to everyone (HUB_ALLOWED_USERS and HUB_ALLOWED_CHATS are empty): nobody needs an invite")
    now = time.time()
    code = make_invite_code()
    create_invite(store_of(ctx), code, uses=uses, expires=now + days * 86400, note=note, created_by="cli", now=now)
    click.echo(code)
    click.echo(invite_link(bot_username.lstrip("@") if bot_username else None, code))
