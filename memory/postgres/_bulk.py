"""Bulk writes to PostgreSQL in linear time: ``import`` of a chat log and ``migrate``'s copy.

Row by row, every INSERT into ``messages`` (or ``vault``) is a statement, and each
statement runs the search index's statement-level trigger: the same ``search_stats`` row
and the scope's ``search_terms`` rows are updated again for every message of the batch,
inside one transaction, and each update has to step over all the row versions the
batch left before it: quadratic (2,500 rows of one scope took 6.3 s, 5,000 took 25.6 s).
Here a batch is one statement: its rows go to a temporary table with ``COPY``, then one
``INSERT ... SELECT`` moves them, so the trigger indexes the whole batch at once and
every search row is written once per batch.

Imported messages get their ids the way the ``hub_ordered_id`` trigger gives them (the
scope's advisory lock, then the sequence), drawn here for the whole batch so that a
reply can point at a message of the same batch; what a row ends up holding is what the
row-by-row import stored.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from .._chatlog import LogRecord
from ._conn import PgConnection, _without_nul

__all__ = ["import_batch", "insert_rows"]

_MESSAGE_COLUMNS = ("id", "scope", "ext_id", "chat", "sender", "role", "text", "ts", "reply_to", "agent", "also_sees", "via", "needs")


def _staging(conn: PgConnection, table: str) -> str:
    """A temporary table shaped like ``table``, emptied at every commit (one per connection)."""
    name = f"_stage_{table}"
    conn.raw.execute(
        f'CREATE TEMP TABLE IF NOT EXISTS "{name}" (LIKE "{table}" INCLUDING DEFAULTS) ON COMMIT DELETE ROWS'
    )
    return name


def _copy(conn: PgConnection, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    names = ", ".join(f'"{c}"' for c in columns)
    with conn.raw.cursor().copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
        for row in rows:
            copy.write_row([_without_nul(value) for value in row])


def insert_rows(conn: PgConnection, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], order: Sequence[str]) -> int:
    """Insert ``rows`` into ``table`` in one statement, skipping those whose key is there
    already (``ON CONFLICT DO NOTHING``); returns how many were inserted. Inside the
    caller's transaction."""
    if not rows:
        return 0
    stage = _staging(conn, table)
    _copy(conn, stage, columns, rows)
    names = ", ".join(f'"{c}"' for c in columns)
    ordered = ", ".join(f'"{c}"' for c in order)
    cursor = conn.raw.execute(
        f'INSERT INTO "{table}" ({names}) SELECT {names} FROM "{stage}" ORDER BY {ordered} ON CONFLICT DO NOTHING'
    )
    conn.raw.execute(f'TRUNCATE "{stage}"')  # the next batch of this transaction starts empty
    return max(0, cursor.rowcount)


def import_batch(conn: PgConnection, batch: Sequence[LogRecord]) -> tuple[int, list[str]]:
    """One batch of ``import_records`` (records validated, scopes set), in the caller's
    transaction: ``(messages added, scopes)``; the rest were skipped.

    Idempotent by (scope, id) as the row-by-row import: a record whose id the scope has
    already, or that came earlier in the batch, is skipped. ``reply_to`` is the id of the
    message the scope stored under that id *before* this one (a forward reference stays
    empty, as it did).
    """
    raw = conn.raw
    scopes = sorted({record.scope for record in batch if record.scope})
    now = time.time()
    for scope in scopes:  # the order the id trigger would take them in; sorted: no deadlock
        raw.execute("SELECT hub_lock_scope(%s)", (scope,))  # unbounded wait (see _schema._v7)
    raw.cursor().executemany(
        "INSERT INTO scopes(scope, kind, created) VALUES (%s, %s, %s) ON CONFLICT(scope) DO NOTHING",
        [(scope, scope.split(":", 1)[0], now) for scope in scopes],
    )
    wanted = {(r.scope, r.id) for r in batch} | {(r.scope, r.reply_to) for r in batch if r.reply_to is not None}
    known: dict[tuple[str, str], int] = {}
    ext_ids = sorted({ext for _, ext in wanted})
    for scope, ext_id, message_id in raw.execute(
        "SELECT scope, ext_id, id FROM messages WHERE scope = ANY(%s) AND ext_id = ANY(%s)", (scopes, ext_ids)
    ).fetchall():
        if (scope, ext_id) in wanted:
            known[(scope, ext_id)] = int(message_id)
    fresh: list[LogRecord] = []
    taken = set(known)
    for record in batch:
        key = (record.scope, record.id)
        if key in taken:
            continue
        taken.add(key)
        fresh.append(record)
    if fresh:
        ids = sorted(
            int(row[0])
            for row in raw.execute("SELECT nextval('messages_id_seq') FROM generate_series(1, %s)", (len(fresh),)).fetchall()
        )
        rows = []
        for record, message_id in zip(fresh, ids, strict=True):
            reply_to = known.get((record.scope, record.reply_to)) if record.reply_to is not None else None
            rows.append(
                (
                    message_id, record.scope, record.id, record.chat, record.sender, record.role, record.text,
                    record.ts, reply_to, record.agent, json.dumps(list(record.also_sees)),
                    "import" if record.agent else None, json.dumps(list(record.needs)),
                )
            )  # fmt: skip
            known[(record.scope, record.id)] = message_id  # later records of the batch may reply to it
        _copy(conn, "messages", _MESSAGE_COLUMNS, rows)
    return len(fresh), scopes
