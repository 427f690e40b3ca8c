"""Copy a whole store into a PostgreSQL database: ``agents-hub migrate --from --to``.

Every table, in batches (one ``COPY`` and one statement each, see ``_bulk.py``), ids preserved. Resumable: each batch and the table's
high-water mark (the last key copied) commit together on the target, in
``migrate_progress``, so a killed copy re-run with the same ``--from`` continues after
the last whole batch; rows are also inserted with ``ON CONFLICT DO NOTHING``, so nothing
is ever doubled. At the end the sequences are moved past the copied ids (and past
SQLite's AUTOINCREMENT high marks: an erased newest event's id is never given again),
and the rows of every table are counted on both sides.

The search index is not copied: the target's own search schema indexes what arrives.
Stop the hub while copying; rows written meanwhile would show up as a count mismatch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._store import Store
from ..errors import StoreError
from ._bulk import insert_rows
from ._store import PostgresStore

__all__ = ["COPY_TABLES", "CopyReport", "TableCount", "copy_store"]

# Every table of the store, parents before the rows that point at them.
COPY_TABLES = (
    "scopes",
    "messages",
    "calls",
    "facts",
    "vault",
    "scope_counters",
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
    "deployment_secrets",
    "invites",
    "paired_users",
    "rejected_updates",
)
# The key each table is walked by (its primary key), in order.
_KEYS: dict[str, tuple[str, ...]] = {
    "scopes": ("scope",),
    "scope_counters": ("scope", "kind"),
    "cursors": ("scope", "agent"),
    "claims": ("scope", "key"),
    "channel_reactions": ("scope", "message_id", "agent", "reaction"),
    "channel_cursors": ("scope", "agent"),
    "agent_traits": ("scope", "agent", "kind", "topic"),
    "digests": ("scope",),
    "reflections": ("scope",),
    "chat_settings": ("scope",),
    "deployment_secrets": ("name",),
    "invites": ("code",),
    "paired_users": ("user_id",),
}
_PROGRESS = (
    "CREATE TABLE IF NOT EXISTS migrate_progress (source TEXT NOT NULL, tbl TEXT NOT NULL,"
    " last_key TEXT, copied BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (source, tbl))"
)


@dataclass(frozen=True, slots=True)
class TableCount:
    table: str
    source: int
    target: int

    @property
    def ok(self) -> bool:
        return self.source == self.target


@dataclass
class CopyReport:
    """What a run copied per table, and the final counts on both sides."""

    copied: dict[str, int] = field(default_factory=dict)
    resumed: dict[str, int] = field(default_factory=dict)  # rows already there from an earlier run
    counts: list[TableCount] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.counts) and all(count.ok for count in self.counts)


def _columns(store: Store, table: str) -> list[str]:
    if store.dialect.is_sqlite:
        return [row[1] for row in store.query(f'PRAGMA table_info("{table}")')]
    return [
        row[0]
        for row in store.query(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?"
            " ORDER BY ordinal_position",
            (table,),
        )
    ]


def _autoincrement_marks(source: Store) -> dict[str, int]:
    """SQLite's AUTOINCREMENT high marks (ids given once, even if those rows were erased)."""
    if not source.dialect.is_sqlite:
        return {}
    if not source.query("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'"):
        return {}
    return {name: int(seq) for name, seq in source.query("SELECT name, seq FROM sqlite_sequence")}


def copy_store(
    source: Store,
    target: PostgresStore,
    *,
    source_name: str,
    batch_size: int = 5000,
    on_batch: Callable[[str, int], None] | None = None,
) -> CopyReport:
    """Copy every table of ``source`` into ``target`` (see the module docstring).

    ``source_name`` identifies the source in the progress table (re-run with the same one
    to resume). ``on_batch(table, rows)`` is called after each committed batch.
    Raises :class:`StoreError` when the target already holds other data.
    """
    if batch_size < 1:
        raise StoreError("the batch size must be at least 1")
    report = CopyReport()
    with target.transaction() as conn:
        conn.execute(_PROGRESS)
    progress = {
        table: (last_key, copied)
        for table, last_key, copied in target.query(
            "SELECT tbl, last_key, copied FROM migrate_progress WHERE source = ?", (source_name,)
        )
    }
    if not progress:
        busy = [t for t in COPY_TABLES if target.query(f'SELECT EXISTS (SELECT 1 FROM "{t}")')[0][0]]
        if busy:
            raise StoreError(
                f"the target database {target.path} already has data ({', '.join(busy)}):"
                " migrate into an empty database (or re-run with the same --from to resume)"
            )
    for table in COPY_TABLES:
        key = _KEYS.get(table, ("id",))
        wanted = _columns(target, table)
        have = set(_columns(source, table))
        if not have:
            continue  # an older source without this table: nothing to copy
        columns = [c for c in wanted if c in have]
        # A re-run continues after the last key copied (also picking up rows added since).
        last_key, copied = progress.get(table, (None, 0))
        report.resumed[table] = copied
        report.copied[table] = 0
        after: list[Any] | None = json.loads(last_key) if last_key else None
        select = ", ".join(f'"{c}"' for c in columns)
        order = ", ".join(f'"{c}"' for c in key)
        key_at = [columns.index(c) for c in key]
        while True:
            if after is None:
                rows = source.query(f'SELECT {select} FROM "{table}" ORDER BY {order} LIMIT ?', (batch_size,))
            else:
                bound = f"({order}) > ({', '.join('?' * len(key))})"
                rows = source.query(
                    f'SELECT {select} FROM "{table}" WHERE {bound} ORDER BY {order} LIMIT ?', (*after, batch_size)
                )
            if not rows:
                break
            after = [rows[-1][i] for i in key_at]
            with target.transaction() as conn:
                # One statement per batch (COPY to a temporary table, then INSERT ... SELECT):
                # the search triggers index the batch at once, in linear time (_bulk.py).
                insert_rows(conn, table, columns, rows, key)
                conn.execute(
                    "INSERT INTO migrate_progress(source, tbl, last_key, copied) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (source, tbl) DO UPDATE SET last_key = excluded.last_key,"
                    " copied = migrate_progress.copied + ?",
                    (source_name, table, json.dumps(after), len(rows), len(rows)),
                )
            report.copied[table] += len(rows)
            if on_batch is not None:
                on_batch(table, len(rows))
            if len(rows) < batch_size:
                break
    _reset_sequences(target, _autoincrement_marks(source))
    report.counts = [
        TableCount(
            table,
            source.query(f'SELECT count(*) FROM "{table}"')[0][0] if _columns(source, table) else 0,
            target.query(f'SELECT count(*) FROM "{table}"')[0][0],
        )
        for table in COPY_TABLES
    ]
    return report


def _reset_sequences(target: PostgresStore, marks: dict[str, int]) -> None:
    """Move every id sequence past the copied ids, so new rows never take an old id."""
    with target.transaction() as conn:
        for table in COPY_TABLES:
            if "id" not in _KEYS.get(table, ("id",)):
                continue
            sequence = conn.execute("SELECT pg_get_serial_sequence(?, 'id')", (table,)).fetchone()[0]
            if sequence is None:
                continue
            newest = conn.execute(f'SELECT coalesce(max(id), 0) FROM "{table}"').fetchone()[0]
            last = max(int(newest), marks.get(table, 0))
            if last > 0:
                conn.execute("SELECT setval(?, ?)", (sequence, last))
