"""Events: what an agent did, as a schema-validated row with one monotonic id.

Each event type is a pydantic model in the registry (:mod:`._event_types`; the built-in
ones are in :mod:`._event_catalogue`). :func:`emit_event` validates the payload against
the model and refuses it with the field named (:class:`InvalidEvent`). Tools emit in
the same transaction as their row (``Store.transaction()`` is re-entrant), so a task and
its ``task.created`` event are stored both or neither.

Guarantees

- The id (``INTEGER PRIMARY KEY AUTOINCREMENT``) is the cursor: strictly increasing,
  never reused, whatever the clock says. SQLite has one writer at a time, so ids become
  visible in commit order: once a reader has seen id n, no event with an id below n
  can appear later. (A backend with concurrent writers, e.g. PostgreSQL sequences, must
  restore that, say with a lock per scope while emitting, or readers skip events.)
- Cursors (:mod:`._cursors`) per scope and agent only move forward, and only after the
  call that was shown the events is recorded: at-least-once until commit.
- A targeted event is seen only by its target; broadcasts (``target`` NULL) by every
  agent interested in their type. Every read takes the scope: nothing crosses scopes.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ._cursors import cursor_of
from ._event_types import (
    check_agent_name,
    expand_event_types,
    render_payload,
    validate_event_payload,
)
from ._model import validate_scope
from ._schema import ensure_scope
from ._store import Store
from .errors import InvalidEvent

__all__ = [
    "Event",
    "count_unconsumed",
    "emit_event",
    "events_after",
    "latest_events",
    "recent_events",
    "summarize_event",
    "unconsumed_events",
]

_COLUMNS = "id, scope, ts, agent, target, type, payload, message_id"




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


def summarize_event(event: Event) -> str:
    """The event as one line for an awareness block (its type's summary, or field=value)."""
    return render_payload(event.type, event.payload)


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
    check_agent_name(f"event {type}: the emitting agent", agent)
    if target is not None:
        check_agent_name(f"event {type}: the target", target)
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
    """The first ``limit`` events (by id) of a union of per-index scans (see :func:`_merged_query`)."""
    query = _merged_query(store, base, params, parts, newest=newest, limit=limit)
    return [_row(row) for row in store.query(*query)] if query is not None else []


def _merged_query(
    store: Store, base: str, params: Sequence[Any], parts: Sequence[_Part], *, newest: bool, limit: int
) -> tuple[str, list[Any]] | None:
    """The read of the first ``limit`` events (by id) of a union of per-index scans; None: nothing to read.

    Each part is one index range scan (a type, a target, an emitter), ordered by id and
    cut at ``limit`` on its own, and reads ids only; rows are fetched for the winners.
    So a read costs about ``parts x limit`` index entries however long the log is, where
    one scan filtering ``type IN (...)`` could walk the whole scope for a rare type.
    """
    if limit <= 0 or not parts:
        return None
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
    return sql, [*args, limit]


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
    query = latest_events_query(store, scope, agents=agents, types=types, limit=limit, for_agent=for_agent)
    return list(reversed([_row(row) for row in store.query(*query)])) if query is not None else []


def latest_events_query(
    store: Store,
    scope: str,
    *,
    agents: Iterable[str] | None = None,
    types: Iterable[str] | None = None,
    limit: int = 20,
    for_agent: str | None = None,
) -> tuple[str, list[Any]] | None:
    """The read of :func:`latest_events` (its rows newest first); None: nothing to read.
    For a batch of reads (``Store.query_batch``); :func:`event_of_row` makes each row an event."""
    base, params = "scope = ?", [scope]
    agent_list = sorted({agents} if isinstance(agents, str) else set(agents)) if agents is not None else None
    plus = store.dialect.no_index
    if agent_list == []:
        return None
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
    return _merged_query(store, base, params, parts, newest=True, limit=limit)


def recent_events(
    store: Store, scope: str, *, limit: int = 20, agent: str | None = None, types: Iterable[str] | None = None
) -> list[Event]:
    """The scope's newest events whoever they target, oldest first: the log as people read it.

    ``agent`` keeps one emitter's events, ``types`` (patterns allowed) those types; an
    event targeted at one agent is listed like a broadcast (a person may read them all).
    """
    if agent is None and types is None:
        rows = store.query(
            f"SELECT {_COLUMNS} FROM events WHERE scope = ? ORDER BY id DESC LIMIT ?", (scope, max(0, int(limit)))
        )
        return [_row(row) for row in reversed(rows)]
    parts: list[_Part]
    if types is not None:
        emitter = f" AND {store.dialect.no_index('agent')} = ?" if agent is not None else ""
        extra = [agent] if agent is not None else []
        parts = [(f"type = ?{emitter}", [name, *extra]) for name in expand_event_types(types)]
    else:
        parts = [("agent = ?", [agent])]
    return list(reversed(_merged(store, "scope = ?", [scope], parts, newest=True, limit=max(0, int(limit)))))


def _unconsumed_parts(agent: str, interests: Iterable[str]) -> list[_Part]:
    """Meant for ``agent``: targeted at it (any type), or a broadcast of a type it is interested in."""
    parts: list[_Part] = [("target = ?", [agent])]
    parts += [("type = ? AND target IS NULL", [name]) for name in expand_event_types(interests)]
    return parts


def unconsumed_events(
    store: Store,
    scope: str,
    agent: str,
    *,
    interests: Iterable[str],
    limit: int = 20,
    newest: bool = False,
    cursor: int | None = None,
) -> list[Event]:
    """Events past the agent's cursor that are meant for it, oldest first.

    Meant for it: targeted at it (any type), or broadcast with a type in ``interests``
    (patterns such as ``reminder.*`` allowed). Events targeted at other agents never.
    ``newest``: the newest ``limit`` of them (what a busy scope's awareness block needs
    now), else the oldest ``limit``. Show them, record the call, then
    :func:`~._cursors.advance_cursor` to the newest id shown (or passed over, counted).
    ``cursor``: the agent's cursor, read already (else it is read here).
    """
    # Read apart from the events (a subquery would run once per part): if the cursor moves
    # in between, already consumed events are shown once more, never fewer.
    base, params = "scope = ? AND id > ?", [scope, cursor_of(store, scope, agent) if cursor is None else int(cursor)]
    found = _merged(store, base, params, _unconsumed_parts(agent, interests), newest=newest, limit=limit)
    return list(reversed(found)) if newest else found


def event_of_row(row: Sequence[Any]) -> Event:
    """An event read by one of the ``*_query`` reads of this module."""
    return _row(row)


def count_unconsumed(
    store: Store, scope: str, agent: str, *, interests: Iterable[str], up_to: int, cap: int = 10_000
) -> int:
    """How many events meant for the agent lie past its cursor, up to id ``up_to`` (at most ``cap``).

    The awareness block names this count for the older events it had no room to list.
    Each part is one bounded index range count, like the reads.
    """
    base, params = "scope = ? AND id > ? AND id <= ?", [scope, cursor_of(store, scope, agent), int(up_to)]
    total = 0
    for where, extra, *_ in _unconsumed_parts(agent, interests):
        total += store.query(
            f"SELECT count(*) FROM (SELECT 1 FROM events WHERE {base} AND {where} LIMIT ?) AS bounded", [*params, *extra, cap]
        )[0][0]
    return min(total, cap)
