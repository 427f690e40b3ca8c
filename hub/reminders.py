"""Firing a reminder under a claim, for any transport: sent once, even with several processes.

Two bots on one database (a restart overlapping the old process, or several webhook
workers) both see a reminder fall due. Each takes the claim ``reminder:<id>``
before sending; the loser skips it. After the claim the reminder is read again, so a
process that lost the race and took the claim after the winner released it finds the
reminder already sent (inactive, or moved to its next time) and does nothing.

The claim's TTL is the only way it expires: a process that dies between sending and
recording leaves it to expire, and then another process sends again (at-least-once,
never silently dropped).

This is the one implementation: the Telegram transport's delivery job and the fault
scenarios call :func:`fire_reminder` with their own ``send``, which says what happened
(:class:`Sent`): delivered, refused by the chat (403: the reminder is paused, not
retried), or failed (retried later with ``retry_delay``); and, when the group became a
supergroup while sending, the scope the reminder lives in now.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum

from scopehub.agents.reminders import record_delivery
from scopehub.memory import (
    Reminder,
    acquire_claim,
    get_reminder,
    note_reminder_failure,
    release_claim,
)

__all__ = ["CLAIM_TTL", "Fired", "Sent", "fire_reminder", "is_due"]

log = logging.getLogger(__name__)

CLAIM_TTL = 120.0  # seconds: longer than one delivery with its retries


class Fired(StrEnum):
    """What :func:`fire_reminder` did."""

    SENT = "sent"
    NOT_DUE = "not due"  # gone, cancelled, paused, or already sent
    HELD = "held elsewhere"  # another process holds the claim
    PAUSED = "paused"  # the chat refused it (403): paused until the chat writes again
    FAILED = "failed"  # the transport could not send; still due, tried again later


@dataclass(frozen=True)
class Sent:
    """What a transport's ``send`` reports.

    ``delivered``: the chat got it. ``paused``: the chat refused it (blocked, removed) and
    its reminders are paused. ``scope``: where the reminder lives now when it moved while
    sending (a group that became a supergroup); None: where it was. ``recorded``: the
    transport recorded the delivery itself, as soon as the chat service took it.
    """

    delivered: bool
    paused: bool = False
    scope: str | None = None
    recorded: bool = False


Send = Callable[[Reminder], Awaitable["bool | Sent"]]


def is_due(reminder: Reminder | None, now: float, grace: float = 0.5) -> bool:
    """Active, not paused, and due (its retry time included) within ``grace`` seconds."""
    return (
        reminder is not None
        and reminder.active
        and reminder.paused is None
        and max(reminder.due, reminder.retry_at or 0.0) <= now + grace
    )


async def fire_reminder(
    store,
    scope: str,
    reminder_id: int,
    *,
    send: Send,
    holder: str,
    clock: Callable[[], float] = time.time,
    ttl: float = CLAIM_TTL,
    grace: float = 0.5,
    retry_delay: Callable[[int], float] | None = None,
) -> Fired:
    """Send one due reminder once: claim it, read it again, send, record delivery, release.

    ``retry_delay(failures)``: seconds until the next try after a failed send (the count
    of failures is kept in the store, so a restart continues the backoff); None leaves
    the reminder due for the next sweep.
    """
    first = get_reminder(store, scope, reminder_id)
    if first is None or not is_due(first, clock(), grace):
        return Fired.NOT_DUE
    key = f"reminder:{reminder_id}"
    note = f"reminders: sending a reminder: {first.text[:60]}"
    if acquire_claim(store, scope, key, holder, note=note, ttl=ttl, now=clock()) is None:
        log.info("reminder %s of %s is being sent by another process", reminder_id, scope)
        return Fired.HELD
    where = scope
    try:
        reminder = get_reminder(store, scope, reminder_id)
        if reminder is None or not is_due(reminder, clock(), grace):
            return Fired.NOT_DUE  # sent by another process between our first read and the claim
        outcome = await send(reminder)
        sent = outcome if isinstance(outcome, Sent) else Sent(delivered=bool(outcome))
        where = sent.scope or scope
        if sent.delivered:
            if not sent.recorded:
                record_delivery(store, where, reminder_id, clock())  # marked sent, with its reminder.fired event
            return Fired.SENT
        if sent.paused:
            return Fired.PAUSED
        if retry_delay is not None:
            after = get_reminder(store, where, reminder_id)
            if after is not None and after.paused is None:
                failures = after.failures + 1
                delay = retry_delay(failures)
                note_reminder_failure(store, where, reminder_id, clock() + delay)
                log.warning(
                    "reminder %s of %s not delivered (attempt %d); retrying in about %.0fs", reminder_id, where, failures, delay
                )
        return Fired.FAILED
    finally:
        release_claim(store, scope, key, holder)
        if where != scope:  # the claim moved with the group's memory
            release_claim(store, where, key, holder)
