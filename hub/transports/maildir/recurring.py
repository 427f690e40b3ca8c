"""Recurring dispatches: a small table of what to send every hour, day, week or N seconds.

Periods are calendar periods in UTC (an hour, a day from midnight, an ISO week from
Monday; N seconds counted from the epoch), so "daily" means once per UTC day however
late or early the check runs. ``send_due`` names each file after its period's start
(``<period start>_<priority>_<sender>_<name>.md``) and skips a name already used, so a
crash between sending and recording the period never sends twice. The period
bookkeeping is ``<root>/recurring.json``, written atomically. Two processes checking at
once are kept apart by the hub's claims, not here.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from scopehub.memory import validate_scope

from .files import write_json_atomic
from .layout import STATE_FILE, check_name, slugify
from .send import send_dispatch

__all__ = ["RecurringDispatch", "due_recurring", "load_recurring_state", "send_due"]

log = logging.getLogger(__name__)

_PERIODS = {"hourly": 3600, "daily": 86400, "weekly": 7 * 86400}
_MONDAY = 4 * 86400  # 1970-01-01 was a Thursday; ISO weeks start on Monday 1970-01-05


class RecurringDispatch(BaseModel):
    """One recurring dispatch: ``every`` is hourly, daily, weekly or a number of seconds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    to_scope: str
    to_agent: str = "hub"
    every: Literal["hourly", "daily", "weekly"] | int = Field(...)
    subject: str
    body: str
    priority: Literal["urgent", "normal", "low"] = "normal"
    sender: str = "recurring"

    @field_validator("name", "to_agent", "sender")
    @classmethod
    def _simple(cls, value: str) -> str:
        return check_name(value)

    @field_validator("to_scope")
    @classmethod
    def _scope(cls, value: str) -> str:
        return validate_scope(value)

    @field_validator("every")
    @classmethod
    def _every(cls, value: str | int) -> str | int:
        if isinstance(value, int) and value < 1:
            raise ValueError("every must be hourly, daily, weekly or a positive number of seconds")
        return value

    @property
    def seconds(self) -> int:
        return _PERIODS[self.every] if isinstance(self.every, str) else self.every

    def period_start(self, ts: float) -> float:
        """The start of the period ``ts`` falls in (UTC)."""
        offset = _MONDAY if self.every == "weekly" else 0
        return ((ts - offset) // self.seconds) * self.seconds + offset


def due_recurring(
    items: Iterable[RecurringDispatch], last_sent: Mapping[str, float], now: float
) -> list[RecurringDispatch]:
    """The items not yet sent in the period ``now`` falls in."""
    due = []
    for item in items:
        last = last_sent.get(item.name)
        if last is None or item.period_start(last) < item.period_start(now):
            due.append(item)
    return due


def load_recurring_state(root: Path) -> dict[str, float]:
    """``{name: when it was last sent}`` from ``<root>/recurring.json`` (empty if absent or unreadable)."""
    path = Path(root) / STATE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        log.warning("maildir: %s is unreadable; recurring dispatches start afresh", path)
        return {}
    sent = data.get("last_sent", {}) if isinstance(data, dict) else {}
    return {str(k): float(v) for k, v in sent.items() if isinstance(v, int | float)}


def send_due(root: Path, items: Iterable[RecurringDispatch], *, now: float | None = None) -> list[Path]:
    """Send every item due now into its inbox and record the period; returns the files written."""
    now = time.time() if now is None else now
    items = list(items)
    slugs = [slugify(item.name) for item in items]
    if len(set(slugs)) != len(slugs):
        raise ValueError("recurring dispatch names must be unique (ignoring case and punctuation)")
    state = load_recurring_state(root)
    written = []
    for item in due_recurring(items, state, now):
        path = send_dispatch(
            root,
            item.to_scope,
            item.to_agent,
            sender=item.sender,
            subject=item.subject,
            body=item.body,
            priority=item.priority,
            kind="recurring",
            created=item.period_start(now),
            slug=item.name,
            if_exists="skip",
        )
        if path is None:
            log.info("maildir: recurring %r was already sent this period", item.name)
        else:
            written.append(path)
        state[item.name] = now
        write_json_atomic(Path(root) / STATE_FILE, {"last_sent": state})
    return written
