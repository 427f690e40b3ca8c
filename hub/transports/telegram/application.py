"""Building the PTB ``Application`` around a hub: the bot, its handlers, its update processor."""

from __future__ import annotations

from typing import Any

from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    MessageHandler,
    MessageReactionHandler,
    filters,
)
from telegram.request import HTTPXRequest

from scopehub.hub.errors import ConfigError
from scopehub.hub.orchestrator import Hub
from scopehub.hub.settings import Settings
from scopehub.hub.transports.telegram.bot import BOT_DATA_KEY, TelegramBot
from scopehub.hub.transports.telegram.delivery import (
    RetryPolicy,
    ScopeOrderedProcessor,
    bot_url,
    file_url,
)
from scopehub.hub.transports.telegram.guard import GuardedBot, UnreadableUpdateHandler

__all__ = ["build_application"]


def build_application(
    hub: Hub,
    settings: Settings,
    *,
    token: str | None = None,
    base_url: str | None = None,
    retry: RetryPolicy | None = None,
    typing_interval: float = 4.0,
    typing_delay: float | None = None,
    reminder_interval: float = 20.0,
    max_active: int | None = None,
    watch_maildir: bool = False,
    stream_every: float | None = None,
) -> Application[Any, Any, Any, Any, Any, Any]:
    """A configured PTB Application around ``hub`` (not initialised, not running).

    ``run_polling``/``run_webhook`` call its post_init (commands, reminder sweep) and
    post_stop; a caller driving it by hand calls them around ``start``/``stop``.
    """
    token = token or settings.telegram_bot_token
    if max_active is None:  # chats answered at once (HUB_TURN_SLOTS)
        max_active = settings.turn_slots
    if not token:
        raise ConfigError("TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and put its token in the environment or .env")
    base_url = base_url if base_url is not None else settings.telegram_base_url
    transport = TelegramBot(
        hub,
        settings,
        retry=retry,
        typing_interval=typing_interval,
        typing_delay=typing_delay,
        reminder_interval=reminder_interval,
        watch_maildir=watch_maildir,
        max_turns=max_active,
        stream_every=stream_every,
    )
    urls: dict[str, str] = {}
    if base_url:
        urls = {"base_url": bot_url(base_url), "base_file_url": file_url(base_url)}
        transport.bot_urls = (urls["base_url"], urls["base_file_url"])
    # PTB's own pool sizes: 256 connections for calls, one for getUpdates.
    bot = GuardedBot(
        token,
        request=HTTPXRequest(connection_pool_size=256),
        get_updates_request=HTTPXRequest(connection_pool_size=1),
        **urls,
    )
    application = (
        ApplicationBuilder()
        .bot(bot)
        .concurrent_updates(ScopeOrderedProcessor(max_active=max_active))
        .post_init(transport.post_init)
        .post_stop(transport.post_stop)
        .build()
    )
    if application.job_queue is None:
        raise ConfigError("reminders need python-telegram-bot's job queue: pip install 'python-telegram-bot[job-queue]'")
    application.bot_data[BOT_DATA_KEY] = transport
    chats = filters.ChatType.PRIVATE | filters.ChatType.GROUPS
    updates = transport.updates
    application.add_handler(UnreadableUpdateHandler(updates.on_unreadable))
    application.add_handler(MessageHandler(filters.StatusUpdate.MIGRATE, updates.on_migrate))
    application.add_handler(MessageHandler(filters.UpdateType.MESSAGE & chats & ~filters.StatusUpdate.ALL, transport.inbox.on_text))
    application.add_handler(MessageHandler(filters.UpdateType.EDITED_MESSAGE & chats, updates.on_edit))
    application.add_handler(MessageReactionHandler(updates.on_reaction))
    application.add_handler(CallbackQueryHandler(transport.buttons.on_press))
    application.add_error_handler(updates.on_error)
    return application
