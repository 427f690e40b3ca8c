"""Telegram: python-telegram-bot in front of the hub (:mod:`.bot`), with delivery and
ordering (:mod:`.delivery`) and reminders (:mod:`.reminders`)."""

from scopehub.hub.transports.telegram.bot import (
    ALLOWED_UPDATES,
    APOLOGY,
    APOLOGY_SAVED,
    BOT_DATA_KEY,
    CANT_READ,
    CONFIRM_FORGET_ALL,
    DOCUMENT_SAVED,
    HUB_COMMANDS,
    NOT_ADMIN,
    REFUSAL,
    TelegramBot,
    build_application,
    strip_mention,
)
from scopehub.hub.transports.telegram.delivery import (
    TELEGRAM_LIMIT,
    RetryPolicy,
    ScopeOrderedProcessor,
    call_with_retry,
    is_allowed,
    scope_for,
    split_message,
)
from scopehub.hub.transports.telegram.reminders import REMINDER_PREFIX, ReminderScheduler

__all__ = [
    "ALLOWED_UPDATES",
    "APOLOGY",
    "APOLOGY_SAVED",
    "BOT_DATA_KEY",
    "CANT_READ",
    "CONFIRM_FORGET_ALL",
    "DOCUMENT_SAVED",
    "HUB_COMMANDS",
    "NOT_ADMIN",
    "REFUSAL",
    "REMINDER_PREFIX",
    "TELEGRAM_LIMIT",
    "ReminderScheduler",
    "RetryPolicy",
    "ScopeOrderedProcessor",
    "TelegramBot",
    "build_application",
    "call_with_retry",
    "is_allowed",
    "scope_for",
    "split_message",
    "strip_mention",
]
