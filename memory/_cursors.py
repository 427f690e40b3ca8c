"""Event cursors: per scope and agent, the id of the newest event that agent was shown.

A cursor is an event id, never a timestamp: two events can share a millisecond and the
clock can step back (NTP, another machine), and a timestamp cursor then skips events
for good. Ids only grow, in commit order. Show an agent its unconsumed events, record
the call, then :func:`advance_cursor` to the newest id it was shown: at-least-once
until commit, never again after.
"""

from __future__ import annotations

import time

from ._event_types import check_agent_name
from ._model import validate_scope
from ._schema import ensure_scope
from ._store import Store
from .errors import InvalidRecord

__all__ = ["advance_cursor", "cursor_of", "cursor_query"]


def cursor_of(store: Store, scope: str, agent: str) -> int:
    """The id of the newest event the agent has consumed in the scope (0: none yet)."""
    rows = store.query(*cursor_query(scope, agent))
    return int(rows[0][0]) if rows else 0


def cursor_query(scope: str, agent: str) -> tuple[str, tuple[str, str]]:
    """The read of :func:`cursor_of` (one row, or none: 0), for a batch of reads."""
    return "SELECT event_id FROM cursors WHERE scope = ? AND agent = ?", (scope, agent)


def advance_cursor(store: Store, scope: str, agent: str, event_id: int) -> int:
    """Move the agent's cursor forward to ``event_id`` (never back); returns the cursor.

    Call it only after the agent call that was shown the events is recorded, with the
    newest id it was shown (not the newest id in the table: later events were not shown).
    The cursor never passes the scope's newest event, so a mistaken id cannot skip events
    still to come.
    """
    validate_scope(scope)
    check_agent_name("a cursor's agent", agent)
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
