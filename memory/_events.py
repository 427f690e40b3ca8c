"""Events: what an agent did, as a schema-validated row with one monotonic id.

Each event type is a pydantic model in a registry (:func:`register_event_type`); a
plugin may add its own. :func:`emit_event` validates the payload against the model and
refuses it with the field named (:class:`InvalidEvent`). Tools emit in the same
transaction as their row (``Store.transaction()`` is re-entrant), so a task and its
``task.created`` event are stored both or neither.

Guarantees

- The id (``INTEGER PRIMARY KEY AUTOINCREMENT``) is the cursor: strictly increasing,
  never reused, whatever the clock says. SQLite has one writer at a time, so ids become
  visible in commit order: once a reader has seen id n, no event with an id below n
  can appear later. (A backend with concurrent writers, e.g. PostgreSQL sequences, must
  restore that, say with a lock per scope while emitting, or readers skip events.)
- Cursors (per scope and agent) only move forward. At-least-once until commit: the
  caller shows an agent :func:`unconsumed_events`, and advances its cursor with
  :func:`advance_cursor` to the newest id it was *shown* only after that agent call is
  recorded. A crash in between shows the same events again; nothing is ever skipped,
  and once the cursor has moved the events are not shown again.
- A targeted event is seen only by its target; broadcasts (``target`` NULL) by every
  agent interested in their type. Every read takes the scope: nothing crosses scopes.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._model import validate_scope
from ._schema import ensure_scope
from ._store import Store
from .errors import InvalidEvent, InvalidRecord, UnknownEventType

__all__ = [
    "SUMMARY_CHARS",
    "DateMention",
    "Event",
    "EventPayload",
    "EventType",
    "advance_cursor",
    "cursor_of",
    "emit_event",
    "event_type",
    "event_types",
    "events_after",
    "expand_event_types",
    "is_event_pattern",
    "latest_events",
    "recent_events",
    "register_event_type",
    "summarize_event",
    "unconsumed_events",
    "validate_event_payload",
]

SUMMARY_CHARS = 120  # one awareness line: dense, never a paragraph
_TYPE_RE = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$")
_PATTERN_RE = re.compile(r"^(?:\*|[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*\.\*)$")
_COLUMNS = "id, scope, ts, agent, target, type, payload, message_id"


# -- registry ---------------------------------------------------------------------------------


class EventPayload(BaseModel):
    """Base for event models: unknown fields are refused, payloads are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Summary = Callable[[Any], str] | str | None


@dataclass(frozen=True)
class EventType:
    """A registered event type: its name, payload model, description and one-line summary."""

    name: str
    model: type[BaseModel]
    description: str
    summary: Summary = None

    def render(self, payload: Mapping[str, Any]) -> str:
        """The payload as one short line; never raises (awareness fails open)."""
        try:
            value = self.model.model_validate(payload)
            if callable(self.summary):
                line = self.summary(value)
            elif isinstance(self.summary, str):
                line = self.summary.format(**{name: getattr(value, name) for name in type(value).model_fields})
            else:
                line = _default_line(self.name, payload)
        except Exception:  # a stored payload from an older model, or a broken summary
            line = _default_line(self.name, payload)
        return _short(line)


_REGISTRY: dict[str, EventType] = {}


def _same_model(a: type[BaseModel], b: type[BaseModel]) -> bool:
    # A module loaded twice (a plugin file re-read) defines an equal class anew: same name
    # and same schema count as the same model.
    if a is b:
        return True
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__) and a.model_json_schema() == b.model_json_schema()


def register_event_type(name: str, model: type[BaseModel], *, description: str, summary: Summary = None) -> EventType:
    """Register an event type; returns it.

    ``summary`` renders a payload as one awareness line: a function of the validated
    model, or a ``str.format`` string over its fields. Registering the same model under
    the same name again is a no-op; another model under a taken name raises ValueError.
    The model must refuse extra fields (subclass :class:`EventPayload`).
    """
    if not isinstance(name, str) or not _TYPE_RE.match(name) or len(name) > 64:
        raise ValueError(f"event type name {name!r}: use dotted lower-case words, e.g. 'task.created'")
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"event type {name}: the model must be a pydantic model class")
    if model.model_config.get("extra") != "forbid":
        raise ValueError(f"event type {name}: the model must forbid extra fields (subclass EventPayload)")
    if not description or not description.strip():
        raise ValueError(f"event type {name}: give a description")
    existing = _REGISTRY.get(name)
    if existing is not None:
        if _same_model(existing.model, model):
            return existing
        raise ValueError(
            f"event type {name!r} is already registered with model {existing.model.__qualname__}"
        )
    entry = EventType(name=name, model=model, description=description.strip(), summary=summary)
    _REGISTRY[name] = entry
    return entry


def event_types() -> list[EventType]:
    """Every registered event type, by name."""
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def event_type(name: str) -> EventType | None:
    """The registered type of that name, if any."""
    return _REGISTRY.get(name)


def is_event_pattern(name: str) -> bool:
    """Whether ``name`` is a pattern (``reminder.*``, ``*``) rather than one type."""
    return bool(_PATTERN_RE.match(name))


def expand_event_types(names: Iterable[str]) -> list[str]:
    """Names with patterns (``reminder.*``, ``*``) replaced by the registered types they match.

    Plain names are kept as given, registered or not: the emitter may run in another
    process. Patterns match the types registered in this one.
    """
    out: set[str] = set()
    for name in [names] if isinstance(names, str) else names:  # one name, not its letters
        if name == "*":
            out.update(_REGISTRY)
        elif name.endswith(".*"):
            prefix = name[:-1]
            out.update(t for t in _REGISTRY if t.startswith(prefix))
        else:
            out.add(name)
    return sorted(out)


def _explain(type_name: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:5]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        kind = error.get("type", "")
        if not where:
            problems.append("the payload must be an object of fields")
        elif kind == "missing":
            problems.append(f"field '{where}' is required")
        elif kind == "extra_forbidden":
            problems.append(f"field '{where}' is not allowed")
        else:
            given = repr(error.get("input"))
            given = given if len(given) <= 40 else given[:39] + "…"
            problems.append(f"field '{where}': {error.get('msg', 'invalid')} (got {given})")
    return f"event {type_name}: " + "; ".join(problems)


def validate_event_payload(type_name: str, payload: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    """The payload checked against its type's model, as JSON-ready data; raises InvalidEvent."""
    entry = _REGISTRY.get(type_name)
    if entry is None:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise UnknownEventType(f"unknown event type {type_name!r}; registered types: {known}")
    if isinstance(payload, BaseModel):
        if not isinstance(payload, entry.model):
            raise InvalidEvent(f"event {type_name}: payload is a {type(payload).__name__}, not a {entry.model.__name__}")
        payload = payload.model_dump()
    try:
        value = entry.model.model_validate(payload)
    except ValidationError as exc:
        raise InvalidEvent(_explain(type_name, exc)) from exc
    return value.model_dump(mode="json")


# -- events -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Event:
    """One stored event; ``target`` None means broadcast."""

    id: int
    scope: str
    ts: float  # unix seconds, UTC: for people; ordering is by id
    agent: str  # who emitted it
    type: str
    payload: dict[str, Any] = field(default_factory=dict)
    target: str | None = None
    message_id: int | None = None  # the message that caused it

    def summary(self) -> str:
        """One dense line for an awareness block."""
        return summarize_event(self)


def _row(row: Sequence[Any]) -> Event:
    return Event(
        id=row[0],
        scope=row[1],
        ts=row[2],
        agent=row[3],
        target=row[4],
        type=row[5],
        payload=json.loads(row[6]),
        message_id=row[7],
    )


def _short(line: str) -> str:
    line = " ".join(str(line).split())
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1].rstrip() + "…"


def _default_line(type_name: str, payload: Mapping[str, Any]) -> str:
    return f"{type_name}: " + ", ".join(f"{key}={value}" for key, value in payload.items() if value not in (None, "", []))


def summarize_event(event: Event) -> str:
    """The event as one line for an awareness block (its type's summary, or field=value)."""
    entry = _REGISTRY.get(event.type)
    if entry is None:
        return _short(_default_line(event.type, event.payload))
    return entry.render(event.payload)


def _check_agent(what: str, name: str | None) -> None:
    if not isinstance(name, str) or not name.strip() or len(name) > 64:
        raise InvalidEvent(f"{what} must be an agent name, not {name!r}")


def emit_event(
    store: Store,
    scope: str,
    agent: str,
    type: str,
    payload: Mapping[str, Any] | BaseModel,
    *,
    target: str | None = None,
    message_id: int | None = None,
    now: float | None = None,
) -> Event:
    """Validate and append one event; returns it with its id.

    Runs in the caller's transaction when there is one (so it commits or rolls back with
    the tool's row), else in its own. Raises :class:`InvalidEvent` naming the field, or
    :class:`UnknownEventType`, and then writes nothing.
    """
    validate_scope(scope)
    _check_agent(f"event {type}: the emitting agent", agent)
    if target is not None:
        _check_agent(f"event {type}: the target", target)
    data = validate_event_payload(type, payload)
    ts = time.time() if now is None else float(now)
    if not math.isfinite(ts):
        raise InvalidEvent(f"event {type}: timestamp must be a finite number")
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    with store.transaction() as conn:
        ensure_scope(conn, scope, ts)
        new_id = conn.execute(
            "INSERT INTO events(scope, ts, agent, target, type, payload, message_id) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (scope, ts, agent, target, type, text, message_id),
        ).fetchone()[0]
    return Event(new_id, scope, ts, agent, type, data, target, message_id)


# (condition, its parameters[, index to use]): one index range scan of a read.
_Part = tuple[str, Sequence[Any]] | tuple[str, Sequence[Any], str]


def _merged(
    store: Store, base: str, params: Sequence[Any], parts: Sequence[_Part], *, newest: bool, limit: int
) -> list[Event]:
    """The first ``limit`` events (by id) of a union of per-index scans.

    Each part is one index range scan (a type, a target, an emitter), ordered by id and
    cut at ``limit`` on its own, and reads ids only; rows are fetched for the winners.
    So a read costs about ``parts x limit`` index entries however long the log is, where
    one scan filtering ``type IN (...)`` could walk the whole scope for a rare type.
    """
    if limit <= 0 or not parts:
        return []
    order = "DESC" if newest else "ASC"
    dialect = store.dialect
    sql_parts: list[str] = []
    args: list[Any] = []
    for part in parts:
        where, extra = part[0], part[1]
        # A third element pins the part to an index the planner would not pick.
        source = dialect.indexed_by("events", part[2]) if len(part) > 2 else "events"
        sql_parts.append(
            f"SELECT * FROM (SELECT id FROM {source} WHERE {base} AND {where} ORDER BY id {order} LIMIT ?) AS part{len(sql_parts)}"
        )
        args.extend([*params, *extra, limit])
    # The outer query walks the ids in order and stops at the limit. (An ORDER BY on the
    # compound itself makes SQLite merge-sort pairwise: 7x slower at ten parts.)
    sql = f"SELECT {_COLUMNS} FROM events WHERE id IN ({' UNION ALL '.join(sql_parts)}) ORDER BY id {order} LIMIT ?"
    return [_row(row) for row in store.query(sql, [*args, limit])]


def events_after(
    store: Store,
    scope: str,
    after_id: int,
    *,
    limit: int = 100,
    types: Iterable[str] | None = None,
    agent: str | None = None,
) -> list[Event]:
    """The scope's events with id above ``after_id``, oldest first, whoever they target.

    ``types`` may hold patterns (``reminder.*``); ``agent`` keeps one emitter's events.
    """
    base, params = "scope = ? AND id > ?", [scope, int(after_id)]
    parts: list[_Part]
    if types is not None:
        # The unary + keeps SQLite on the (scope, type, target, id) index for these scans.
        emitter = f" AND {store.dialect.no_index('agent')} = ?" if agent is not None else ""
        extra = [agent] if agent is not None else []
        parts = []
        for name in expand_event_types(types):
            parts.append((f"type = ? AND target IS NULL{emitter}", [name, *extra]))
            # Targets are never empty, so "> ''" is every targeted event: an index range,
            # sorted by id afterwards (targeted events are few), where a scan by id would
            # walk the whole scope after after_id when there are none.
            parts.append((f"type = ? AND target > ''{emitter}", [name, *extra], "events_scope_type"))
    elif agent is not None:
        parts = [("agent = ?", [agent])]
    else:
        parts = [("TRUE", [])]
    return _merged(store, base, params, parts, newest=False, limit=limit)


def latest_events(
    store: Store,
    scope: str,
    *,
    agents: Iterable[str] | None = None,
    types: Iterable[str] | None = None,
    limit: int = 20,
    for_agent: str | None = None,
) -> list[Event]:
    """The scope's newest events (by these emitters, of these types), oldest first.

    Broadcasts only, plus the events targeted at ``for_agent`` when given: pass the agent
    that will read them, so nobody sees what was meant for another.
    """
    base, params = "scope = ?", [scope]
    agent_list = sorted({agents} if isinstance(agents, str) else set(agents)) if agents is not None else None
    plus = store.dialect.no_index
    if agent_list == []:
        return []
    by_agent, agent_params = "", []
    if agent_list is not None:
        by_agent, agent_params = f" AND {plus('agent')} IN ({', '.join('?' * len(agent_list))})", agent_list
    # Broadcasts and the events targeted at for_agent are separate index ranges, never an OR.
    parts: list[_Part] = []
    if types is not None:
        for name in expand_event_types(types):
            parts.append((f"type = ? AND target IS NULL{by_agent}", [name, *agent_params]))
            if for_agent is not None:
                parts.append((f"type = ? AND target = ?{by_agent}", [name, for_agent, *agent_params]))
    else:
        if agent_list is not None:
            parts += [(f"agent = ? AND {plus('target')} IS NULL", [name]) for name in agent_list]
        else:
            parts.append((f"{plus('target')} IS NULL", []))
        if for_agent is not None:
            parts.append((f"target = ?{by_agent}", [for_agent, *agent_params]))
    return list(reversed(_merged(store, base, params, parts, newest=True, limit=limit)))


def recent_events(store: Store, scope: str, *, limit: int = 20) -> list[Event]:
    """The scope's newest events whoever they target, oldest first (for people reading the log)."""
    rows = store.query(
        f"SELECT {_COLUMNS} FROM events WHERE scope = ? ORDER BY id DESC LIMIT ?", (scope, max(0, int(limit)))
    )
    return [_row(row) for row in reversed(rows)]


def unconsumed_events(
    store: Store, scope: str, agent: str, *, interests: Iterable[str], limit: int = 20
) -> list[Event]:
    """Events past the agent's cursor that are meant for it, oldest first.

    Meant for it: targeted at it (any type), or broadcast with a type in ``interests``
    (patterns such as ``reminder.*`` allowed). Events targeted at other agents never.
    Show them, record the call, then :func:`advance_cursor` to the newest id shown.
    """
    # Read apart from the events (a subquery would run once per part): if the cursor moves
    # in between, already consumed events are shown once more, never fewer.
    base, params = "scope = ? AND id > ?", [scope, cursor_of(store, scope, agent)]
    parts: list[_Part] = [("target = ?", [agent])]
    parts += [("type = ? AND target IS NULL", [name]) for name in expand_event_types(interests)]
    return _merged(store, base, params, parts, newest=False, limit=limit)


# -- cursors ----------------------------------------------------------------------------------
# A cursor is the id of the newest event an agent was shown, never a timestamp: two events
# can share a millisecond and the clock can step back (NTP, another machine), and a
# timestamp cursor then skips events for good. Ids only grow, in commit order.


def cursor_of(store: Store, scope: str, agent: str) -> int:
    """The id of the newest event the agent has consumed in the scope (0: none yet)."""
    rows = store.query("SELECT event_id FROM cursors WHERE scope = ? AND agent = ?", (scope, agent))
    return int(rows[0][0]) if rows else 0


def advance_cursor(store: Store, scope: str, agent: str, event_id: int) -> int:
    """Move the agent's cursor forward to ``event_id`` (never back); returns the cursor.

    Call it only after the agent call that was shown the events is recorded, with the
    newest id it was shown (not the newest id in the table: later events were not shown).
    The cursor never passes the scope's newest event, so a mistaken id cannot skip events
    still to come.
    """
    validate_scope(scope)
    _check_agent("a cursor's agent", agent)
    if isinstance(event_id, bool) or not isinstance(event_id, int) or event_id < 0:
        raise InvalidRecord(f"a cursor is a non-negative event id, not {event_id!r}")
    with store.transaction() as conn:
        newest = conn.execute("SELECT coalesce(max(id), 0) FROM events WHERE scope = ?", (scope,)).fetchone()[0]
        target = min(event_id, newest)
        ensure_scope(conn, scope, time.time())
        conn.execute(
            "INSERT INTO cursors(scope, agent, event_id) VALUES (?, ?, ?)"
            " ON CONFLICT(scope, agent) DO UPDATE SET event_id = "
            + store.dialect.greatest("cursors.event_id", "excluded.event_id"),
            (scope, agent, target),
        )
        return int(
            conn.execute("SELECT event_id FROM cursors WHERE scope = ? AND agent = ?", (scope, agent)).fetchone()[0]
        )


# -- built-in types ---------------------------------------------------------------------------


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
