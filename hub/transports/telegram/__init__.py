"""Telegram: python-telegram-bot in front of the hub.

:func:`build_application` (:mod:`.application`) makes the PTB Application around a
:class:`TelegramBot` (:mod:`.bot`), whose parts handle messages in (:mod:`.inbox`),
answers in order (:mod:`.answers`), replies out (:mod:`.outbox`), the other updates
(:mod:`.updates`), group administrators (:mod:`.groups`) and reminders
(:mod:`.reminders`); :mod:`.delivery` holds scopes, access, splitting, retries and the
update order, :mod:`.webhook` the webhook worker's server.
"""

from scopehub.hub.transports.telegram.application import build_application
from scopehub.hub.transports.telegram.bot import ALLOWED_UPDATES, BOT_DATA_KEY, TelegramBot
from scopehub.hub.transports.telegram.delivery import (
    TELEGRAM_LIMIT,
    RetryPolicy,
    ScopeOrderedProcessor,
    call_with_retry,
    is_allowed,
    scope_for,
    split_message,
)
from scopehub.hub.transports.telegram.inbox import strip_mention
from scopehub.hub.transports.telegram.reminders import REMINDER_PREFIX, ReminderScheduler
from scopehub.hub.transports.telegram.texts import (
    APOLOGY,
    APOLOGY_SAVED,
    CANT_READ,
    CONFIRM_FORGET_ALL,
    CONFIRM_FORGET_ALL_PRIVATE,
    DOCUMENT_SAVED,
    DOCUMENT_UNREADABLE,
    HUB_COMMANDS,
    NOT_ADMIN,
    NOT_ADMIN_FOR,
    REFUSAL,
)

__all__ = [
    "ALLOWED_UPDATES",
    "APOLOGY",
    "APOLOGY_SAVED",
    "BOT_DATA_KEY",
    "CANT_READ",
    "CONFIRM_FORGET_ALL",
    "CONFIRM_FORGET_ALL_PRIVATE",
    "DOCUMENT_SAVED",
    "DOCUMENT_UNREADABLE",
    "HUB_COMMANDS",
    "NOT_ADMIN",
    "NOT_ADMIN_FOR",
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
