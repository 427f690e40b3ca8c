"""Reminders delivered by the JobQueue at their due time, once, and again after a restart.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from telegram import Bot
from telegram.ext import (
    ContextTypes,
    Job,
    JobQueue,
)

from scopehub.hub.reminders import Fired, fire_reminder
from scopehub.memory import Reminder, Store, due_reminders

if TYPE_CHECKING:
    from scopehub.hub.transports.telegram.bot import TelegramBot

log = logging.getLogger(__name__)


REMINDER_PREFIX = "⏰ Reminder: "


class ReminderScheduler:
    """Delivers the store's reminders through PTB's JobQueue.

    A sweep runs at start (which reschedules everything after a restart) and then every
    ``interval`` seconds. For every active reminder due before the next sweep it
    adds a one-off job at the exact due time. The hub also triggers a sweep after each
    answer, so a reminder set for "in 30 seconds" is not late by a sweep interval. Why a
    sweep and not only one job per reminder: the reminders agent writes to the store, not
    to us, and the sweep also picks up reminders added elsewhere (another process, the
    CLI) and retries failed deliveries. A delivery marks the reminder sent only after
    Telegram accepted it; a failure is retried on later sweeps with a growing delay.
    """

    def __init__(self, transport: TelegramBot, interval: float = 20.0) -> None:
        self.transport = transport
        self.interval = interval
        self._scheduled: dict[int, Job[Any]] = {}
        self._inflight: set[int] = set()
        self._failures: dict[int, int] = {}
        self._retry_at: dict[int, float] = {}
        self._job_queue: JobQueue[Any] | None = None

    @property
    def store(self) -> Store:
        return self.transport.hub.store

    @property
    def holder(self) -> str:
        return self.transport.hub.holder

    def _now(self) -> float:
        return self.transport.hub.deps.clock()

    def start(self, job_queue: JobQueue[Any]) -> None:
        """Reschedule what is due soon (after a restart too) and start the periodic sweep."""
        self._job_queue = job_queue
        self.sweep()
        job_queue.run_repeating(self._sweep_job, interval=self.interval, first=self.interval, name="reminders:sweep")

    def scheduled(self) -> set[int]:
        """Ids of reminders with a delivery job waiting."""
        return set(self._scheduled)

    async def _sweep_job(self, context: ContextTypes.DEFAULT_TYPE) -> None:
        self.sweep()

    def sweep(self) -> None:
        """Add a delivery job for every reminder due before the next sweep."""
        job_queue = self._job_queue
        if job_queue is None:
            return
        now = self._now()
        for rid, job in list(self._scheduled.items()):
            if job_queue.scheduler.get_job(job.job.id) is None:  # gone without running (e.g. missed)
                del self._scheduled[rid]
        for reminder in due_reminders(self.store, now + self.interval * 1.5):
            rid = reminder.id
            if rid in self._scheduled or rid in self._inflight or self._retry_at.get(rid, 0.0) > now:
                continue
            self._scheduled[rid] = job_queue.run_once(
                self._deliver_job,
                when=max(0.0, reminder.due - now),
                data=(rid, reminder.scope),
                name=f"reminder:{rid}",
                # APScheduler drops a one-off job that fires over 1 s late by default; late is better.
                job_kwargs={"misfire_grace_time": None},
            )

    async def cancel_scope(self, scope: str) -> None:
        """Drop the waiting jobs of ``scope`` (a hub erase hook: /forget all)."""
        for rid, job in list(self._scheduled.items()):
            if job.data[1] == scope:
                job.schedule_removal()
                del self._scheduled[rid]
                self._failures.pop(rid, None)
                self._retry_at.pop(rid, None)

    async def _deliver_job(self, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert context.job is not None
        rid, scope = context.job.data
        if self._scheduled.get(rid) is context.job:
            del self._scheduled[rid]
        await self.deliver(context.bot, scope, rid)

    async def deliver(self, bot: Bot, scope: str, rid: int) -> bool:
        """Send one reminder if it is still active and due; True when it was sent.

        Under a claim (:func:`~scopehub.hub.reminders.fire_reminder`): with several
        processes on one database, each reminder goes out once.
        """
        if rid in self._inflight:
            return False

        async def send(reminder: Reminder) -> bool:
            chat_id = _reminder_chat(reminder.chat, reminder.scope)
            if chat_id is None:
                log.error("reminder %s of %s has no chat to go to; dropping it", rid, reminder.scope)
                return True  # recorded as delivered: there is nowhere to deliver it, ever
            sent = await self.transport.send_text(bot, chat_id, REMINDER_PREFIX + reminder.text, what=f"reminder {rid}")
            return sent is not None

        self._inflight.add(rid)
        try:
            outcome = await fire_reminder(self.store, scope, rid, send=send, holder=self.holder, clock=self._now)
        finally:
            self._inflight.discard(rid)
        if outcome is Fired.FAILED:
            failures = self._failures[rid] = self._failures.get(rid, 0) + 1
            delay = min(3600.0, self.interval * 2 ** (failures - 1))
            self._retry_at[rid] = self._now() + delay
            log.warning("reminder %s not delivered (attempt %d); retrying in about %.0fs", rid, failures, delay)
            return False
        self._failures.pop(rid, None)
        self._retry_at.pop(rid, None)
        return outcome is Fired.SENT


def _reminder_chat(chat: str | None, scope: str) -> int | None:
    """The reminder's own chat, else the scope's (a private chat's id is the user's id)."""
    for candidate in (chat, scope.split(":", 1)[1] if ":" in scope else None):
        if candidate and candidate.lstrip("-").isdigit():
            return int(candidate)
    return None


# -- the transport ------------------------------------------------------------------------
