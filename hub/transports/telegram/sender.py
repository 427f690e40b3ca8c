"""Sending a stored reply and recording its Telegram id back to back, on a thread of its own.

Telegram's Bot API has no idempotency key: a reply that reached Telegram but whose id is
not recorded yet looks unsent to every other worker, and if its worker dies right then
(kill -9, an OOM kill, a host lost) the next holder of the scope's turn sends it again.
That window cannot be closed, only kept short. On the worker's event loop it is not:
Telegram's answer waits there behind every other chat's work (the store's calls block
the loop), and the fault run measured it at a median of 70 ms and a p90 of 2.8 s under
load, long enough for most kills to catch a reply in it. Here the send and the record
run on a small event loop of their own thread, so the window is the HTTP round trip and
one database write, whatever the main loop is doing.

Only the send and the record move; retries, ChatMigrated, Forbidden and the rest are
still handled by the caller on the main loop, as for every other Bot API call. Replies
record their Telegram id; reminders record their delivery (a recurring one moves to its
next time), the same window for the same reason.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from telegram import Bot, Message

log = logging.getLogger(__name__)

__all__ = ["Record", "RecordingSender"]


@dataclass(frozen=True)
class Record:
    """What to write once Telegram took a message: ``write(sent)``, run on the sender's thread
    right after the answer; ``key`` names it for :meth:`RecordingSender.take_recorded`."""

    key: Hashable
    write: Callable[[Message], None]


class RecordingSender:
    """A Bot of its own on a thread of its own: ``send`` a message, then at once write its record.

    The keys of the records written are kept until the caller takes them
    (:meth:`take_recorded`), so the caller writes only what this could not (the database
    away for a moment).
    """

    def __init__(self, make_bot: Callable[[], Bot]) -> None:
        self._make_bot = make_bot
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._bot: Bot | None = None
        self._recorded: set[Hashable] = set()

    @property
    def running(self) -> bool:
        return self._loop is not None and self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the thread and initialise its Bot (raises what initialising raised)."""
        if self.running:
            return
        loop = asyncio.new_event_loop()
        ready: Future[None] = Future()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._bot = self._make_bot()
                loop.run_until_complete(self._bot.initialize())
            except BaseException as exc:  # handed to the starting thread
                ready.set_exception(exc)
                loop.close()
                return
            ready.set_result(None)
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="telegram-sender", daemon=True)
        self._loop = loop
        self._thread.start()
        try:
            ready.result(timeout=30)
        except BaseException:
            self._loop = self._thread = None
            raise

    async def stop(self) -> None:
        """Shut the Bot down and stop the thread (sends in flight finish first)."""
        loop, thread, bot = self._loop, self._thread, self._bot
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        if bot is not None and thread.is_alive():
            try:
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(bot.shutdown(), loop))
            except Exception as exc:  # stopping anyway
                log.warning("the reply sender's Bot did not shut down cleanly: %s", exc)
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, 10)

    async def send(self, record: Record, chat_id: int, text: str, **kwargs: Any) -> Message:
        """``sendMessage`` on the sender's thread, then ``record.write`` there, right after
        Telegram answers. Raises what the Bot API call raised."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the reply sender is not running")
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._send(record, chat_id, text, kwargs), loop))

    async def _send(self, record: Record, chat_id: int, text: str, kwargs: dict[str, Any]) -> Message:
        assert self._bot is not None
        sent = await self._bot.send_message(chat_id, text, **kwargs)
        try:
            record.write(sent)
        except Exception as exc:  # the caller writes it again, with retries
            log.warning("sent %s not recorded yet (%s); the caller tries again", record.key, exc)
        else:
            self._recorded.add(record.key)
        return sent

    def take_recorded(self, key: Hashable) -> bool:
        """Whether ``send`` already wrote the record ``key`` (forgotten afterwards)."""
        if key in self._recorded:
            self._recorded.discard(key)
            return True
        return False
