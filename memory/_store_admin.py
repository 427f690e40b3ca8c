"""A scope as a whole in the store: erased (and scrubbed from the file), moved to another
scope (a group that became a supergroup), and the file's own upkeep and checks.

A part of :class:`~scopehub.memory.Store` (its base class); the PostgreSQL store overrides
what is SQLite's own and shares :func:`move_numbered_rows`.
"""

from __future__ import annotations

import time
from typing import Any

from ._model import validate_scope
from ._schema import ensure_scope

__all__ = ["SCOPED_TABLES", "ScopeAdmin", "move_numbered_rows"]

# Tables holding a scope's data, erased together. Search index rows follow through triggers.
SCOPED_TABLES = (
    "calls",
    "facts",
    "vault",
    "tasks",
    "reminders",
    "events",
    "cursors",
    "claims",
    "channel_messages",
    "channel_reactions",
    "channel_cursors",
    "lessons",
    "agent_traits",
    "goals",
    "plans",
    "feedback",
    "digests",
    "reflections",
    "chat_settings",
    "rejected_updates",
    "messages",
    "scopes",
)


class ScopeAdmin:
    """``erase``, ``move_scope``, ``scrub`` and the file's checks (the store provides ``transaction``, ``query``, ``conn``)."""

    _lock: Any
    conn: Any
    path: Any

    def erase(self, scope: str) -> dict[str, int]:
        """Delete everything of a scope and scrub it from the file; returns rows removed per table."""
        validate_scope(scope)
        removed: dict[str, int] = {}
        with self.transaction() as conn:
            for table in SCOPED_TABLES:
                removed[table] = conn.execute(f"DELETE FROM {table} WHERE scope = ?", (scope,)).rowcount
        self.scrub()
        return removed

    def move_scope(self, old: str, new: str, *, old_chat: str | None = None, new_chat: str | None = None) -> dict[str, int]:
        """Make everything of scope ``old`` belong to ``new``, in one transaction; returns rows moved per table.

        For a Telegram group that became a supergroup (a new chat id): messages, facts,
        vault, tasks, reminders, calls and every other table with a ``scope`` column move,
        and the search index follows through its triggers (stored embeddings are dropped
        and made again by the next indexing). Rows whose ``chat`` is ``old_chat`` (where
        reminders are delivered) get ``new_chat``. Task and reminder numbers are kept; if
        the new scope already numbered some (its first messages came before the move),
        the moved ones continue after them. A row that would clash with one the new scope
        already has (the same unique key) is dropped: the new scope's row wins.
        """
        validate_scope(old)
        validate_scope(new)
        if old == new:
            return {}
        moved: dict[str, int] = {}
        with self.transaction() as conn:
            tables = [t for t in SCOPED_TABLES if t != "scopes"]
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall():
                columns = {row[1] for row in conn.execute(f'PRAGMA table_info("{name}")')}
                if "scope" in columns and name not in (*tables, "scopes", "scope_counters", "search_scopes"):
                    tables.append(name)
            if not any(conn.execute(f'SELECT 1 FROM "{t}" WHERE scope = ? LIMIT 1', (old,)).fetchone() for t in tables):
                return {}
            ensure_scope(conn, new, time.time())
            move_numbered_rows(conn, old, new)
            for table in tables:
                moved[table] = conn.execute(f'UPDATE OR IGNORE "{table}" SET scope = ? WHERE scope = ?', (new, old)).rowcount
                conn.execute(f'DELETE FROM "{table}" WHERE scope = ?', (old,))
                if old_chat is not None and new_chat is not None:
                    columns = {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}
                    if "chat" in columns:
                        conn.execute(f'UPDATE "{table}" SET chat = ? WHERE scope = ? AND chat = ?', (new_chat, new, old_chat))
            conn.execute("DELETE FROM scopes WHERE scope = ?", (old,))
        return moved

    def scrub(self) -> None:
        """Push deleted content out of the WAL and free pages (secure_delete zeroes them)."""
        with self._lock:
            if self.path == ":memory:":
                return
            # FTS5 keeps deleted terms in older index segments until they are merged:
            # compact every full-text index so erased words are really gone.
            for (name,) in self.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5(%'"
            ).fetchall():
                self.conn.execute(f'INSERT INTO "{name}"("{name}") VALUES (\'optimize\')')
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            # FTS segment merges can leave stale copies in pages freed before secure_delete
            # saw them; VACUUM rewrites the file from live rows only.
            self.conn.execute("VACUUM")
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def flush_deleted(self) -> None:
        """Push just-deleted rows out of the write-ahead log (secure_delete zeroed them in the file)."""
        with self._lock:
            if self.path != ":memory:":
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def journal_mode(self) -> str:
        return self.query("PRAGMA journal_mode")[0][0]

    def integrity_check(self) -> str:
        """SQLite's own integrity check: 'ok' or the problems found."""
        rows = self.query("PRAGMA integrity_check")
        return "\n".join(str(row[0]) for row in rows)


def move_numbered_rows(conn: Any, old: str, new: str) -> None:
    """Renumber ``old``'s tasks and reminders after ``new``'s and carry the counters over.

    Part of :meth:`Store.move_scope` on every backend (``conn`` is the transaction's
    connection). Per-scope numbers are never reused, so the moved rows go after the
    target's last number, and the target's counter continues from the old scope's.
    """
    for table, kind in (("tasks", "task"), ("reminders", "reminder")):
        counts = dict(
            conn.execute("SELECT scope, last FROM scope_counters WHERE kind = ? AND scope IN (?, ?)", (kind, old, new)).fetchall()
        )
        shift = counts.get(new, 0)
        if shift:  # two steps: shifting in place would collide with the unique (scope, num)
            conn.execute(f"UPDATE {table} SET num = -(num + ?) WHERE scope = ?", (shift, old))
            conn.execute(f"UPDATE {table} SET num = -num WHERE scope = ? AND num < 0", (old,))
        if old in counts:
            conn.execute(
                "INSERT INTO scope_counters(scope, kind, last) VALUES (?, ?, ?)"
                " ON CONFLICT(scope, kind) DO UPDATE SET last = excluded.last",
                (new, kind, counts[old] + shift),
            )
            conn.execute("DELETE FROM scope_counters WHERE scope = ? AND kind = ?", (old, kind))
