"""Dates and message ids as an operator types them: ``2024-05-01``, ``2024-05-01 14:30``, ``#1234``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

__all__ = ["Jump", "day_range", "parse_jump"]

_ID = re.compile(r"^#?\s*(\d{1,18})$")
_DAY = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2}))?)?$")


@dataclass(frozen=True, slots=True)
class Jump:
    """Where a jump goes: a message id, or a moment (unix seconds) and whether a time was given."""

    message_id: int | None = None
    ts: float | None = None
    with_time: bool = False


def _moment(text: str, zone: ZoneInfo) -> tuple[datetime, bool] | None:
    match = _DAY.match(text.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(part) if part else 0 for part in match.groups())
    try:
        return datetime(year, month, day, hour, minute, second, tzinfo=zone), match.group(4) is not None
    except ValueError:
        return None


def parse_jump(text: str, zone: ZoneInfo) -> Jump | None:
    """A message id (``1234``, ``#1234``) or a date with an optional time in ``zone``; None if neither."""
    found = _ID.match(text.strip())
    if found:
        return Jump(message_id=int(found.group(1)))
    moment = _moment(text, zone)
    if moment is None:
        return None
    return Jump(ts=moment[0].timestamp(), with_time=moment[1])


def day_range(first: str, last: str, zone: ZoneInfo) -> tuple[float | None, float | None]:
    """``[since, until)`` covering the days ``first`` to ``last`` (either may be empty); a
    value with a time is taken as that moment. Raises ValueError naming a bad one."""
    since = until = None
    if first.strip():
        moment = _moment(first, zone)
        if moment is None:
            raise ValueError(f"from: {first!r} is not a date (YYYY-MM-DD, optionally HH:MM)")
        since = moment[0].timestamp()
    if last.strip():
        moment = _moment(last, zone)
        if moment is None:
            raise ValueError(f"to: {last!r} is not a date (YYYY-MM-DD, optionally HH:MM)")
        # A whole day includes that day; a moment is the end itself.
        until = moment[0].timestamp() if moment[1] else (moment[0] + timedelta(days=1)).timestamp()
    return since, until
