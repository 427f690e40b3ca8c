"""Data access for the agents' own records: the vault (notes, emails, drafts), tasks, reminders.

Every function that serves an agent takes the scope and only ever reads or writes that
scope's rows; an id from another scope behaves as if it did not exist. The reminder
functions for transports (:func:`due_reminders`, :func:`mark_reminder_sent`,
:func:`pending_reminders`) work across scopes, because delivery is global.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._model import validate_scope
from ._schema import ensure_scope, lock_scope
from ._store import Store
from .errors import InvalidRecord

__all__ = [
    "Reminder",
    "Task",
    "VaultItem",
    "add_reminder",
    "add_task",
    "add_vault_item",
    "cancel_reminder",
    "complete_task",
    "delete_vault_item",
    "due_reminders",
    "edit_task",
    "get_reminder",
    "get_task",
    "get_vault_item",
    "list_reminders",
    "list_tasks",
    "list_vault_items",
    "mark_reminder_sent",
    "note_reminder_failure",
    "pause_chat_reminders",
    "pending_reminders",
    "resume_chat_reminders",
    "vault_item_by_number",
]

_UNSET: Any = object()  # "leave as is", distinct from None ("clear")


def _now(now: float | None) -> float:
    return time.time() if now is None else float(now)


# -- vault ------------------------------------------------------------------------------

_VAULT_COLUMNS = "id, scope, kind, title, body, meta, agent, source_message, created, updated, num"


@dataclass(frozen=True, slots=True)
class VaultItem:
    """A kept document: a note, an email, a draft reply."""

    id: int
    scope: str
    kind: str
    title: str
    body: str
    meta: dict[str, Any] = field(default_factory=dict)
    agent: str | None = None
    source_message: int | None = None
    created: float = 0.0
    updated: float = 0.0
    number: int = 0  # its number among the scope's items of its kind: what people see (note #1, draft #1)


def _vault_row(row: Sequence[Any]) -> VaultItem:
    return VaultItem(
        id=row[0],
        scope=row[1],
        kind=row[2],
        title=row[3],
        body=row[4],
        meta=json.loads(row[5]) if row[5] else {},
        agent=row[6],
        source_message=row[7],
        created=row[8],
        updated=row[9],
        number=row[10] or 0,
    )


def add_vault_item(
    store: Store,
    scope: str,
    kind: str,
    body: str,
    *,
    title: str = "",
    meta: dict[str, Any] | None = None,
    agent: str | None = None,
    source_message: int | None = None,
    now: float | None = None,
) -> VaultItem:
    """Keep a document in the scope's vault (the archive search indexes it)."""
    validate_scope(scope)
    if not body.strip():
        raise InvalidRecord("a vault item needs a body")
    ts = _now(now)
    meta_json = json.dumps(meta or {}, ensure_ascii=False, default=str)
    with store.transaction() as conn:
        ensure_scope(conn, scope, ts)
        new_id = conn.execute(
            "INSERT INTO vault(scope, kind, title, body, meta, agent, source_message, created, updated)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (scope, kind, title, body, meta_json, agent, source_message, ts, ts),
        ).fetchone()[0]
        number = conn.execute("SELECT num FROM vault WHERE id = ?", (new_id,)).fetchone()[0]  # the trigger's
    return VaultItem(new_id, scope, kind, title, body, dict(meta or {}), agent, source_message, ts, ts, number)


def get_vault_item(store: Store, scope: str, item_id: int, kind: str | None = None) -> VaultItem | None:
    """One vault item of the scope (and of ``kind`` when given)."""
    sql = f"SELECT {_VAULT_COLUMNS} FROM vault WHERE scope = ? AND id = ?"
    params: list[Any] = [scope, item_id]
    if kind is not None:
        sql += " AND kind = ?"
        params.append(kind)
    rows = store.query(sql, params)
    return _vault_row(rows[0]) if rows else None


def vault_item_by_number(store: Store, scope: str, kind: str, number: int) -> VaultItem | None:
    """The scope's item of ``kind`` with this number (note #3, email #1): what tools take."""
    rows = store.query(f"SELECT {_VAULT_COLUMNS} FROM vault WHERE scope = ? AND kind = ? AND num = ?", (scope, kind, number))
    return _vault_row(rows[0]) if rows else None


def list_vault_items(store: Store, scope: str, kind: str | None = None, *, limit: int = 20) -> list[VaultItem]:
    """The scope's vault items, newest first."""
    sql = f"SELECT {_VAULT_COLUMNS} FROM vault WHERE scope = ?"
    params: list[Any] = [scope]
    if kind is not None:
        sql += " AND kind = ?"
        params.append(kind)
    sql += " ORDER BY id DESC LIMIT ?"
    params.append(limit)
    return [_vault_row(row) for row in store.query(sql, params)]


def delete_vault_item(store: Store, scope: str, item_id: int, kind: str | None = None) -> bool:
    """Delete one vault item of the scope; False when there is no such item."""
    sql = "DELETE FROM vault WHERE scope = ? AND id = ?"
    params: list[Any] = [scope, item_id]
    if kind is not None:
        sql += " AND kind = ?"
        params.append(kind)
    with store.transaction() as conn:
        return conn.execute(sql, params).rowcount > 0


# -- tasks ------------------------------------------------------------------------------

# ``num`` is the task's number within its scope (what people and tools call its id).
_TASK_COLUMNS = "num, scope, title, due, done, created, completed"


@dataclass(frozen=True, slots=True)
class Task:
    """A to-do item; ``due`` is a local calendar date ``YYYY-MM-DD`` or None.

    ``id`` is the task's number within its scope (#1, #2 ...): counted per scope and never
    given twice there, not even after the task or the whole scope was erased.
    """

    id: int
    scope: str
    title: str
    due: str | None = None
    done: bool = False
    created: float = 0.0
    completed: float | None = None


def _task_row(row: Sequence[Any]) -> Task:
    return Task(id=row[0], scope=row[1], title=row[2], due=row[3], done=bool(row[4]), created=row[5], completed=row[6])


def add_task(store: Store, scope: str, title: str, due: str | None = None, *, now: float | None = None) -> Task:
    """Add an open task to the scope; it gets the scope's next number."""
    validate_scope(scope)
    title = title.strip()
    if not title:
        raise InvalidRecord("a task needs a title")
    ts = _now(now)
    with store.transaction() as conn:
        ensure_scope(conn, scope, ts)
        new_id = conn.execute(
            "INSERT INTO tasks(scope, title, due, created) VALUES (?, ?, ?, ?) RETURNING id", (scope, title, due, ts)
        ).fetchone()[0]
        # The number comes from a trigger (SQLite: after the insert), so it is read back.
        number = conn.execute("SELECT num FROM tasks WHERE id = ?", (new_id,)).fetchone()[0]
    return Task(number, scope, title, due, False, ts, None)


def get_task(store: Store, scope: str, task_id: int) -> Task | None:
    """One task of the scope by its number."""
    rows = store.query(f"SELECT {_TASK_COLUMNS} FROM tasks WHERE scope = ? AND num = ?", (scope, task_id))
    return _task_row(rows[0]) if rows else None


def list_tasks(store: Store, scope: str, *, include_done: bool = False, limit: int = 50) -> list[Task]:
    """The scope's tasks: open ones by due date (undated last), then done ones if asked."""
    sql = f"SELECT {_TASK_COLUMNS} FROM tasks WHERE scope = ?"
    if not include_done:
        sql += " AND done = 0"
    sql += " ORDER BY done, due IS NULL, due, num LIMIT ?"
    return [_task_row(row) for row in store.query(sql, (scope, limit))]


def complete_task(store: Store, scope: str, task_id: int, *, now: float | None = None) -> Task | None:
    """Mark a task of the scope done; None when there is no such task."""
    with store.transaction() as conn:
        updated = conn.execute(
            "UPDATE tasks SET done = 1, completed = coalesce(completed, ?) WHERE scope = ? AND num = ?",
            (_now(now), scope, task_id),
        ).rowcount
    return get_task(store, scope, task_id) if updated else None


def edit_task(
    store: Store,
    scope: str,
    task_id: int,
    *,
    title: str | None = None,
    due: str | None = _UNSET,
    done: bool | None = None,
    now: float | None = None,
) -> Task | None:
    """Change a task's title, due date (None clears it) or done state; None when there is no such task."""
    sets: list[str] = []
    params: list[Any] = []
    if title is not None:
        if not title.strip():
            raise InvalidRecord("a task needs a title")
        sets.append("title = ?")
        params.append(title.strip())
    if due is not _UNSET:
        sets.append("due = ?")
        params.append(due)
    if done is not None:
        sets.append("done = ?")
        params.append(1 if done else 0)
        sets.append("completed = ?")
        params.append(_now(now) if done else None)
    if not sets:
        return get_task(store, scope, task_id)
    with store.transaction() as conn:
        updated = conn.execute(
            f"UPDATE tasks SET {', '.join(sets)} WHERE scope = ? AND num = ?", (*params, scope, task_id)
        ).rowcount
    return get_task(store, scope, task_id) if updated else None


# -- reminders --------------------------------------------------------------------------

# ``num`` is the reminder's number within its scope (what people and tools call its id).
_REMINDER_COLUMNS = "num, scope, chat, text, due, every_seconds, active, last_sent, created, failures, retry_at, paused"


@dataclass(frozen=True, slots=True)
class Reminder:
    """A reminder: fires at ``due`` (unix seconds), then every ``every_seconds`` if recurring.

    ``id`` is its number within the scope (never given twice there). ``failures`` and
    ``retry_at`` are the transport's failed deliveries (kept across restarts);
    ``paused`` is when its chat refused delivery (the bot was blocked), None otherwise.
    """

    id: int
    scope: str
    chat: str | None
    text: str
    due: float
    every_seconds: int | None = None
    active: bool = True
    last_sent: float | None = None
    created: float = 0.0
    failures: int = 0
    retry_at: float | None = None
    paused: float | None = None

    @property
    def recurring(self) -> bool:
        return bool(self.every_seconds)


def _reminder_row(row: Sequence[Any]) -> Reminder:
    return Reminder(
        id=row[0],
        scope=row[1],
        chat=row[2],
        text=row[3],
        due=row[4],
        every_seconds=row[5],
        active=bool(row[6]),
        last_sent=row[7],
        created=row[8],
        failures=row[9] or 0,
        retry_at=row[10],
        paused=row[11],
    )


def add_reminder(
    store: Store,
    scope: str,
    text: str,
    due: float,
    *,
    every_seconds: int | None = None,
    chat: str | None = None,
    now: float | None = None,
) -> Reminder:
    """Persist a reminder for the scope (delivered to ``chat``, the chat it was set in)."""
    validate_scope(scope)
    text = text.strip()
    if not text:
        raise InvalidRecord("a reminder needs a text")
    if every_seconds is not None and every_seconds < 60:
        raise InvalidRecord("a recurring reminder repeats at most once a minute")
    ts = _now(now)
    with store.transaction() as conn:
        ensure_scope(conn, scope, ts)
        new_id = conn.execute(
            "INSERT INTO reminders(scope, chat, text, due, every_seconds, created) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (scope, chat, text, float(due), every_seconds, ts),
        ).fetchone()[0]
        number = conn.execute("SELECT num FROM reminders WHERE id = ?", (new_id,)).fetchone()[0]
    return Reminder(number, scope, chat, text, float(due), every_seconds, True, None, ts)


def get_reminder(store: Store, scope: str, reminder_id: int) -> Reminder | None:
    """One reminder of ``scope`` by number; a number of another scope is as if it did not exist."""
    rows = store.query(f"SELECT {_REMINDER_COLUMNS} FROM reminders WHERE scope = ? AND num = ?", (scope, reminder_id))
    return _reminder_row(rows[0]) if rows else None


def list_reminders(store: Store, scope: str, *, include_inactive: bool = False, limit: int = 50) -> list[Reminder]:
    """The scope's reminders, soonest first."""
    sql = f"SELECT {_REMINDER_COLUMNS} FROM reminders WHERE scope = ?"
    if not include_inactive:
        sql += " AND active = 1"
    sql += " ORDER BY active DESC, due, num LIMIT ?"
    return [_reminder_row(row) for row in store.query(sql, (scope, limit))]


def cancel_reminder(store: Store, scope: str, reminder_id: int) -> Reminder | None:
    """Deactivate an active reminder of the scope; None when there is no such reminder."""
    with store.transaction() as conn:
        updated = conn.execute(
            "UPDATE reminders SET active = 0 WHERE scope = ? AND num = ? AND active = 1", (scope, reminder_id)
        ).rowcount
    return get_reminder(store, scope, reminder_id) if updated else None


def due_reminders(store: Store, now: float, *, limit: int = 500, scope: str | None = None) -> list[Reminder]:
    """Active, unpaused reminders due at ``now``, oldest due first (for transports): of every
    scope, or of ``scope`` only."""
    of_scope, params = ("scope = ? AND ", [validate_scope(scope)]) if scope is not None else ("", [])
    rows = store.query(
        f"SELECT {_REMINDER_COLUMNS} FROM reminders WHERE {of_scope}active = 1 AND paused IS NULL AND due <= ? ORDER BY due, id LIMIT ?",
        (*params, float(now), limit),
    )
    return [_reminder_row(row) for row in rows]


def pending_reminders(store: Store) -> list[Reminder]:
    """Every active reminder of every scope, soonest first (to reschedule after a restart)."""
    rows = store.query(f"SELECT {_REMINDER_COLUMNS} FROM reminders WHERE active = 1 ORDER BY due, id")
    return [_reminder_row(row) for row in rows]


def mark_reminder_sent(store: Store, scope: str, reminder_id: int, now: float) -> Reminder | None:
    """Record a delivery: a one-off is deactivated, a recurring one moves to its next due time after ``now``.

    The next time stays on the reminder's own grid (due + k × every) and is strictly
    after ``now``, so a bot that was down for a day sends one reminder, not a burst of
    the ones it missed. Failed attempts are forgotten. Returns the updated reminder
    (None when unknown).
    """
    now = float(now)
    with store.transaction() as conn:
        lock_scope(conn, scope)  # read the due time, then move it: one step
        row = conn.execute(f"SELECT {_REMINDER_COLUMNS} FROM reminders WHERE scope = ? AND num = ?", (scope, reminder_id)).fetchone()
        if row is None:
            return None
        reminder = _reminder_row(row)
        where = "WHERE scope = ? AND num = ?"
        if reminder.every_seconds:
            every = reminder.every_seconds
            steps = max(1, math.floor((now - reminder.due) / every) + 1)
            next_due = reminder.due + steps * every
            conn.execute(
                f"UPDATE reminders SET due = ?, last_sent = ?, failures = 0, retry_at = NULL {where}",
                (next_due, now, scope, reminder_id),
            )
        else:
            conn.execute(
                f"UPDATE reminders SET active = 0, last_sent = ?, failures = 0, retry_at = NULL {where}",
                (now, scope, reminder_id),
            )
    return get_reminder(store, scope, reminder_id)


def note_reminder_failure(store: Store, scope: str, reminder_id: int, retry_at: float) -> int:
    """Count a failed delivery and when to try again (kept across restarts); returns the failures so far."""
    with store.transaction() as conn:
        conn.execute(
            "UPDATE reminders SET failures = failures + 1, retry_at = ? WHERE scope = ? AND num = ?",
            (float(retry_at), scope, reminder_id),
        )
        row = conn.execute("SELECT failures FROM reminders WHERE scope = ? AND num = ?", (scope, reminder_id)).fetchone()
    return int(row[0]) if row else 0


def pause_chat_reminders(store: Store, chat: str, now: float) -> int:
    """Pause the active reminders delivered to ``chat`` (it refused delivery); returns how many."""
    with store.transaction() as conn:
        return conn.execute(
            "UPDATE reminders SET paused = ? WHERE chat = ? AND active = 1 AND paused IS NULL", (float(now), chat)
        ).rowcount


def resume_chat_reminders(store: Store, chat: str) -> int:
    """Resume the paused reminders of ``chat`` (it wrote again); returns how many. Reads first: no write when none."""
    if not store.query("SELECT EXISTS(SELECT 1 FROM reminders WHERE chat = ? AND paused IS NOT NULL)", (chat,))[0][0]:
        return 0
    with store.transaction() as conn:
        return conn.execute(
            "UPDATE reminders SET paused = NULL, failures = 0, retry_at = NULL WHERE chat = ? AND paused IS NOT NULL", (chat,)
        ).rowcount
