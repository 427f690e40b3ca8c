"""Streamed replies: the agent's answer shown while it is written, within Telegram's rate limits.

Two ways, chosen per chat (``HUB_STREAM``):

* ``draft`` (private chats; Bot API 9.3's ``sendMessageDraft``): the text so far is shown
  as an animated draft; the final ``sendMessage`` replaces it. A server that does not know
  the method (a self-hosted Bot API older than 9.3) switches the process to ``edit``.
* ``edit`` (groups, or where drafts are not available): the first text goes out as a
  message, later text edits it, and the final answer is the last edit.

Updates are sent from a task of their own, never from the model's stream: a slow
Telegram never slows the model down. The first one waits :data:`FIRST_DELAY` (at most
``every``) after the first text: an answer written whole by then is sent as it is, with no
draft or placeholder before it that nobody could read in time (two Bot API calls fewer).
They go out at most every ``every`` seconds (1 s
in private chats, 3 s in groups: Telegram allows about 20 messages a minute per group,
and an edit counts), and a 429 pauses them until the time Telegram asked for, skipping
the texts in between. The final answer is always sent or edited in full, whatever was
shown before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from telegram import Bot, ReplyParameters
from telegram.error import BadRequest, RetryAfter, TelegramError

from scopehub.hub.transports.telegram.delivery import TELEGRAM_LIMIT, retry_after_seconds, trim_text

if TYPE_CHECKING:
    from scopehub.hub.transports.telegram.bot import TelegramBot

__all__ = ["DRAFT_EVERY", "FIRST_DELAY", "GROUP_EVERY", "PRIVATE_EVERY", "ReplyStream", "stream_mode"]

log = logging.getLogger(__name__)

DRAFT_EVERY = 0.5  # seconds between draft updates (a draft is not a message)
PRIVATE_EVERY = 1.0  # between edits in a private chat (about one message a second per chat)
GROUP_EVERY = 3.0  # between edits in a group (about 20 a minute per group)
FIRST_DELAY = 0.5  # seconds from the first text to the first update (never more than ``every``)
_TYPING = "…"  # after the text while more is coming


def stream_mode(setting: str, *, private: bool, drafts_work: bool) -> str | None:
    """``"draft"``, ``"edit"`` or None (not streamed) for a chat, from ``HUB_STREAM``."""
    if setting == "off":
        return None
    if setting == "edit" or not private or not drafts_work:
        return "edit"
    return "draft"


class ReplyStream:
    """One answer being streamed into a chat (see the module docstring)."""

    def __init__(
        self,
        transport: TelegramBot,
        bot: Bot,
        chat_id: int,
        *,
        mode: str,
        draft_id: int,
        thread_id: int | None = None,
        reply_to: int | None = None,
        every: float | None = None,
        on_first: asyncio.Event | None = None,
        find_thread: Callable[[], Awaitable[int | None]] | None = None,
    ) -> None:
        self.transport = transport
        self.bot = bot
        self.chat_id = chat_id
        self.mode = mode
        self.draft_id = max(1, draft_id)
        self.thread_id = thread_id
        self.reply_to = reply_to
        self.every = every if every is not None else (DRAFT_EVERY if mode == "draft" else PRIVATE_EVERY if chat_id > 0 else GROUP_EVERY)
        self.first_delay = min(FIRST_DELAY, self.every)
        self.on_first = on_first  # set when the first text shows (the typing action stops)
        self._find_thread = find_thread  # asked once, before the first text is shown
        self.placeholder: int | None = None  # the message the answer is edited into (edit mode)
        self.updates = 0  # drafts sent or edits made
        self._latest = ""
        self._shown = ""
        self._wake = asyncio.Event()
        self._closed = False
        self._broken = False
        self._not_before = 0.0
        self._limited_until = 0.0  # Telegram's 429: nothing goes to this chat before then
        self._task: asyncio.Task[None] | None = None

    async def on_text(self, text: str) -> None:
        """The answer so far (the runtime calls this as the model writes); never waits for Telegram."""
        if self._closed or self._broken:
            return
        self._latest = text
        if self._task is None:
            loop = asyncio.get_running_loop()
            # An answer done within the delay goes out whole, with nothing streamed before it.
            self._not_before = loop.time() + self.first_delay
            self._task = loop.create_task(self._run(), name=f"stream:{self.chat_id}")
        self._wake.set()

    async def close(self) -> None:
        """Stop showing (the final answer is sent next); waits for an update on its way."""
        self._closed = True
        self._wake.set()
        if self._task is not None:
            _, pending = await asyncio.wait([self._task], timeout=10.0)
            for task in pending:
                task.cancel()

    async def wait_allowed(self) -> None:
        """Wait until Telegram's last 429 for this stream has passed (before the final edit)."""
        wait = self._limited_until - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(wait)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed and not self._broken:
            await self._wake.wait()
            self._wake.clear()
            wait = self._not_before - loop.time()
            if wait > 0 and not self._closed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing(), wait)
            if self._closed:
                return
            text = self._latest
            if text and text != self._shown:
                await self._show(text)
                self._not_before = max(self._not_before, loop.time() + self.every)

    async def _closing(self) -> None:
        while not self._closed:
            await self._wake.wait()
            self._wake.clear()

    async def _show(self, text: str) -> None:
        shown = trim_text(text.rstrip() + " " + _TYPING, TELEGRAM_LIMIT)
        if self._find_thread is not None:
            find, self._find_thread = self._find_thread, None
            try:
                self.thread_id = await find() or self.thread_id
            except Exception as exc:  # shown where the message came from then
                log.info("no topic for the answer in %s (%s)", self.chat_id, exc)
        try:
            if self.mode == "draft":
                await self.bot.send_message_draft(self.chat_id, self.draft_id, shown, message_thread_id=self.thread_id)
            elif self.placeholder is None:
                parameters = ReplyParameters(message_id=self.reply_to, allow_sending_without_reply=True) if self.reply_to else None
                sent = await self.bot.send_message(self.chat_id, shown, reply_parameters=parameters, message_thread_id=self.thread_id)
                self.placeholder = sent.message_id
            else:
                await self.bot.edit_message_text(shown, chat_id=self.chat_id, message_id=self.placeholder)
        except RetryAfter as exc:
            delay = retry_after_seconds(exc)
            self._not_before = self._limited_until = asyncio.get_running_loop().time() + delay
            log.info("streaming to %s paused for %.0fs (Telegram's rate limit)", self.chat_id, delay)
            return
        except BadRequest as exc:
            if "not modified" in str(exc).lower():
                self._shown = text
                return
            self._failed(exc)
            return
        except TelegramError as exc:
            self._failed(exc)
            return
        self._shown = text
        self.updates += 1
        if self.on_first is not None:
            self.on_first.set()

    def _failed(self, exc: TelegramError) -> None:
        if self.mode == "draft":
            # An older Bot API server, or a chat where drafts are refused: edits from now on.
            log.info("message drafts are not available (%s); streaming by editing a message instead", exc)
            self.transport.drafts_work = False
            self.mode = "edit"
            self.every = max(self.every, PRIVATE_EVERY)
            self._wake.set()
            return
        log.info("streaming to %s stopped (%s); the answer is sent whole", self.chat_id, exc)
        self._broken = True
