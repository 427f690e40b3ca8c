"""Each agent's own memory, per scope (seed 000): lessons, strengths and weaknesses, goals
and plans, and the person's feedback the lessons are learnt from.

Rules

- Lessons: kind success, failure, observation or improvement; importance low, medium
  or high. At most :data:`LESSON_LIMIT` per agent and scope: pruning keeps the most
  important first and, within one importance, the newest. The same lesson learnt again
  is not stored twice: it counts once more (``seen``), becomes the newest, and keeps the
  higher importance, so repeated feedback never repeats a line in the agent's context.
- Strengths and weaknesses follow from the lessons: a topic with
  :data:`TRAIT_EVIDENCE` failures (repeats counted) (more than its successes) is a weakness, one with as
  many successes (more than its failures) a strength. They are kept when the lessons
  behind them are pruned, and change side when the evidence does.
- Goals: active, achieved or abandoned, with a progress of 0-100.
- Plans: active, done or abandoned; at most :data:`ACTIVE_PLANS` active at a time.
- Feedback: a reaction, a ``/feedback`` or a correction on one agent reply, stored
  pending, then learnt into a lesson (in the same transaction as the lesson).

Every read and write takes the scope and the agent: one agent's memory never reaches
another, and nothing crosses scopes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._model import validate_scope
from ._schema import ensure_scope, lock_scope
from ._store import Store
from .errors import AlreadyDone, InvalidRecord

__all__ = [
    "ACTIVE_PLANS",
    "FEEDBACK_SIGNALS",
    "FEEDBACK_SOURCES",
    "GOAL_STATUSES",
    "IMPORTANCES",
    "LESSON_KINDS",
    "LESSON_LIMIT",
    "MAX_LESSON_CHARS",
    "PLAN_STATUSES",
    "TRAIT_EVIDENCE",
    "AgentMemory",
    "Feedback",
    "Goal",
    "Lesson",
    "Plan",
    "Trait",
    "add_goal",
    "add_lesson",
    "add_plan",
    "agent_memory",
    "agent_memory_queries",
    "get_feedback",
    "goals_of",
    "lessons_of",
    "normalise_topic",
    "pending_feedback",
    "plans_of",
    "record_feedback",
    "traits_of",
    "update_goal",
    "update_plan",
]

LESSON_KINDS = ("success", "failure", "observation", "improvement")
IMPORTANCES = ("low", "medium", "high")
GOAL_STATUSES = ("active", "achieved", "abandoned")
PLAN_STATUSES = ("active", "done", "abandoned")
FEEDBACK_SOURCES = ("reaction", "command", "correction")
FEEDBACK_SIGNALS = ("positive", "negative", "neutral")
LESSON_LIMIT = 50
ACTIVE_PLANS = 10
TRAIT_EVIDENCE = 3
MAX_LESSON_CHARS = 300
MAX_TOPIC_CHARS = 40

# Importance as a number for ORDER BY: high first.
_RANK = "CASE importance WHEN 'high' THEN 3 WHEN 'medium' THEN 2 ELSE 1 END"
_LESSON_COLUMNS = "id, scope, agent, kind, importance, text, topic, source, feedback_id, ts, seen"
_GOAL_COLUMNS = "id, scope, agent, text, status, progress, created, updated"
_PLAN_COLUMNS = "id, scope, agent, text, status, created, updated"
_FEEDBACK_COLUMNS = "id, scope, agent, reply_id, source, signal, text, key, ts, status, lesson_id"


@dataclass(frozen=True, slots=True)
class Lesson:
    """What an agent learnt: a success, failure, observation or improvement."""

    id: int
    scope: str
    agent: str
    kind: str
    importance: str
    text: str
    topic: str | None = None
    source: str = "agent"  # agent (its own tool) | feedback (learnt from the person)
    feedback_id: int | None = None
    ts: float = 0.0
    seen: int = 1  # how many times it was learnt


@dataclass(frozen=True, slots=True)
class Trait:
    """A strength or weakness on a topic, with the number of lessons behind it."""

    kind: str  # strength | weakness
    topic: str
    evidence: int
    updated: float


@dataclass(frozen=True, slots=True)
class Goal:
    id: int
    scope: str
    agent: str
    text: str
    status: str
    progress: int
    created: float
    updated: float


@dataclass(frozen=True, slots=True)
class Plan:
    id: int
    scope: str
    agent: str
    text: str
    status: str
    created: float
    updated: float


@dataclass(frozen=True, slots=True)
class Feedback:
    """The person's feedback on one agent reply, before and after it became a lesson."""

    id: int
    scope: str
    agent: str
    reply_id: int | None
    source: str  # reaction | command | correction
    signal: str  # positive | negative | neutral
    text: str
    key: str | None
    ts: float
    status: str  # pending | learnt
    lesson_id: int | None = None


@dataclass(frozen=True, slots=True)
class AgentMemory:
    """Everything one agent keeps about itself in one scope."""

    agent: str
    lessons: tuple[Lesson, ...] = ()
    strengths: tuple[Trait, ...] = ()
    weaknesses: tuple[Trait, ...] = ()
    goals: tuple[Goal, ...] = ()
    plans: tuple[Plan, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.lessons or self.strengths or self.weaknesses or self.goals or self.plans)


def _now(now: float | None) -> float:
    return time.time() if now is None else float(now)


def _check(scope: str, agent: str) -> None:
    validate_scope(scope)
    if not isinstance(agent, str) or not agent.strip() or len(agent) > 64:
        raise InvalidRecord(f"an agent's memory needs an agent name, not {agent!r}")


def _text(text: str, what: str, limit: int = MAX_LESSON_CHARS) -> str:
    body = " ".join(text.split()) if isinstance(text, str) else ""
    if not body:
        raise InvalidRecord(f"a {what} needs some text")
    return body if len(body) <= limit else body[: limit - 1].rstrip() + "…"


def _choice(value: str, allowed: Sequence[str], what: str) -> str:
    if value not in allowed:
        raise InvalidRecord(f"{what} {value!r}: use {', '.join(allowed)}")
    return value


def normalise_topic(topic: str | None) -> str | None:
    """A topic as a short lower-case label ("Task lists!" -> "task list"); None when empty.

    A plural s is dropped, so that "task list" and "task lists" count as one topic.
    """
    if not isinstance(topic, str):
        return None
    words = re.sub(r"[^\w\s-]+", " ", topic.lower()).split()
    words = [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words]
    return " ".join(words)[:MAX_TOPIC_CHARS].strip() or None


# -- lessons ----------------------------------------------------------------------------------


def _lesson(row: Sequence[Any]) -> Lesson:
    return Lesson(*row)


def add_lesson(
    store: Store,
    scope: str,
    agent: str,
    text: str,
    *,
    kind: str,
    importance: str = "medium",
    topic: str | None = None,
    source: str = "agent",
    feedback_id: int | None = None,
    now: float | None = None,
) -> Lesson:
    """Record a lesson, prune the agent's lessons to LESSON_LIMIT and update its traits.

    With ``feedback_id``, that feedback is marked learnt in the same transaction: a crash
    leaves both or neither, and the mark is a compare-and-set (pending to learnt): feedback
    another worker learnt meanwhile raises :class:`AlreadyDone` and nothing is written. A
    lesson with the same kind and text counts once more instead of being stored twice.
    The returned lesson may already be pruned (a low one among LESSON_LIMIT high ones).
    """
    _check(scope, agent)
    body = _text(text, "lesson")
    _choice(kind, LESSON_KINDS, "lesson kind")
    _choice(importance, IMPORTANCES, "importance")
    label = normalise_topic(topic)
    ts = _now(now)
    with store.transaction() as conn:
        ensure_scope(conn, scope, ts)
        if feedback_id is not None and not conn.execute(
            "UPDATE feedback SET status = 'learnt' WHERE scope = ? AND id = ? AND status = 'pending'", (scope, feedback_id)
        ).rowcount:
            raise AlreadyDone(f"feedback {feedback_id} of {scope} was already learnt (or is gone)")
        same = conn.execute(
            f"SELECT {_LESSON_COLUMNS} FROM lessons WHERE scope = ? AND agent = ? AND kind = ? AND text = ?",
            (scope, agent, kind, body),
        ).fetchone()
        if same is not None:
            new_id = same[0]
            importance = max(importance, same[4], key=IMPORTANCES.index)
            label = label or same[6]
            conn.execute(
                "UPDATE lessons SET seen = seen + 1, ts = ?, importance = ?, topic = ? WHERE id = ?",
                (ts, importance, label, new_id),
            )
        else:
            new_id = conn.execute(
                "INSERT INTO lessons(scope, agent, kind, importance, text, topic, source, feedback_id, ts)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (scope, agent, kind, importance, body, label, source, feedback_id, ts),
            ).fetchone()[0]
        if feedback_id is not None:
            conn.execute("UPDATE feedback SET lesson_id = ? WHERE scope = ? AND id = ?", (new_id, scope, feedback_id))
        # Traits count the lessons before pruning: the evidence is what was learnt.
        if label is not None:
            _update_traits(conn, scope, agent, label, ts)
        conn.execute(
            f"DELETE FROM lessons WHERE scope = ? AND agent = ? AND id NOT IN (SELECT id FROM lessons"
            f" WHERE scope = ? AND agent = ? ORDER BY {_RANK} DESC, ts DESC, id DESC LIMIT ?)",
            (scope, agent, scope, agent, LESSON_LIMIT),
        )
    seen = same[10] + 1 if same is not None else 1
    return Lesson(new_id, scope, agent, kind, importance, body, label, source, feedback_id, ts, seen)


def lessons_of(store: Store, scope: str, agent: str, *, limit: int = LESSON_LIMIT) -> list[Lesson]:
    """The agent's lessons: high importance first, then newest first."""
    return [_lesson(row) for row in store.query(*_lessons_query(scope, agent, limit))]


def _lessons_query(scope: str, agent: str, limit: int = LESSON_LIMIT) -> tuple[str, tuple[Any, ...]]:
    return (
        f"SELECT {_LESSON_COLUMNS} FROM lessons WHERE scope = ? AND agent = ? ORDER BY {_RANK} DESC, ts DESC, id DESC LIMIT ?",
        (scope, agent, int(limit)),
    )


def _update_traits(conn: Any, scope: str, agent: str, topic: str, ts: float) -> None:
    counts = dict(
        conn.execute(
            "SELECT kind, sum(seen) FROM lessons WHERE scope = ? AND agent = ? AND topic = ? GROUP BY kind",
            (scope, agent, topic),
        ).fetchall()
    )
    failures, successes = counts.get("failure", 0), counts.get("success", 0)
    side = None
    if failures >= TRAIT_EVIDENCE and failures > successes:
        side, evidence = "weakness", failures
    elif successes >= TRAIT_EVIDENCE and successes > failures:
        side, evidence = "strength", successes
    if side is None:
        return
    other = "strength" if side == "weakness" else "weakness"
    conn.execute("DELETE FROM agent_traits WHERE scope = ? AND agent = ? AND kind = ? AND topic = ?", (scope, agent, other, topic))
    conn.execute(
        "INSERT INTO agent_traits(scope, agent, kind, topic, evidence, updated) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT(scope, agent, kind, topic) DO UPDATE SET evidence = excluded.evidence, updated = excluded.updated",
        (scope, agent, side, topic, evidence, ts),
    )


def traits_of(store: Store, scope: str, agent: str) -> list[Trait]:
    """The agent's strengths and weaknesses, best evidenced first."""
    return [Trait(*row) for row in store.query(*_traits_query(scope, agent))]


def _traits_query(scope: str, agent: str) -> tuple[str, tuple[Any, ...]]:
    return (
        "SELECT kind, topic, evidence, updated FROM agent_traits WHERE scope = ? AND agent = ? ORDER BY evidence DESC, updated DESC",
        (scope, agent),
    )


# -- goals and plans --------------------------------------------------------------------------


def add_goal(store: Store, scope: str, agent: str, text: str, *, progress: int = 0, now: float | None = None) -> Goal:
    """Set the agent an active goal."""
    _check(scope, agent)
    body = _text(text, "goal")
    progress = _progress(progress)
    ts = _now(now)
    with store.transaction() as conn:
        ensure_scope(conn, scope, ts)
        new_id = conn.execute(
            "INSERT INTO goals(scope, agent, text, progress, created, updated) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (scope, agent, body, progress, ts, ts),
        ).fetchone()[0]
    return Goal(new_id, scope, agent, body, "active", progress, ts, ts)


def _progress(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise InvalidRecord(f"progress is a percentage 0-100, not {value!r}")
    return value


def update_goal(
    store: Store,
    scope: str,
    agent: str,
    goal_id: int,
    *,
    status: str | None = None,
    progress: int | None = None,
    text: str | None = None,
    now: float | None = None,
) -> Goal | None:
    """Change one of the agent's goals; None when it has no such goal. Achieved means 100%."""
    if status is not None:
        _choice(status, GOAL_STATUSES, "goal status")
    if progress is not None:
        _progress(progress)
    body = _text(text, "goal") if text is not None else None
    if status == "achieved" and progress is None:
        progress = 100
    with store.transaction() as conn:
        changed = conn.execute(
            "UPDATE goals SET status = coalesce(?, status), progress = coalesce(?, progress), text = coalesce(?, text),"
            " updated = ? WHERE scope = ? AND agent = ? AND id = ?",
            (status, progress, body, _now(now), scope, agent, goal_id),
        ).rowcount
    if not changed:
        return None
    rows = store.query(f"SELECT {_GOAL_COLUMNS} FROM goals WHERE scope = ? AND id = ?", (scope, goal_id))
    return Goal(*rows[0])


def goals_of(store: Store, scope: str, agent: str, *, include_closed: bool = False) -> list[Goal]:
    """The agent's goals (active only unless ``include_closed``), oldest first."""
    return [Goal(*row) for row in store.query(*_goals_query(scope, agent, include_closed))]


def _goals_query(scope: str, agent: str, include_closed: bool = False) -> tuple[str, tuple[Any, ...]]:
    where = "" if include_closed else " AND status = 'active'"
    return f"SELECT {_GOAL_COLUMNS} FROM goals WHERE scope = ? AND agent = ?{where} ORDER BY id", (scope, agent)


def add_plan(store: Store, scope: str, agent: str, text: str, *, now: float | None = None) -> Plan:
    """Give the agent an active plan; refused when it already has ACTIVE_PLANS active ones."""
    _check(scope, agent)
    body = _text(text, "plan")
    ts = _now(now)
    with store.transaction() as conn:
        lock_scope(conn, scope)  # the count and the insert as one step
        active = conn.execute(
            "SELECT count(*) FROM plans WHERE scope = ? AND agent = ? AND status = 'active'", (scope, agent)
        ).fetchone()[0]
        if active >= ACTIVE_PLANS:
            raise InvalidRecord(f"{agent} already has {ACTIVE_PLANS} active plans; mark one done or abandoned first")
        ensure_scope(conn, scope, ts)
        new_id = conn.execute(
            "INSERT INTO plans(scope, agent, text, created, updated) VALUES (?, ?, ?, ?, ?) RETURNING id",
            (scope, agent, body, ts, ts),
        ).fetchone()[0]
    return Plan(new_id, scope, agent, body, "active", ts, ts)


def update_plan(
    store: Store,
    scope: str,
    agent: str,
    plan_id: int,
    *,
    status: str | None = None,
    text: str | None = None,
    now: float | None = None,
) -> Plan | None:
    """Change one of the agent's plans; None when it has no such plan. Re-activating one counts against the limit."""
    if status is not None:
        _choice(status, PLAN_STATUSES, "plan status")
    body = _text(text, "plan") if text is not None else None
    with store.transaction() as conn:
        lock_scope(conn, scope)
        row = conn.execute("SELECT status FROM plans WHERE scope = ? AND agent = ? AND id = ?", (scope, agent, plan_id)).fetchone()
        if row is None:
            return None
        if status == "active" and row[0] != "active":
            active = conn.execute(
                "SELECT count(*) FROM plans WHERE scope = ? AND agent = ? AND status = 'active'", (scope, agent)
            ).fetchone()[0]
            if active >= ACTIVE_PLANS:
                raise InvalidRecord(f"{agent} already has {ACTIVE_PLANS} active plans; mark one done or abandoned first")
        conn.execute(
            "UPDATE plans SET status = coalesce(?, status), text = coalesce(?, text), updated = ? WHERE scope = ? AND id = ?",
            (status, body, _now(now), scope, plan_id),
        )
    rows = store.query(f"SELECT {_PLAN_COLUMNS} FROM plans WHERE scope = ? AND id = ?", (scope, plan_id))
    return Plan(*rows[0])


def plans_of(store: Store, scope: str, agent: str, *, include_closed: bool = False) -> list[Plan]:
    """The agent's plans (active only unless ``include_closed``), oldest first."""
    return [Plan(*row) for row in store.query(*_plans_query(scope, agent, include_closed))]


def _plans_query(scope: str, agent: str, include_closed: bool = False) -> tuple[str, tuple[Any, ...]]:
    where = "" if include_closed else " AND status = 'active'"
    return f"SELECT {_PLAN_COLUMNS} FROM plans WHERE scope = ? AND agent = ?{where} ORDER BY id", (scope, agent)


def agent_memory(store: Store, scope: str, agent: str, *, rows: Sequence[list[tuple]] | None = None) -> AgentMemory:
    """Everything ``agent`` keeps about itself in ``scope`` (active goals and plans): four
    reads in one batch (one round trip on PostgreSQL). ``rows``: those of
    :func:`agent_memory_queries`, read already (batched with a caller's own reads)."""
    trait_rows, lesson_rows, goal_rows, plan_rows = rows if rows is not None else store.query_batch(agent_memory_queries(scope, agent))
    traits = [Trait(*row) for row in trait_rows]
    return AgentMemory(
        agent=agent,
        lessons=tuple(_lesson(row) for row in lesson_rows),
        strengths=tuple(t for t in traits if t.kind == "strength"),
        weaknesses=tuple(t for t in traits if t.kind == "weakness"),
        goals=tuple(Goal(*row) for row in goal_rows),
        plans=tuple(Plan(*row) for row in plan_rows),
    )


def agent_memory_queries(scope: str, agent: str) -> list[tuple[str, tuple[Any, ...]]]:
    """The four reads :func:`agent_memory` makes, for a caller that batches them with its own."""
    return [_traits_query(scope, agent), _lessons_query(scope, agent), _goals_query(scope, agent), _plans_query(scope, agent)]


# -- feedback ---------------------------------------------------------------------------------


def record_feedback(
    store: Store,
    scope: str,
    agent: str,
    *,
    reply_id: int | None,
    source: str,
    signal: str,
    text: str,
    key: str | None = None,
    now: float | None = None,
) -> Feedback | None:
    """Store the person's feedback on ``agent``'s reply, pending; None when ``key`` was already recorded."""
    _check(scope, agent)
    _choice(source, FEEDBACK_SOURCES, "feedback source")
    _choice(signal, FEEDBACK_SIGNALS, "feedback signal")
    body = _text(text, "feedback", limit=1000)
    ts = _now(now)
    with store.transaction() as conn:
        ensure_scope(conn, scope, ts)
        row = conn.execute(
            "INSERT INTO feedback(scope, agent, reply_id, source, signal, text, key, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING RETURNING id",
            (scope, agent, reply_id, source, signal, body, key, ts),
        ).fetchone()
        if row is None:  # this key was already recorded
            return None
        new_id = row[0]
    return Feedback(new_id, scope, agent, reply_id, source, signal, body, key, ts, "pending")


def get_feedback(store: Store, scope: str, feedback_id: int) -> Feedback | None:
    rows = store.query(f"SELECT {_FEEDBACK_COLUMNS} FROM feedback WHERE scope = ? AND id = ?", (scope, feedback_id))
    return Feedback(*rows[0]) if rows else None


def pending_feedback(store: Store, scope: str, *, limit: int = 20, rows: Sequence[Sequence[Any]] | None = None) -> list[Feedback]:
    """The scope's feedback not yet learnt, oldest first (``rows``: read already, by
    :func:`pending_feedback_query`)."""
    if rows is None:
        rows = store.query(*pending_feedback_query(scope, limit=limit))
    return [Feedback(*row) for row in rows]


def pending_feedback_query(scope: str, *, limit: int = 20) -> tuple[str, tuple[Any, ...]]:
    """The read of :func:`pending_feedback`, for a batch of reads."""
    return f"SELECT {_FEEDBACK_COLUMNS} FROM feedback WHERE scope = ? AND status = 'pending' ORDER BY id LIMIT ?", (scope, int(limit))
