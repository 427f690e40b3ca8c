"""What ``eval local`` judges a message by: what it stored (read back from the store) and
whether the reply answers.

Checks are written two ways: in code for the newcomer session (:mod:`.local_newcomer`),
and as data for the frozen and dev sessions (``eval/data/local_sessions_*.json``), whose
``expect`` objects :func:`check_of` turns into the same checks. Every reply is also
held to :func:`reply_problems`: a raw search dump, an apology or refusal, or a reply
that names an internal tool is wrong whatever was stored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from scopehub import memory
from scopehub.agents._dates import local_now, parse_date

if TYPE_CHECKING:
    from scopehub.eval.local_session import Observation, Session

__all__ = [
    "Check",
    "both",
    "check_of",
    "contains",
    "due_on",
    "fact",
    "gone",
    "in_words",
    "new",
    "no_fact_from",
    "nothing",
    "reminder_in",
    "reminder_tomorrow_at",
    "replies",
    "reply_problems",
    "task_done",
]

Check = Callable[["Observation", "Session"], bool]


# --------------------------------------------------------------------------- replies

# The evaluation's own idea of a non-answer, written apart from the planner's
# (hub.models.answers): a check that shared the product's list could not catch its misses.
# search_memory's result lines: "#12 2026-12-02 10:15 [user] ..."
_DUMP_LINE = re.compile(r"^#\d+ \d{4}-\d{2}-\d{2} \d{2}:\d{2} \[", re.M)
_APOLOGY = re.compile(
    r"\b(?:i'?m sorry|i am sorry|sorry(?:,| for| that| i)|i apologi[sz]e|as an ai\b|as a language model|"
    r"i (?:can ?not|can't|could not|couldn't|am unable to|am not able to) (?:help|assist|do|work out|find|understand)|"
    r"i don'?t have (?:access|the ability))",
    re.I,
)
# Internal names a person should never be told about ("call list_tasks").
_INTERNAL = re.compile(r"\b(?:[a-z]+_[a-z_]+)\b")
_KNOWN_INTERNAL_WORDS = frozenset({"search_memory", "keep_email", "draft_reply", "set_reminder", "save_note"})


def reply_problems(reply: str, tool_names: Iterable[str] = ()) -> list[str]:
    """Why ``reply`` is no answer: a raw search dump, an apology or refusal, or an internal
    tool named. An empty list for a reply that may stand."""
    problems = []
    if not reply.strip():
        problems.append("empty reply")
    if len(_DUMP_LINE.findall(reply)) >= 1:
        problems.append("raw search dump")
    if _APOLOGY.search(reply):
        problems.append("apology or refusal")
    names = set(tool_names) | _KNOWN_INTERNAL_WORDS
    named = [word for word in _INTERNAL.findall(reply) if word in names]
    if named:
        problems.append(f"names an internal tool ({named[0]})")
    return problems


# --------------------------------------------------------------------------- building blocks


def contains(text: str, *words: str) -> bool:
    """Every one of ``words`` in ``text`` (case and runs of spaces aside)."""
    lowered = " ".join(text.casefold().split())
    return all(" ".join(word.casefold().split()) in lowered for word in words)


def new(kind: str, *words: str, where: Callable[[dict[str, Any]], bool] | None = None) -> Check:
    """A row of ``kind`` was stored by this message and holds all ``words``."""

    def check(obs: Observation, _: Session) -> bool:
        return any(contains(json.dumps(row, ensure_ascii=False), *words) and (where is None or where(row)) for row in obs.stored.get(kind, []))

    return check


def replies(*words: str) -> Check:
    def check(obs: Observation, _: Session) -> bool:
        return obs.kind == "agent" and contains(obs.reply, *words)

    return check


def in_words(obs: Observation, _: Session) -> bool:
    """A reply in words: no tool, nothing stored, not an error."""
    return obs.kind == "agent" and bool(obs.reply.strip()) and not obs.tools and not any(obs.stored.values())


def task_done(task_id: int) -> Check:
    def check(obs: Observation, session: Session) -> bool:
        task = memory.get_task(session.store, session.scope, task_id)
        return task is not None and task.done and any(row.get("id") == task_id for row in obs.stored.get("tasks done", []))

    return check


def gone(kind: str, item_id: int) -> Check:
    def check(obs: Observation, _: Session) -> bool:
        return any(row.get("id") == item_id for row in obs.stored.get(kind, []))

    return check


def fact(*words: str) -> Check:
    """A current fact learnt from this message holds all ``words``."""

    def check(obs: Observation, session: Session) -> bool:
        return any(f.source_message == obs.message_id and contains(f.text, *words) for f in session.facts())

    return check


def nothing(kind: str) -> Check:
    """This message stored no row of ``kind``."""

    def check(obs: Observation, _: Session) -> bool:
        return not obs.stored.get(kind)

    return check


def no_fact_from(obs: Observation, session: Session) -> bool:
    return not any(f.source_message == obs.message_id for f in session.facts())


def both(*checks: Check) -> Check:
    def check(obs: Observation, session: Session) -> bool:
        return all(c(obs, session) for c in checks)

    return check


def due_on(phrase: str) -> Callable[[dict[str, Any]], bool]:
    """A task row due on the day ``phrase`` ('friday', 'next tuesday') names, seen from the message's day."""

    def where(row: dict[str, Any]) -> bool:
        return row.get("due") is not None and row.get("_today") is not None and row["due"] == str(parse_date(phrase, date.fromisoformat(row["_today"])))

    return where


def reminder_in(minutes_low: float, minutes_high: float) -> Callable[[dict[str, Any]], bool]:
    def where(row: dict[str, Any]) -> bool:
        delta = (row["due"] - row["_now"]) / 60
        return minutes_low <= delta <= minutes_high

    return where


def reminder_tomorrow_at(hour: int) -> Callable[[dict[str, Any]], bool]:
    def where(row: dict[str, Any]) -> bool:
        moment = local_now(row["due"], row["_timezone"])
        return moment.date() == local_now(row["_now"], row["_timezone"]).date() + timedelta(days=1) and moment.hour == hour

    return where


def _reminder_on(weekday: str, hour: int) -> Callable[[dict[str, Any]], bool]:
    def where(row: dict[str, Any]) -> bool:
        moment = local_now(row["due"], row["_timezone"])
        return moment.date() == parse_date(weekday, date.fromisoformat(row["_today"])) and moment.hour == hour

    return where


# --------------------------------------------------------------------------- frozen sessions' data


def _when(spec: Mapping[str, Any]) -> Callable[[dict[str, Any]], bool]:
    if "in_minutes" in spec:
        minutes = float(spec["in_minutes"])
        return reminder_in(minutes * 0.9 - 0.5, minutes * 1.1 + 0.5)
    if "tomorrow" in spec:
        return reminder_tomorrow_at(int(spec["tomorrow"]))
    if "weekday" in spec:
        return _reminder_on(str(spec["weekday"]), int(spec["hour"]))
    raise ValueError(f"unknown 'when' {dict(spec)!r}")


def _row_where(expect: Mapping[str, Any]) -> Callable[[dict[str, Any]], bool]:
    conditions: list[Callable[[dict[str, Any]], bool]] = []
    if "due" in expect:
        conditions.append(due_on(str(expect["due"])))
    if "when" in expect:
        conditions.append(_when(expect["when"]))
    if "to" in expect:
        conditions.append(lambda row: contains(str(row.get("to", "")), str(expect["to"])))
    if "subject" in expect:
        conditions.append(lambda row: str(row.get("title", "")).strip().casefold() == str(expect["subject"]).casefold())
    if expect.get("new") == "dispatches" and "to" in expect:
        conditions[-1] = lambda row: str(row.get("team", "")).casefold() == str(expect["to"]).casefold()
    return lambda row: all(condition(row) for condition in conditions)


def _edited(words: tuple[str, ...], due: str | None) -> Check:
    def check(obs: Observation, _: Session) -> bool:
        for row in obs.stored.get("tasks edited", []):
            if contains(json.dumps(row, ensure_ascii=False), *words) and (due is None or due_on(due)(row)):
                return True
        return False

    return check


def check_of(expect: Mapping[str, Any]) -> Check:
    """The check an ``expect`` object of the sessions file states (see the file's ``about``)."""
    words = tuple(str(word) for word in expect.get("words", ()))
    checks: list[Check] = []
    if expect.get("in_words"):
        checks.append(in_words)
    if "new" in expect:
        checks.append(new(str(expect["new"]), *words, where=_row_where(expect)))
    if "done" in expect:
        done = tuple(expect["done"])
        checks.append(lambda obs, _s: any(contains(row["title"], *done) for row in obs.stored.get("tasks done", [])))
    if "no_new" in expect:
        checks.append(nothing(str(expect["no_new"])))
    if "cancelled" in expect:
        cancelled = tuple(expect["cancelled"])
        checks.append(lambda obs, _s: any(contains(row["text"], *cancelled) for row in obs.stored.get("reminders cancelled", [])))
    if "deleted" in expect:
        kind = f"{expect['deleted']} deleted"
        checks.append(lambda obs, _s: any(contains(json.dumps(row, ensure_ascii=False), *words) for row in obs.stored.get(kind, [])))
    if "edited" in expect:
        checks.append(_edited(tuple(expect["edited"]), expect.get("due")))
    if "reply" in expect:
        checks.append(replies(*expect["reply"]))
    if "not_reply" in expect:
        banned = tuple(expect["not_reply"])
        checks.append(lambda obs, _s: not any(contains(obs.reply, word) for word in banned))
    if "fact" in expect:
        checks.append(fact(*expect["fact"]))
    if not checks:
        raise ValueError(f"an expectation that checks nothing: {dict(expect)!r}")
    return both(*checks)
