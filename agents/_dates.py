"""Deterministic date and time parsing for the agents' tools, in the person's time zone.

Models are asked for ``YYYY-MM-DD`` but often pass what the person said ("friday",
"in 3 days", "tomorrow 9am"): parsing that here keeps the answer right even when the
model cannot do calendar arithmetic. Everything is relative to an explicit ``today`` or
``now``, so tests run on a fixed clock.

German, French and Spanish date words are said in English first (``_dates_i18n``).

Conventions: a weekday name means its next occurrence after today ("friday" said on a
Friday is a week later; "today" exists for today); a month-day without a year is its
next occurrence from today on; a date without a time is at 09:00 for reminders.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ._dates_i18n import to_english

__all__ = [
    "DEFAULT_HOUR",
    "date_spans",
    "find_dates",
    "format_date",
    "format_datetime",
    "local_now",
    "parse_date",
    "parse_repeat",
    "parse_time",
    "parse_when",
    "zone",
]

DEFAULT_HOUR = 9  # a reminder given only a day ("tomorrow") fires at 09:00

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_UNITS = {
    "minute": 60,
    "min": 60,
    "hour": 3600,
    "hr": 3600,
    "day": 86400,
    "week": 7 * 86400,
}
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "ten": 10}

_WEEKDAY_RE = r"(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day|sday|nesday|rsday|urday)?"
_MONTH_RE = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_ORD = r"(?:st|nd|rd|th)?"
_NUM = r"(?:\d+|an?|one|two|three|four|five|six|seven|ten)"

# Every date phrase we understand, for scanning running text (emails) and for parsing.
_DATE_PHRASE = re.compile(
    r"\b(?:"
    r"\d{4}-\d{1,2}-\d{1,2}"
    r"|(?:day\s+after\s+tomorrow|today|tonight|tomorrow|tmrw|tmr)"
    r"|(?:(?:next|this|coming|on)\s+)?(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|" + _MONTH_RE + r"\s+\d{1,2}" + _ORD + r"(?:,?\s+\d{4})?"
    r"|\d{1,2}" + _ORD + r"(?:\s+of)?\s+" + _MONTH_RE + r"(?:,?\s+\d{4})?"
    r"|in\s+" + _NUM + r"\s+(?:days?|weeks?|months?)"
    r"|(?:next|this)\s+(?:week|month)"
    r"|end\s+of\s+(?:the\s+)?(?:day|week|month)"
    r"|eod|eow"
    r")\b",
    re.IGNORECASE,
)


def zone(name: str | None) -> ZoneInfo:
    """The named time zone, or UTC when it is missing or unknown."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def local_now(epoch: float, tz_name: str | None) -> datetime:
    """``epoch`` seconds as an aware datetime in the named zone."""
    return datetime.fromtimestamp(epoch, tz=zone(tz_name))


def format_date(day: date) -> str:
    """``Fri 2024-05-03``: the weekday helps the model talk about it correctly."""
    return f"{day.strftime('%a')} {day.isoformat()}"


def format_datetime(moment: datetime) -> str:
    """``Fri 2024-05-03 09:00``."""
    return f"{moment.strftime('%a')} {moment.strftime('%Y-%m-%d %H:%M')}"


def _number(word: str) -> int:
    word = word.lower()
    return int(word) if word.isdigit() else _NUMBER_WORDS[word]


def _weekday_index(word: str) -> int | None:
    word = word.lower().rstrip(".")
    for index, name in enumerate(WEEKDAYS):
        # "fri", "tues", "thurs", "friday"; not "month" or "sunny".
        if len(word) >= 3 and name.startswith(word):
            return index
    return None


def _month_index(word: str) -> int | None:
    word = word.lower().rstrip(".")
    for index, name in enumerate(calendar.month_name):
        if index and len(word) >= 3 and name.lower().startswith(word):
            return index
    return None


def _add_months(day: date, months: int) -> date:
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _month_day(month: int, day_number: int, year: int | None, today: date) -> date:
    if year is not None:
        return date(year, month, day_number)
    candidate = date(today.year, month, day_number) if day_number <= calendar.monthrange(today.year, month)[1] else None
    if candidate is None or candidate < today:
        candidate = date(today.year + 1, month, day_number)
    return candidate


def parse_date(text: str, today: date) -> date | None:
    """The date a phrase names ("2024-05-01", "tomorrow", "friday", "March 3", "in 3 days"), else None."""
    phrase = " ".join(to_english(text).lower().replace(",", " ").split())
    phrase = re.sub(r"^(?:on|by|due|until|before)\s+", "", phrase)
    if not phrase:
        return None
    try:
        if match := re.fullmatch(r"(\d{4})-(\d{1,2})-(\d{1,2})", phrase):
            return date(int(match[1]), int(match[2]), int(match[3]))
        if phrase in ("today", "tonight", "eod", "end of day", "end of the day"):
            return today
        if phrase in ("tomorrow", "tmrw", "tmr"):
            return today + timedelta(days=1)
        if phrase == "day after tomorrow":
            return today + timedelta(days=2)
        if match := re.fullmatch(r"(?:(next|this|coming)\s+)?([a-z]+)", phrase):
            index = _weekday_index(match[2])
            if index is not None:
                ahead = (index - today.weekday()) % 7 or 7
                return today + timedelta(days=ahead)
        if match := re.fullmatch(r"in\s+(" + _NUM + r")\s+(day|week|month)s?", phrase):
            amount = _number(match[1])
            if match[2] == "month":
                return _add_months(today, amount)
            return today + timedelta(days=amount * (7 if match[2] == "week" else 1))
        if phrase == "next week":
            return today + timedelta(days=7 - today.weekday())  # next Monday
        if phrase in ("end of week", "end of the week", "eow", "this week"):
            return today + timedelta(days=(4 - today.weekday()) % 7)  # this Friday
        if phrase == "next month":
            return _add_months(today.replace(day=1), 1)
        if phrase in ("end of month", "end of the month", "this month"):
            return today.replace(day=calendar.monthrange(today.year, today.month)[1])
        if match := re.fullmatch(r"([a-z]+\.?)\s+(\d{1,2})" + _ORD + r"(?:\s+(\d{4}))?", phrase):
            month = _month_index(match[1])
            if month:
                return _month_day(month, int(match[2]), int(match[3]) if match[3] else None, today)
        if match := re.fullmatch(r"(\d{1,2})" + _ORD + r"(?:\s+of)?\s+([a-z]+\.?)(?:\s+(\d{4}))?", phrase):
            month = _month_index(match[2])
            if month:
                return _month_day(month, int(match[1]), int(match[3]) if match[3] else None, today)
    except ValueError:
        return None  # e.g. February 30th
    return None


def find_dates(text: str, today: date) -> list[tuple[str, date]]:
    """Every date phrase in running text with the date it names, in order, without repeats."""
    found: list[tuple[str, date]] = []
    seen: set[date] = set()
    for match in _DATE_PHRASE.finditer(to_english(text)):
        phrase = match.group(0)
        day = parse_date(phrase, today)
        if day is not None and day not in seen:
            seen.add(day)
            found.append((phrase, day))
    return found


def date_spans(text: str) -> list[tuple[int, int, str]]:
    """Where running English text (see :func:`to_english`) names a day: ``(start, end,
    phrase)`` of each date phrase :func:`parse_date` reads, with the little word before it
    ("by friday", "on saturday", "for next tuesday") inside the span."""
    spans: list[tuple[int, int, str]] = []
    for match in _DATE_PHRASE.finditer(text):
        phrase = match.group(0)
        if parse_date(phrase, date(2000, 1, 3)) is None:
            continue
        before = re.search(r"(?:\b(?:by|on|for|due|before|until|till|from)\s+)$", text[: match.start()], re.IGNORECASE)
        spans.append((before.start() if before else match.start(), match.end(), phrase))
    return spans


_TIME_RE = re.compile(
    r"\b(?:(noon|midday|midnight)|(\d{1,2})(?:[:.](\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)|(\d{1,2})[:.](\d{2})|(?<=at\s)(\d{1,2}))\b",
    re.IGNORECASE,
)


def parse_time(text: str) -> tuple[time, tuple[int, int]] | None:
    """The first clock time in ``text`` ("9am", "18:00", "9.30 pm", "noon", "at 8") and its span."""
    match = _TIME_RE.search(text)
    if match is None:
        return None
    if match[1]:
        hour, minute = (0, 0) if match[1].lower() == "midnight" else (12, 0)
    elif match[2]:
        hour, minute = int(match[2]), int(match[3] or 0)
        if not 1 <= hour <= 12:
            return None
        is_pm = match[4].lower().startswith("p")
        hour = hour % 12 + (12 if is_pm else 0)
    elif match[5]:
        hour, minute = int(match[5]), int(match[6])
    else:
        hour, minute = int(match[7]), 0
    if hour > 23 or minute > 59:
        return None
    return time(hour, minute), match.span()


def parse_when(text: str, now: datetime) -> datetime:
    """The moment a reminder's ``when`` names, aware in ``now``'s zone; raises ValueError if unclear.

    Understands ISO datetimes, "in 10 minutes", "in 2 hours", "tomorrow 9am",
    "friday at 18:00", "at 18:00" (today, or tomorrow once that time has passed) and the
    date phrases of :func:`parse_date` (at 09:00).
    """
    tz = now.tzinfo
    raw = " ".join(to_english(text).strip().split())
    phrase = raw.lower()
    if not phrase:
        raise ValueError("when is empty: give a time like 'in 10 minutes', 'tomorrow 9am' or 2024-05-01T09:00")
    iso = phrase.replace(" ", "T", 1) if re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{1,2}:\d{2}(:\d{2})?", phrase) else raw
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        moment = None
    if moment is not None and (len(phrase) > 10 or moment.time() != time(0)):
        return moment.replace(tzinfo=tz) if moment.tzinfo is None else moment.astimezone(tz)
    phrase = re.sub(r"^(?:on|by)\s+", "", phrase)
    # "2 minutes" alone means from now, as "in 2 minutes" does.
    if match := re.fullmatch(r"(?:in\s+)?(" + _NUM + r"|half an?)\s*(minute|min|hour|hr|day|week)s?", phrase):
        amount = 0.5 if match[1].startswith("half") else _number(match[1])
        return now + timedelta(seconds=amount * _UNITS[match[2]])
    if phrase in ("in half an hour", "in a half hour"):
        return now + timedelta(minutes=30)
    found = parse_time(phrase)
    rest = phrase
    clock: time | None = None
    if found is not None:
        clock, (start, end) = found
        rest = (phrase[:start] + " " + phrase[end:]).strip()
        rest = re.sub(r"\b(?:at|@)\s*$", "", rest).strip()
        rest = re.sub(r"^(?:at|@)\b", "", rest).strip()
    if rest in ("tonight",) and clock is None:
        clock = time(20, 0)
    if rest in ("this morning", "morning"):
        rest, clock = "today", clock or time(DEFAULT_HOUR, 0)
    if rest in ("this evening", "evening"):
        rest, clock = "today", clock or time(19, 0)
    if part := re.fullmatch(r"(.+?)\s+(?:in the\s+)?(morning|afternoon|evening|night)", rest):
        # "tomorrow morning", "friday evening": that day at the part's usual hour.
        rest, clock = part[1], clock or time({"morning": DEFAULT_HOUR, "afternoon": 15, "evening": 19, "night": 20}[part[2]], 0)
    if not rest:
        if clock is None:
            raise ValueError(f"cannot read a time in {text!r}")
        candidate = datetime.combine(now.date(), clock, tzinfo=tz)
        return candidate if candidate > now else candidate + timedelta(days=1)
    day = parse_date(rest, now.date())
    if day is None:
        raise ValueError(
            f"cannot read {text!r}: use an ISO time (2024-05-01T09:00) or words like 'in 10 minutes', 'tomorrow 9am', 'friday at 18:00'"
        )
    return datetime.combine(day, clock or time(DEFAULT_HOUR, 0), tzinfo=tz)


def parse_repeat(text: str | None) -> int | None:
    """Seconds between repeats for "daily", "weekly", "hourly", "every N minutes/hours/days/weeks"; None for none."""
    phrase = " ".join(to_english(text or "").lower().split())
    if phrase in ("", "none", "no", "never", "once", "one-off", "false", "null"):
        return None
    named = {"hourly": 3600, "daily": 86400, "weekly": 7 * 86400, "every day": 86400, "every hour": 3600, "every week": 7 * 86400}
    if phrase in named:
        return named[phrase]
    if match := re.fullmatch(r"every\s+(" + _NUM + r")\s*(minute|min|hour|hr|day|week)s?", phrase):
        seconds = _number(match[1]) * _UNITS[match[2]]
        if seconds < 60:
            raise ValueError("repeat must be at least every minute")
        return seconds
    if re.fullmatch(r"every\s+" + _WEEKDAY_RE, phrase):
        return 7 * 86400
    raise ValueError(f"cannot read repeat {text!r}: use none, hourly, daily, weekly or 'every N minutes/hours/days'")
