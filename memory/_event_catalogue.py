"""The built-in event types: what the bundled agents' tools emit, with their one-line summaries."""

from __future__ import annotations

from datetime import date, datetime

from pydantic import Field

from ._event_types import EventPayload, register_event_type

__all__ = [
    "DateMention",
    "DispatchSent",
    "DraftSaved",
    "EmailReceived",
    "FactLearned",
    "NoteSaved",
    "ReminderCancelled",
    "ReminderFired",
    "ReminderSet",
    "TaskCreated",
    "TaskDone",
]


def _day(value: date) -> str:
    return f"{value:%a} {value.isoformat()}"


def _moment(value: datetime) -> str:
    return f"{value:%a} {value:%Y-%m-%d %H:%M}"


def _quoted(text: str, size: int = 60) -> str:
    text = " ".join(text.split())
    return '"' + (text if len(text) <= size else text[: size - 1].rstrip() + "…") + '"'


class TaskCreated(EventPayload):
    task_id: int
    number: int | None = Field(None, description="the number the person sees, if any")
    title: str = Field(min_length=1)
    due: date | None = None


class TaskDone(EventPayload):
    task_id: int
    number: int | None = None
    title: str = Field(min_length=1)


class NoteSaved(EventPayload):
    note_id: int
    title: str


class DateMention(EventPayload):
    """A date found in a text: the phrase as written, the day it names, and whether it is a deadline."""

    text: str
    day: date
    deadline: bool = False


class EmailReceived(EventPayload):
    email_id: int
    sender: str
    subject: str
    dates: list[DateMention]


class DraftSaved(EventPayload):
    draft_id: int
    to: str
    subject: str
    reply_to: int | None = Field(None, description="the email id it answers")


class ReminderSet(EventPayload):
    reminder_id: int
    text: str = Field(min_length=1)
    due: datetime = Field(description="ISO time (with its zone) or unix seconds")
    every_seconds: int | None = None


class ReminderFired(EventPayload):
    reminder_id: int
    text: str


class ReminderCancelled(EventPayload):
    reminder_id: int
    text: str


class FactLearned(EventPayload):
    key: str | None = None
    text: str = Field(min_length=1)


class DispatchSent(EventPayload):
    team: str = Field(min_length=1)
    subject: str
    priority: str = "normal"
    file: str = Field(min_length=1, description="the file's name in outbox/<team>/")


def _task_created(p: TaskCreated) -> str:
    due = f" (due {_day(p.due)})" if p.due else ""
    return f"task #{p.number or p.task_id} added: {_quoted(p.title)}{due}"


def _email_received(p: EmailReceived) -> str:
    line = f"email #{p.email_id} from {p.sender or 'unknown sender'} {_quoted(p.subject or '(no subject)', 50)}"
    if p.dates:
        shown = [("deadline " if d.deadline else "") + _day(d.day) for d in p.dates[:2]]
        more = f" +{len(p.dates) - 2}" if len(p.dates) > 2 else ""
        line += ", " + ", ".join(shown) + more
    return line


def _draft_saved(p: DraftSaved) -> str:
    to = f" to {p.to}" if p.to else ""
    return f"draft #{p.draft_id}{to} {_quoted(p.subject, 50)} (not sent)"


def _reminder_set(p: ReminderSet) -> str:
    every = f", every {p.every_seconds // 60} min" if p.every_seconds else ""
    return f"reminder #{p.reminder_id} set for {_moment(p.due)}{every}: {_quoted(p.text)}"


def _fact_learned(p: FactLearned) -> str:
    key = f" ({p.key})" if p.key else ""
    return f"learned{key}: {_quoted(p.text, 80)}"


register_event_type("task.created", TaskCreated, description="a task was added", summary=_task_created)
register_event_type(
    "task.done", TaskDone, description="a task was marked done", summary=lambda p: f"task #{p.number or p.task_id} done: {_quoted(p.title)}"
)
register_event_type(
    "note.saved", NoteSaved, description="a note was saved", summary=lambda p: f"note #{p.note_id} saved: {_quoted(p.title)}"
)
register_event_type(
    "email.received", EmailReceived, description="an email was kept, with the dates found in it", summary=_email_received
)
register_event_type("draft.saved", DraftSaved, description="a reply draft was saved (never sent)", summary=_draft_saved)
register_event_type("reminder.set", ReminderSet, description="a reminder was set", summary=_reminder_set)
register_event_type(
    "reminder.fired",
    ReminderFired,
    description="a reminder was delivered",
    summary=lambda p: f"reminder #{p.reminder_id} sent: {_quoted(p.text)}",
)
register_event_type(
    "reminder.cancelled",
    ReminderCancelled,
    description="a reminder was cancelled",
    summary=lambda p: f"reminder #{p.reminder_id} cancelled: {_quoted(p.text)}",
)
register_event_type("fact.learned", FactLearned, description="a fact about the person was learned", summary=_fact_learned)
register_event_type(
    "dispatch.sent",
    DispatchSent,
    description="work handed to an outside team through its Maildir outbox",
    summary=lambda p: f"dispatched to {p.team} ({p.priority}): {_quoted(p.subject or '(no subject)')}",
)
