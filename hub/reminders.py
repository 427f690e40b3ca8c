"""Firing a reminder under a claim, for any transport: sent once, even with several processes.

Two bots on one database (a restart overlapping the old process, or several webhook
workers) both see a reminder fall due. Each takes the claim ``reminder:<id>``
before sending; the loser skips it. After the claim the reminder is read again, so a
process that lost the race and took the claim after the winner released it finds the
reminder already sent (inactive, or moved to its next time) and does nothing.

The claim's TTL is the only way it expires: a process that dies between sending and
recording leaves it to expire, and then another process sends again (at-least-once,
never silently dropped).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from enum import StrEnum

from scopehub.agents.reminders import record_delivery
from scopehub.memory import Reminder, acquire_claim, get_reminder, release_claim

__all__ = ["CLAIM_TTL", "Fired", "fire_reminder"]

log = logging.getLogger(__name__)

CLAIM_TTL = 120.0  # seconds: longer than one delivery with its retries


class Fired(StrEnum):
    """What :func:`fire_reminder` did."""

    SENT = "sent"
    NOT_DUE = "not due"  # gone, cancelled, or already sent
    HELD = "held elsewhere"  # another process holds the claim
    FAILED = "failed"  # the transport could not send; still due, tried again later


async def fire_reminder(
    store,
    scope: str,
    reminder_id: int,
    *,
    send: Callable[[Reminder], Awaitable[bool]],
    holder: str,
    clock: Callable[[], float] = time.time,
    ttl: float = CLAIM_TTL,
    grace: float = 0.5,
) -> Fired:
    """Send one due reminder once: claim it, read it again, send, record delivery, release."""
    first = get_reminder(store, scope, reminder_id)
    if first is None or not first.active or first.due > clock() + grace:
        return Fired.NOT_DUE
    key = f"reminder:{reminder_id}"
    claim = acquire_claim(store, scope, key, holder, note=f"reminders: sending a reminder: {first.text[:60]}", ttl=ttl, now=clock())
    if claim is None:
        log.info("reminder %s of %s is being sent by another process", reminder_id, scope)
        return Fired.HELD
    try:
        reminder = get_reminder(store, scope, reminder_id)
        if reminder is None or not reminder.active or reminder.due > clock() + grace:
            return Fired.NOT_DUE
        if not await send(reminder):
            return Fired.FAILED
        record_delivery(store, scope, reminder_id, clock())
        return Fired.SENT
    finally:
        release_claim(store, scope, key, holder)
