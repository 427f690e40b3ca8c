"""Replies out: one message or several, retried with a bound, the Telegram id recorded.

:class:`Outbox` is the one way the transport sends text. It splits a reply under
Telegram's limit, sends each chunk on its own (one that fails never loses the rest), has
the reply sender (:mod:`.sender`) record a stored reply's Telegram id right as Telegram
takes it, follows a group that became a supergroup, pauses the reminders of a chat that
blocked the bot, and keeps the "typing…" action up while an agent works.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from telegram import Bot, InlineKeyboardMarkup, Message, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.request import HTTPXRequest

from scopehub.hub.orchestrator import Reply
from scopehub.hub.transports.telegram.delivery import (
    TELEGRAM_LIMIT,
    SendLater,
    call_with_retry,
    retry_after_seconds,
    split_message,
    trim_text,
)
from scopehub.hub.transports.telegram.sender import Record, RecordingSender
from scopehub.hub.transports.telegram.texts import REFUSAL
from scopehub.hub.turns import DeliveryDeferred, is_transient
from scopehub.hub.wording import plural
from scopehub.memory import pause_chat_reminders, resume_chat_reminders

if TYPE_CHECKING:
    from scopehub.hub.transports.telegram.bot import TelegramBot

__all__ = ["SENDER_READ_TIMEOUT", "TYPING_DELAY", "Outbox", "render"]

log = logging.getLogger(__name__)

SENDER_READ_TIMEOUT = 30.0  # seconds the reply sender waits for Telegram's answer (PTB's default: 5)
RECORD_SENT_PATIENCE = 900.0  # seconds a sent reply's Telegram id is retried while the database is away
# Seconds an answer may take before "typing…" is shown (never more than one renewal interval):
# an answer sent sooner replaces the action before anyone sees it, so the request would be
# one more Bot API call per message for nothing.
TYPING_DELAY = 1.0


def render(reply: Reply) -> str:
    """The text to send: an agent's answer carries the agent's name on its first line."""
    if reply.kind == "agent" and reply.agent:
        return f"[{reply.agent}]\n{reply.text}"
    return reply.text


class Outbox:
    """Sending for one :class:`~.bot.TelegramBot`: replies, notes, refusals, the typing action."""

    def __init__(self, transport: TelegramBot) -> None:
        self.transport = transport
        self._refused: set[int] = set()  # chats that got their one refusal
        self._forbidden: set[int] = set()  # chats that answered 403, logged once each
        # Replies of the turns are sent and their Telegram ids recorded on a thread of its own
        # (sender.py: a worker killed between the two sends the reply twice).
        self.sender: RecordingSender | None = None

    @property
    def hub(self) -> Any:
        return self.transport.hub

    # -- the reply sender -----------------------------------------------------------------
    async def start_sender(self, bot: Bot) -> None:
        """Start the reply sender, with a Bot like the application's; without it (it could not
        start) replies are sent from the main loop, as every other message."""
        urls = self.transport.bot_urls

        def make_bot() -> Bot:
            # A read that times out after Telegram took the message is sent again by the
            # retry (at-least-once): wait long for the answer before calling it lost. Nothing
            # else waits on this thread, and the turn's leases keep the claims meanwhile.
            request = HTTPXRequest(connection_pool_size=16, read_timeout=SENDER_READ_TIMEOUT)
            if urls:
                return Bot(bot.token, base_url=urls[0], base_file_url=urls[1], request=request)
            return Bot(bot.token, request=request)

        sender = RecordingSender(make_bot)
        try:
            await asyncio.to_thread(sender.start)
        except Exception as exc:  # the main loop can send replies too
            log.warning("the reply sender did not start (%s); replies are sent from the main loop", exc)
            return
        self.sender = sender

    async def stop_sender(self) -> None:
        if self.sender is not None:
            await self.sender.stop()
            self.sender = None

    # -- replies --------------------------------------------------------------------------
    async def deliver(
        self,
        bot: Bot,
        chat_id: int,
        reply: Reply,
        *,
        reply_to: int | None,
        thread_id: int | None,
        defer_unsent: bool = False,
        into: int | None = None,
        markup: InlineKeyboardMarkup | None = None,
    ) -> list[int]:
        """Send a reply in as many messages as it needs; returns the sent message ids.

        Each chunk is sent on its own, so one that fails never loses the rest. The first
        sent id becomes the stored reply's ext_id (a reply to it routes to this agent).
        ``defer_unsent`` (a stored reply, sent from a scope's turn): when Telegram cannot
        be reached for the first chunk even after the retries, raise
        :class:`DeliveryDeferred` so the message stays owed and the stored reply is sent
        later, rather than dropped. ``into``: the message the answer was streamed into;
        the first chunk is edited into it (sent anew when that fails). ``markup``: buttons
        under the last message.
        """
        sent_ids: list[int] = []
        record = self._reply_record(reply)
        chunks = split_message(render(reply)) or ["(empty reply)"]
        for index, chunk in enumerate(chunks):
            buttons = markup if index == len(chunks) - 1 else None
            if into is not None and not sent_ids:
                edited = await self._edit_into(bot, chat_id, into, chunk, buttons)
                if edited is not None:
                    sent_ids.append(edited)  # its id is recorded below, as for a sent first chunk
                    continue
            sent = await self.send_text(
                bot,
                chat_id,
                chunk,
                reply_to=reply_to if not sent_ids else None,
                thread_id=thread_id,
                what="reply",
                defer=defer_unsent and not sent_ids and reply.reply_id is not None,
                record=record if not sent_ids else None,
                markup=buttons,
            )
            if sent is not None:
                sent_ids.append(sent.message_id)
                chat_id = sent.chat_id  # a migrated group answers from its new id
        if not sent_ids:
            return sent_ids
        # Only the first chunk's id is kept; a reply to a later chunk is traced back to it from
        # the store (reply_target), so every worker resolves it alike. The reply sender has
        # recorded it already unless the database was away for a moment.
        if record is not None and reply.reply_id is not None and not self.took_recorded(record.key):
            await self.record_sent(reply.reply_id, f"{chat_id}:{sent_ids[0]}")
        self.hub.schedule_after_send(reply)
        return sent_ids

    async def _edit_into(
        self, bot: Bot, chat_id: int, message_id: int, text: str, markup: InlineKeyboardMarkup | None = None
    ) -> int | None:
        """Edit a streamed message into the answer's first chunk; its id, or None when it must be sent anew."""
        try:
            await call_with_retry(
                lambda: bot.edit_message_text(text, chat_id=chat_id, message_id=message_id, reply_markup=markup),
                self.transport.retry,
                "final edit",
            )
        except BadRequest as exc:
            if "not modified" in str(exc).lower():
                return message_id
            log.info("could not edit the streamed message %s in %s (%s); sending the answer anew", message_id, chat_id, exc)
            return None
        except TelegramError as exc:
            log.warning("could not edit the streamed message %s in %s (%s); sending the answer anew", message_id, chat_id, exc)
            return None
        return message_id

    def _reply_record(self, reply: Reply) -> Record | None:
        """A stored agent reply records its Telegram id (the first chunk's); None for other replies."""
        reply_id = reply.reply_id
        if reply.kind != "agent" or reply_id is None or not reply.scope:
            return None
        store = self.hub.store
        return Record(("reply", reply_id), lambda sent: store.set_ext_id(reply_id, f"{sent.chat_id}:{sent.message_id}"))

    def took_recorded(self, key: Any) -> bool:
        """Whether the reply sender already wrote the record ``key`` of a message it sent."""
        return self.sender is not None and self.sender.take_recorded(key)

    async def record_sent(self, reply_id: int, ext_id: str) -> None:
        """Record the Telegram id of a sent reply; it also says "sent" to every worker.

        A reply stored without it is sent again by the next holder of the scope's turn (its
        worker died before sending), so while the database is away (a restart, an outage)
        this tries again, for up to :data:`RECORD_SENT_PATIENCE` seconds: the reply is out
        already, and giving up sooner (it was half a claim TTL) sent it a second time after
        every outage longer than that.
        """
        deadline = asyncio.get_running_loop().time() + max(RECORD_SENT_PATIENCE, self.hub.settings.claim_ttl / 2)
        while True:
            try:
                self.hub.store.set_ext_id(reply_id, ext_id)
                return
            except Exception as exc:
                if not is_transient(exc) or asyncio.get_running_loop().time() > deadline:
                    log.exception("could not record Telegram id %s on message %s", ext_id, reply_id)
                    return
                await asyncio.sleep(0.25)

    async def send_text(
        self,
        bot: Bot,
        chat_id: int,
        text: str,
        *,
        reply_to: int | None = None,
        thread_id: int | None = None,
        what: str = "message",
        defer: bool = False,
        record: Record | None = None,
        markup: InlineKeyboardMarkup | None = None,
    ) -> Message | None:
        """Send plain text with bounded retries; None when Telegram would not take it
        (``defer``: raise :class:`DeliveryDeferred` instead when it could not be reached).

        A BadRequest (too long by Telegram's count, a vanished thread...) gets one trimmed
        fallback without reply or thread; ChatMigrated (a group became a supergroup) moves
        the group's memory and is followed once; Forbidden (blocked, removed) pauses the
        chat's reminders. ``record``: what the reply sender writes as soon as Telegram took
        the message (when it runs and ``bot`` is the application's; see :meth:`took_recorded`).
        ``markup``: inline buttons under the message.
        """
        reply_parameters = ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to else None
        sender = self.sender if bot is self.transport._bot else None

        def send() -> Awaitable[Message]:
            options = {"reply_parameters": reply_parameters, "message_thread_id": thread_id, "reply_markup": markup}
            if sender is not None and record is not None:
                return sender.send(record, chat_id, text, **options)
            return bot.send_message(chat_id, text, **options)

        try:
            return await call_with_retry(send, self.transport.retry, f"sending {what} to {chat_id}")
        except ChatMigrated as exc:
            new_chat = int(exc.new_chat_id)
            log.info("chat %s migrated to %s", chat_id, new_chat)
            await self.transport.migrate(chat_id, new_chat)
            return await self.send_text(bot, new_chat, text, thread_id=thread_id, what=what, markup=markup)
        except BadRequest as exc:
            log.warning("Telegram refused %s to %s (%s); sending a trimmed plain fallback", what, chat_id, exc)
            try:
                return await call_with_retry(
                    lambda: bot.send_message(chat_id, trim_text(text, TELEGRAM_LIMIT - 96), reply_markup=markup),
                    self.transport.retry,
                    f"fallback {what}",
                )
            except TelegramError as again:
                log.error("the fallback %s to %s failed too: %s", what, chat_id, again)
                return None
        except Forbidden as exc:
            self.chat_refused(chat_id, exc)
            return None
        except TelegramError as exc:
            # BadRequest is a NetworkError in PTB, but sending it again cannot help.
            if defer and isinstance(exc, RetryAfter):
                delay = retry_after_seconds(exc)
                log.warning("Telegram asks to wait %.0fs before sending %s to %s; it is sent then", delay, what, chat_id)
                raise SendLater(f"{what} to {chat_id} not sent: {exc}", delay) from exc
            if defer and isinstance(exc, NetworkError) and not isinstance(exc, BadRequest):
                log.warning("sending %s to %s failed after retries (%s); it is sent again later", what, chat_id, exc)
                raise DeliveryDeferred(f"{what} to {chat_id} not sent: {exc}") from exc
            log.error("sending %s to %s failed after retries: %s", what, chat_id, exc)
            return None

    # -- chats that refuse us, and people we refuse ------------------------------------------
    def chat_refused(self, chat_id: int, exc: TelegramError) -> None:
        """403: the person blocked the bot or it was removed. Pause the chat's reminders (kept in
        the store, so a restart does not try again), log it once."""
        paused = pause_chat_reminders(self.hub.store, str(chat_id), self.hub.deps.clock())
        if chat_id not in self._forbidden:
            self._forbidden.add(chat_id)
            log.warning(
                "chat %s refuses messages (%s): the bot was blocked or removed; %s paused until it writes again",
                chat_id,
                exc,
                plural(paused, "reminder"),
            )

    def resume_chat(self, chat_id: int) -> int:
        """The store's part of :meth:`chat_is_back` (any thread): the chat's paused reminders resumed; how many."""
        return resume_chat_reminders(self.hub.store, str(chat_id))

    def chat_is_back(self, chat_id: int, *, resumed: int | None = None) -> None:
        """The chat wrote: whatever 403 paused resumes (``resumed``: :meth:`resume_chat` done already, how many)."""
        self._forbidden.discard(chat_id)
        if resumed is None:
            resumed = self.resume_chat(chat_id)
        if resumed:
            log.info("chat %s writes again; %s resumed", chat_id, plural(resumed, "paused reminder"))
            self.transport.reminders.sweep()

    async def refuse_once(self, bot: Bot, chat_id: int, thread_id: int | None) -> None:
        """One polite refusal per chat and process (not one per message)."""
        if chat_id in self._refused:
            return
        self._refused.add(chat_id)
        log.info("refused chat %s (not in HUB_ALLOWED_USERS / HUB_ALLOWED_CHATS)", chat_id)
        await self.send_text(bot, chat_id, REFUSAL, thread_id=thread_id, what="refusal")

    # -- typing ---------------------------------------------------------------------------
    def start_typing(
        self, bot: Bot, chat_id: int, thread_id: int | None, stop: asyncio.Event, *, delay: float = 0.0
    ) -> asyncio.Task[None]:
        """Keep "typing…" up in the chat until ``stop`` is set, from ``delay`` seconds on
        (nothing at all when ``stop`` is set before)."""
        return asyncio.get_running_loop().create_task(self._keep_typing(bot, chat_id, thread_id, stop, delay))

    async def _keep_typing(self, bot: Bot, chat_id: int, thread_id: int | None, stop: asyncio.Event, delay: float = 0.0) -> None:
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
        # Telegram shows the action for about 5 seconds; renew it until the answer is ready.
        while not stop.is_set():
            try:
                await bot.send_chat_action(chat_id, ChatAction.TYPING, message_thread_id=thread_id)
            except TelegramError as exc:
                log.debug("typing action for %s failed: %s", chat_id, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.transport.typing_interval)
