"""Reminders delivered by the JobQueue at their due time, once, and again after a restart.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from telegram import Bot
from telegram.ext import (
    ContextTypes,
    Job,
    JobQueue,
)

from scopehub.agents.reminders import record_delivery
from scopehub.hub.reminders import CLAIM_TTL, Fired, Sent, fire_reminder, is_due
from scopehub.hub.transports.telegram.sender import Record
from scopehub.memory import (
    Reminder,
    Store,
    due_reminders,
    get_reminder,
    mark_reminder_sent,
)

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
    Telegram accepted it; a failure is retried on later sweeps with a growing delay, and
    the count of failures is kept in the store, so a restart continues the backoff. A
    chat that refuses delivery (403) has its reminders paused in the store (see
    :meth:`TelegramBot.chat_refused`): they are not due until it writes again.

    Reminders are numbered per scope, so a reminder is ``(scope, number)`` here.
    """

    def __init__(self, transport: TelegramBot, interval: float = 20.0) -> None:
        self.transport = transport
        self.interval = interval
        self._scheduled: dict[tuple[str, int], Job[Any]] = {}
        self._inflight: set[tuple[str, int]] = set()
        self._job_queue: JobQueue[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the job queue's, for answered_in

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
        self._loop = asyncio.get_running_loop()
        self.sweep()
        job_queue.run_repeating(self._sweep_job, interval=self.interval, first=self.interval, name="reminders:sweep")

    def scheduled(self) -> set[tuple[str, int]]:
        """``(scope, number)`` of reminders with a delivery job waiting."""
        return set(self._scheduled)

    async def _sweep_job(self, context: ContextTypes.DEFAULT_TYPE) -> None:
        self.sweep()

    def sweep(self) -> None:
        """Add a delivery job for every reminder due (or due for a retry) before the next sweep."""
        job_queue = self._job_queue
        if job_queue is None:
            return
        now = self._now()
        horizon = now + self.interval * 1.5
        self._schedule(job_queue, due_reminders(self.store, horizon), now, horizon)

    def answered_in(self, scope: str) -> None:
        """:meth:`sweep` for one scope, after an answer there is recorded (a hub
        ``recorded_hooks`` entry: in the record's store step, any thread): the answer may have
        set a reminder due before the next sweep. Its jobs are added on the event loop.

        The other scopes' reminders are the periodic sweep's: an answer in one scope sets
        reminders of that scope only.
        """
        job_queue, loop = self._job_queue, self._loop
        if job_queue is None or loop is None or loop.is_closed():
            return  # not started, or stopped: the next start sweeps
        now = self._now()
        horizon = now + self.interval * 1.5
        due = due_reminders(self.store, horizon, scope=scope)
        if due:
            loop.call_soon_threadsafe(self._schedule, job_queue, due, now, horizon)

    def _schedule(self, job_queue: JobQueue[Any], due: list[Reminder], now: float, horizon: float) -> None:
        for key, job in list(self._scheduled.items()):
            if job_queue.scheduler.get_job(job.job.id) is None:  # gone without running (e.g. missed)
                del self._scheduled[key]
        for reminder in due:
            key = (reminder.scope, reminder.id)
            at = max(reminder.due, reminder.retry_at or 0.0)
            if key in self._scheduled or key in self._inflight or at > horizon:
                continue
            self._scheduled[key] = job_queue.run_once(
                self._deliver_job,
                when=max(0.0, at - now),
                data=key,
                name=f"reminder:{reminder.scope}#{reminder.id}",
                # APScheduler drops a one-off job that fires over 1 s late by default; late is better.
                job_kwargs={"misfire_grace_time": None},
            )

    async def cancel_scope(self, scope: str) -> None:
        """Drop the waiting jobs of ``scope`` (a hub erase hook: /forget all; a group that moved)."""
        for key, job in list(self._scheduled.items()):
            if key[0] == scope:
                job.schedule_removal()
                del self._scheduled[key]

    def scope_moved(self, old: str, new: str) -> None:
        """A group became a supergroup: its jobs are made again under the new scope.

        A delivery on its way (the send that found out about the move) stays in flight
        under the new scope too, so the sweep does not send it a second time.
        """
        for key, job in list(self._scheduled.items()):
            if key[0] == old:
                job.schedule_removal()
                del self._scheduled[key]
        for scope, rid in list(self._inflight):
            if scope == old:
                self._inflight.add((new, rid))
        self.sweep()

    async def _deliver_job(self, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert context.job is not None
        scope, rid = context.job.data
        if self._scheduled.get((scope, rid)) is context.job:
            del self._scheduled[(scope, rid)]
        await self.deliver(context.bot, scope, rid)

    async def deliver(self, bot: Bot, scope: str, rid: int) -> bool:
        """Send one reminder if it is still active, unpaused and due; True when it was sent.

        Once across processes: :func:`~scopehub.hub.reminders.fire_reminder` claims it, reads
        it again, and records the delivery; here only the sending, and what it came to.
        """
        reminder = get_reminder(self.store, scope, rid)
        now = self._now()
        # Erased, cancelled, paused, or already moved to its next time since the job was made.
        if not is_due(reminder, now) or (scope, rid) in self._inflight:
            return False
        assert reminder is not None
        chat_id = _reminder_chat(reminder.chat, reminder.scope)
        if chat_id is None:
            log.error("reminder %s of %s has no chat to go to; dropping it", rid, reminder.scope)
            mark_reminder_sent(self.store, scope, rid, now)
            return False

        # Delivery is recorded on the reply sender's thread as soon as Telegram took it: a
        # worker killed in between would leave the reminder due, and another would send it again.
        key = ("reminder", scope, rid)
        record = Record(key, lambda _sent: record_delivery(self.store, scope, rid, self._now()))

        async def send(claimed: Reminder) -> Sent:
            self._inflight.add((scope, rid))
            try:
                sent = await self.transport.send_text(
                    bot, chat_id, REMINDER_PREFIX + claimed.text, what=f"reminder {rid} of {scope}", record=record
                )
            finally:
                self._inflight.discard((scope, rid))
                moved = self.transport.moved_scopes.get(scope, scope)  # the group became a supergroup meanwhile
                self._inflight.discard((moved, rid))
            if sent is not None:
                return Sent(delivered=True, scope=moved, recorded=self.transport.took_recorded(key))
            after = get_reminder(self.store, moved, rid)
            # None or paused: the chat refused it (403) and chat_refused paused it until it writes again.
            return Sent(delivered=False, paused=after is None or after.paused is not None, scope=moved)

        fired = await fire_reminder(
            self.store,
            scope,
            rid,
            send=send,
            holder=self.holder,
            clock=self._now,
            ttl=CLAIM_TTL,
            retry_delay=lambda failures: min(3600.0, self.interval * 2 ** (failures - 1)),
        )
        return fired == Fired.SENT


def _reminder_chat(chat: str | None, scope: str) -> int | None:
    """The reminder's own chat, else the scope's (a private chat's id is the user's id)."""
    for candidate in (chat, scope.split(":", 1)[1] if ":" in scope else None):
        if candidate and candidate.lstrip("-").isdigit():
            return int(candidate)
    return None

