"""The performance digest: measured outcomes of one agent's own work in a scope (seed 000).

Seed 000 closes the loop between action and outcome: an agent sees what came of its
work and adjusts. A chat hub measures, from rows it already keeps, per agent and since a
moment:

- the person's 👍 / 👎 on its replies (reactions) and its replies corrected in the next
  message ("no, I meant ..."), from ``feedback``;
- what its tools did, from the events it emitted: tasks added and done, reminders set,
  sent and cancelled, drafts saved, notes saved, emails kept;
- reminders *acknowledged*: sent, then followed by a message of the person in that
  chat within :data:`ACK_WINDOW` (the reminder reached someone; a chat has no receipt).

Not measured, because the hub cannot see it: whether a draft was sent (the hub never
sends email, and nothing tells it the person did) or a task's outcome beyond "done".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ._store import Store

__all__ = ["ACK_WINDOW", "Performance", "performance_of", "performance_queries"]

ACK_WINDOW = 30 * 60.0  # seconds after a reminder was sent in which a message of the person acknowledges it

# Event types that are outcomes of an agent's own work, with the label the digest gives them.
_OUTCOMES = {
    "task.created": "tasks added",
    "task.done": "tasks done",
    "reminder.set": "reminders set",
    "reminder.fired": "reminders sent",
    "reminder.cancelled": "reminders cancelled",
    "draft.saved": "drafts saved",
    "note.saved": "notes saved",
    "email.received": "emails kept",
    "dispatch.sent": "dispatches sent",
}


@dataclass(frozen=True, slots=True)
class Performance:
    """What came of one agent's work since ``since``."""

    agent: str
    since: float
    thumbs_up: int = 0
    thumbs_down: int = 0
    corrections: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)  # label -> count, in _OUTCOMES order
    reminders_acknowledged: int = 0

    @property
    def empty(self) -> bool:
        return not (self.thumbs_up or self.thumbs_down or self.corrections or self.outcomes)


def performance_of(store: Store, scope: str, agent: str, *, since: float, rows: Sequence[list[tuple]] | None = None) -> Performance:
    """``agent``'s measured outcomes in ``scope`` since ``since`` (unix seconds). ``rows``: those
    of :func:`performance_queries`, read already (batched with a caller's own reads)."""
    # One round trip on PostgreSQL (one more only when reminders were sent: whether the person wrote after them).
    feedback_rows, event_rows = rows if rows is not None else store.query_batch(performance_queries(scope, agent, since=since))
    feedback = {(source, signal): count for source, signal, count in feedback_rows}
    emitted = dict(event_rows)
    outcomes = {label: int(emitted[kind]) for kind, label in _OUTCOMES.items() if emitted.get(kind)}
    acknowledged = 0
    if emitted.get("reminder.fired"):
        acknowledged = store.query(
            "SELECT count(*) FROM events AS e WHERE e.scope = ? AND e.agent = ? AND e.type = 'reminder.fired' AND e.ts >= ?"
            " AND EXISTS (SELECT 1 FROM messages AS m WHERE m.scope = e.scope AND m.role = 'user'"
            " AND m.ts > e.ts AND m.ts <= e.ts + ?)",
            (scope, agent, since, ACK_WINDOW),
        )[0][0]
    return Performance(
        agent=agent,
        since=since,
        thumbs_up=int(feedback.get(("reaction", "positive"), 0)),
        thumbs_down=int(feedback.get(("reaction", "negative"), 0)),
        corrections=int(sum(count for (source, _), count in feedback.items() if source == "correction")),
        outcomes=outcomes,
        reminders_acknowledged=int(acknowledged),
    )


def performance_queries(scope: str, agent: str, *, since: float) -> list[tuple[str, tuple[object, ...]]]:
    """The two reads :func:`performance_of` makes, for a caller that batches them with its own."""
    return [
        (
            "SELECT source, signal, count(*) FROM feedback WHERE scope = ? AND agent = ? AND ts >= ? GROUP BY source, signal",
            (scope, agent, since),
        ),
        ("SELECT type, count(*) FROM events WHERE scope = ? AND agent = ? AND ts >= ? GROUP BY type", (scope, agent, since)),
    ]
