"""Getting updates in and replies out: scopes and access, splitting under Telegram's limit,
bounded retries (RetryAfter honoured), and per-scope ordering of updates.
"""

from __future__ import annotations

import asyncio
import logging
import random
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from telegram import Update
from telegram.constants import ChatType
from telegram.error import (
    BadRequest,
    NetworkError,
    RetryAfter,
)
from telegram.ext import (
    BaseUpdateProcessor,
)

from scopehub.hub.settings import Settings
from scopehub.hub.turns import DeliveryDeferred

log = logging.getLogger(__name__)


TELEGRAM_LIMIT = 4096  # characters per message, counted in UTF-16 code units


T = TypeVar("T")


def scope_for(chat_type: str, chat_id: int, user_id: int | None) -> str:
    """``user:<id>`` for a private chat (the customer's memory), ``group:<chat id>`` otherwise."""
    if chat_type == ChatType.PRIVATE:
        return f"user:{user_id if user_id is not None else chat_id}"
    return f"group:{chat_id}"


def chat_of(scope: str) -> int:
    """The Telegram chat of a scope: a private chat's id is its user's id; a group's is in its scope."""
    return int(scope.split(":", 1)[1])


def message_number(ext_id: str | None) -> int | None:
    """The Telegram message id in an ext id ``"<chat id>:<message id>"`` (None for another form)."""
    if not ext_id or ":" not in ext_id:
        return None
    number = ext_id.rsplit(":", 1)[1]
    return int(number) if number.isdigit() else None


def is_allowed(settings: Settings, user_id: int | None, chat_id: int) -> bool:
    """Both lists empty: everyone. Otherwise the sender or the chat must be listed."""
    users, chats = settings.allowed_user_ids, settings.allowed_chat_ids
    if not users and not chats:
        return True
    return (user_id is not None and user_id in users) or chat_id in chats


def _utf16_units(char: str) -> int:
    return 2 if ord(char) > 0xFFFF else 1


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _fit(text: str, limit: int) -> int:
    """The longest prefix length (in characters) of ``text`` within ``limit`` UTF-16 units."""
    units = 0
    for index, char in enumerate(text):
        units += _utf16_units(char)
        if units > limit:
            return index
    return len(text)


def split_message(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` UTF-16 units, in order.

    Cuts at the last paragraph break that keeps a chunk at least half full, else a line
    break, else a space, else hard. Only the whitespace at a cut is dropped.
    """
    if limit < 2:
        raise ValueError("limit must be at least 2")
    text = text.strip()
    chunks: list[str] = []
    while text and _utf16_len(text) > limit:
        cut = _fit(text, limit)
        window = text[:cut]
        for separator in ("\n\n", "\n", " "):
            at = window.rfind(separator)
            if at >= cut // 2:
                head, rest = text[:at], text[at + len(separator) :]
                break
        else:  # one long word: cut hard
            head, rest = window, text[cut:]
        head = head.rstrip()
        if head:
            chunks.append(head)
        text = rest.lstrip()
    if text:
        chunks.append(text)
    return chunks


def trim_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` UTF-16 units with a visible mark when cut."""
    if _utf16_len(text) <= limit:
        return text
    mark = "\n[…trimmed]"
    return text[: _fit(text, limit - len(mark))].rstrip() + mark


def bot_url(base_url: str) -> str:
    """PTB wants ``<server>/bot`` (it appends the token); accept the server root too."""
    base = base_url.rstrip("/")
    if "{token}" in base or base.endswith("/bot"):
        return base
    return base + "/bot"


def file_url(base_url: str) -> str:
    base = bot_url(base_url)
    if "{token}" in base:
        return base.replace("/bot{token}", "/file/bot{token}")
    return base[: -len("/bot")] + "/file/bot"


def _retry_after_seconds(exc: RetryAfter) -> float:
    # PTB 22 warns when reading retry_after as an int; both forms are accepted here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = exc.retry_after
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


# -- retries ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries of Bot API calls: RetryAfter waits exactly as told, network errors back off.

    A RetryAfter longer than ``max_wait`` is raised instead of waited for: a stored reply
    is then sent again at exactly the time Telegram asked for (:class:`SendLater`).
    """

    attempts: int = 4
    max_wait: float = 600.0
    backoff: float = 0.5
    max_backoff: float = 8.0

    def delay(self, attempt: int) -> float:
        """Exponential backoff with jitter for network errors (attempt counts from 1)."""
        return min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * (0.75 + random.random() / 2)


class SendLater(DeliveryDeferred):
    """A stored reply Telegram asked to send only ``retry_after`` seconds from now (a long 429):
    its message stays owed, and the scope's turn runs again at that time."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_seconds(exc: RetryAfter) -> float:
    """How long Telegram asked to wait, in seconds."""
    return _retry_after_seconds(exc)


async def call_with_retry(call: Callable[[], Awaitable[T]], policy: RetryPolicy, what: str = "request") -> T:
    """Run a Bot API call, retrying RetryAfter and network errors up to ``policy.attempts``.

    BadRequest is a NetworkError subclass in PTB but retrying it cannot help, so it (and
    every other TelegramError) is raised at once.
    """
    attempt = 1
    while True:
        try:
            return await call()
        except RetryAfter as exc:
            delay = _retry_after_seconds(exc)
            if attempt >= policy.attempts or delay > policy.max_wait:
                raise
            log.warning("%s: rate limited by Telegram; retrying in %.1fs", what, delay)
        except BadRequest:
            raise
        except NetworkError as exc:  # TimedOut included
            if attempt >= policy.attempts:
                raise
            delay = policy.delay(attempt)
            log.warning("%s: %s; retrying in %.1fs", what, type(exc).__name__, delay)
        await asyncio.sleep(delay)
        attempt += 1


# -- ordering -----------------------------------------------------------------------------


def _order_key(update: object) -> str | None:
    if not isinstance(update, Update) or update.effective_chat is None:
        return None
    chat = update.effective_chat
    user = update.effective_user
    return scope_for(chat.type, chat.id, user.id if user else None)


class ScopeOrderedProcessor(BaseUpdateProcessor):
    """Updates of one scope one after another in arrival order; different scopes concurrently.

    PTB's ``concurrent_updates=True`` runs every update as its own task and does not keep
    the order within a chat (the whole handler, reply sending included, must not
    overtake the previous one). The order is fixed when an update enters
    :meth:`do_process_update`, which PTB does in arrival order, before any wait. Waiting
    updates hold no slot of ``max_active``, so a busy chat cannot starve the others.
    """

    def __init__(self, max_active: int = 32, max_queued: int = 4096) -> None:
        # PTB's own semaphore only bounds queued updates; ours bounds the working ones.
        super().__init__(max_concurrent_updates=max_queued)
        self.max_active = max_active
        self._active: asyncio.Semaphore | None = None
        self._tails: dict[str, asyncio.Event] = {}

    async def initialize(self) -> None:
        self._active = asyncio.Semaphore(self.max_active)

    async def shutdown(self) -> None:
        self._tails.clear()

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        if self._active is None:
            self._active = asyncio.Semaphore(self.max_active)
        key = _order_key(update)
        previous = self._tails.get(key) if key is not None else None
        mine = asyncio.Event()
        if key is not None:
            self._tails[key] = mine
        started = False
        try:
            if previous is not None:
                await previous.wait()  # an Event: cancelling us never cancels the others
            async with self._active:
                started = True
                await coroutine
        finally:
            if not started and hasattr(coroutine, "close"):
                coroutine.close()  # cancelled while queued: no "never awaited" warning
            mine.set()
            if key is not None and self._tails.get(key) is mine:
                del self._tails[key]

