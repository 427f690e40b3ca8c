"""Answers: each scope's owed messages, in order, by whichever worker holds the scope's turn.

A message handler stores the message and marks it owed (:meth:`.inbox.Inbox.accept`);
:class:`Answers` works the scope's turn (:mod:`scopehub.hub.turns`): it asks the hub for
each owed message's answer, keeps "typing…" up meanwhile, and sends the reply. A reply
stored but never sent (its worker died in between) is sent, not answered again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from telegram.ext import ContextTypes

from scopehub.hub.dbwork import in_db_thread
from scopehub.hub.orchestrator import Reply
from scopehub.hub.transports.telegram.delivery import (
    SendLater,
    chat_of,
    message_number,
    split_message,
)
from scopehub.hub.transports.telegram.outbox import render
from scopehub.hub.transports.telegram.texts import APOLOGY_SAVED
from scopehub.hub.turns import Owed, ScopeTurns, is_transient

if TYPE_CHECKING:
    from scopehub.hub.transports.telegram.bot import TelegramBot

__all__ = ["Answers"]

log = logging.getLogger(__name__)


class Answers:
    """The scope turns of one :class:`~.bot.TelegramBot` and the work each owed message takes."""

    def __init__(self, transport: TelegramBot, max_turns: int = 32) -> None:
        self.transport = transport
        hub = transport.hub
        self.turns = ScopeTurns(
            hub.store, hub.holder, self.work_owed, ttl=hub.settings.claim_ttl, clock=hub.deps.clock, read=self._owed_state
        )
        # Forum topics of messages this process accepted (message id -> thread id, bounded):
        # the reply goes to the topic; a message accepted by another worker is answered as a
        # reply to it, which Telegram puts in the same topic.
        self.threads: OrderedDict[int, int] = OrderedDict()
        self._turn_tasks: set[asyncio.Task[Any]] = set()
        # Chats answered at once by this worker's webhook: more would only slow each one
        # down (one event loop) until a turn outlives its claim. A chat waiting for a slot
        # has not taken its turn yet, so another worker's sweep may answer it meanwhile.
        self._turn_slots = asyncio.Semaphore(max_turns)
        self._later: set[asyncio.TimerHandle] = set()  # turns to run again when Telegram said so

    def note_thread(self, message_id: int, thread_id: int) -> None:
        """Remember the forum topic a stored message came from (its reply goes there)."""
        self.threads[message_id] = thread_id
        while len(self.threads) > 10_000:
            self.threads.popitem(last=False)

    def start_turn_later(self, scope: str, delay: float) -> None:
        """Work the scope's turn again in ``delay`` seconds (Telegram asked to wait that long)."""
        def fire() -> None:
            self._later.discard(handle)
            self.start_turn(scope)

        handle = asyncio.get_running_loop().call_later(delay, fire)
        self._later.add(handle)

    def start_turn(self, scope: str) -> None:
        """Work the scope's turn in the background (the webhook's request is answered already)."""
        if self.turns.busy(scope):
            return  # our task works it and looks again before it stops
        task = asyncio.get_running_loop().create_task(self._run_turn(scope), name=f"turn:{scope}")
        self._turn_tasks.add(task)
        task.add_done_callback(self._turn_tasks.discard)

    async def _run_turn(self, scope: str) -> None:
        async with self._turn_slots:
            await self.turns.run(scope)

    async def finish_turns(self, timeout: float) -> None:
        """Let the turns in progress finish (shutdown); what is left stays owed for another worker."""
        for handle in self._later:
            handle.cancel()
        self._later.clear()
        if not self._turn_tasks:
            return
        _, pending = await asyncio.wait(list(self._turn_tasks), timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    async def answer_stalled_job(self, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Scopes whose turn holder died: their owed messages, in order, by this worker."""
        await self.turns.sweep()
        for reply in await self.transport.hub.answer_stalled():
            if reply.scope is not None:
                await self.transport.deliver(context.bot, chat_of(reply.scope), reply, reply_to=None, thread_id=None)

    async def work_owed(self, scope: str, item: Owed) -> None:
        """Answer one owed message of the scope (this worker holds its turn) and send the reply.

        A reply stored but never sent (its worker died in between) is sent, not answered
        again. A failure that is not the database's is apologised for and logged; the
        database's own (a restart) is raised, and the message stays owed.
        """
        transport = self.transport
        bot = transport._bot
        if bot is None:
            raise RuntimeError("the Telegram application is not initialised")
        hub = transport.hub
        # Both reads in the store step that found the message (ScopeTurns' read ahead), else
        # in one step of their own: off the event loop where the store waits on the network.
        state = self.turns.read_ahead(scope, item)
        if state is None:
            state = await in_db_thread(hub.store, self._owed_state, scope, item)
        elif isinstance(state, Exception):
            raise state
        message, earlier = state
        if message is None:
            return  # erased (/forget all) or moved with its group
        chat_id = int(message.chat) if message.chat and message.chat.lstrip("-").isdigit() else chat_of(scope)
        private = scope.startswith("user:")
        reply_to = None if private else message_number(message.ext_id)
        thread_id = self.threads.get(message.id)
        if earlier is not None:  # answered already (only a message to answer has one)
            if earlier.ext_id is None:  # answered, but the worker died before sending it
                log.warning("sending the stored reply to message %s of %s: its worker stopped before sending it", message.id, scope)
                again = Reply(text=earlier.text, agent=earlier.agent, message_id=message.id, reply_id=earlier.id, scope=scope)
                await self._deliver_owed(scope, bot, chat_id, again, reply_to=reply_to, thread_id=thread_id)
            return
        outbox = transport.outbox
        topics = transport.topics

        async def agent_topic() -> int | None:  # the topic of the agent the message was routed to
            routed = hub.store.get(scope, message.id)
            return await topics.thread_for(bot, chat_id, scope, routed.agent if routed else None)

        stop_typing = asyncio.Event()
        typing = outbox.start_typing(bot, chat_id, thread_id, stop_typing, delay=transport.typing_delay) if item.answer else None
        stream = (
            transport.reply_stream(
                bot, chat_id, message.id, thread_id=thread_id, reply_to=reply_to, shown=stop_typing,
                find_thread=agent_topic if topics.enabled and private else None,
            )
            if item.answer
            else None
        )  # fmt: skip
        try:
            reply = await hub.answer_queued(message, addressed=item.answer, on_text=stream.on_text if stream else None)
        except Exception as exc:
            if is_transient(exc):
                raise
            log.error("answering message %s of %s failed", message.id, scope, exc_info=exc)
            if item.answer:
                await outbox.send_text(bot, chat_id, APOLOGY_SAVED, reply_to=reply_to, thread_id=thread_id, what="apology")
            return
        finally:
            if stream is not None:
                await stream.close()
            if typing is not None:
                # Let an action already on its way land first, or it would show "typing…"
                # again after the answer; a hung one is cut off.
                stop_typing.set()
                _, pending = await asyncio.wait([typing], timeout=1.0)
                for task in pending:
                    task.cancel()
        if reply is None:
            return
        into = stream.placeholder if stream is not None else None
        if stream is not None:
            await stream.wait_allowed()
        markup = transport.buttons.markup_for(message, reply, chunks=len(split_message(render(reply))))
        if reply.kind == "agent" and private and topics.enabled:
            thread_id = (stream.thread_id if stream is not None and into is not None else None) or await topics.thread_for(
                bot, chat_id, scope, reply.agent
            ) or thread_id
        # A reminder the answer set due before the next sweep was scheduled when the answer
        # was recorded (TelegramBot's recorded hook: Reminders.answered_in).
        await self._deliver_owed(scope, bot, chat_id, reply, reply_to=reply_to, thread_id=thread_id, into=into, markup=markup)

    def _owed_state(self, scope: str, item: Owed) -> tuple[Any, Any]:
        """``(the stored message, the reply stored for it)`` of an owed message (any thread);
        the message None when it is gone, the reply None when not answered or only to tag."""
        hub = self.transport.hub
        store = hub.store
        if not item.answer:  # only to tag: no reply to look for
            return store.get(scope, item.message_id), None
        # Both reads in one batch (one round trip on PostgreSQL).
        found, later = store.query_batch([store.get_query(scope, item.message_id), hub.stored_reply_query(scope, item.message_id)])
        if not found:
            return None, None
        message = store.message_of_row(found[0])
        return message, hub.stored_reply(message, [store.message_of_row(row) for row in later])

    async def _deliver_owed(
        self,
        scope: str,
        bot: Any,
        chat_id: int,
        reply: Reply,
        *,
        reply_to: int | None,
        thread_id: int | None,
        into: int | None = None,
        markup: Any = None,
    ) -> None:
        """Send the reply of an owed message (``into``: edit the streamed message into it); one
        Telegram asked to send later is sent at that time."""
        try:
            await self.transport.outbox.deliver(
                bot, chat_id, reply, reply_to=reply_to, thread_id=thread_id, defer_unsent=True, into=into, markup=markup
            )
        except SendLater as later:
            self.start_turn_later(scope, later.retry_after)
            raise
