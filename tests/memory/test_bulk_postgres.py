"""Bulk writes on PostgreSQL (``memory/postgres/_bulk.py``): an import or a migrate's batch is
one statement, and what it stores is exactly what the row-by-row path stored: the same
messages, replies resolved the same way, the same search index (documents, per-scope
vocabulary with its counts, documents per scope)."""

from __future__ import annotations

import json
import types

import pytest

from scopehub.memory import LogRecord, open_store, read_chatlog
from scopehub.memory._store import Store

pytest.importorskip("psycopg", reason="the PostgreSQL driver is not installed (pip install -e '.[dev]')")

A, B = "user:1", "group:-100"


def records() -> list[LogRecord]:
    """Two scopes; replies backwards (in and across batches), a forward reference, a
    reply to a missing id, an id given twice, a NUL character, the same id in both scopes."""
    out = []
    for i in range(23):
        scope = A if i % 3 else B
        out.append(
            LogRecord(
                id=f"m{i}",
                scope=scope,
                role="user" if i % 2 == 0 else "agent",
                text=f"message {i} about the quarterly report and milk {'x' * (i % 4)}",
                ts=1_700_000_000.0 + i,
                agent=None if i % 2 == 0 else "tasks",
                reply_to=f"m{i - 3}" if i >= 3 else None,
            )
        )
    out.append(LogRecord(id="fwd", scope=A, role="user", text="points ahead", ts=1_700_000_100.0, reply_to="later"))
    out.append(LogRecord(id="later", scope=A, role="agent", text="the later one", ts=1_700_000_101.0, agent="notes", reply_to="fwd"))
    out.append(LogRecord(id="m4", scope=A, role="user", text="a second m4: skipped", ts=1_700_000_102.0))
    out.append(LogRecord(id="orphan", scope=B, role="user", text="nul \x00 inside", ts=1_700_000_103.0, reply_to="nowhere"))
    out.append(LogRecord(id="m0", scope=A, role="user", text="m0 again, in the other scope", ts=1_700_000_104.0))
    return out


def row_by_row(store):
    """``store`` importing with the generic row-by-row SQL (one INSERT per message), as before."""
    store._import_batch = types.MethodType(Store._import_batch, store)
    return store


def stored(store) -> list[tuple]:
    """Every message as stored, its reply named by the replied message's external id."""
    rows = store.query(
        "SELECT m.scope, m.ext_id, m.role, m.text, m.ts, m.agent, m.also_sees, m.via, m.needs, p.ext_id"
        " FROM messages m LEFT JOIN messages p ON p.id = m.reply_to ORDER BY m.id"
    )
    return [tuple(row) for row in rows]


def search_index(store) -> tuple:
    docs = store.query(
        "SELECT d.kind, m.ext_id, d.scope, d.tsv::text FROM search_docs d JOIN messages m ON m.id = d.id AND d.kind = 0"
        " ORDER BY m.scope, m.ext_id"
    )
    terms = store.query("SELECT lexeme, scope, docs FROM search_terms ORDER BY lexeme, scope")
    stats = store.query("SELECT scope, docs FROM search_stats ORDER BY scope")
    return [tuple(r) for r in docs], [tuple(r) for r in terms], [tuple(r) for r in stats]


def test_a_bulk_import_stores_what_the_row_by_row_import_stored(postgres_store_url, postgres_server, tmp_path):
    sqlite = open_store(tmp_path / "rows.db")
    bulk = open_store(postgres_store_url)
    other = postgres_server.new_database(migrated=True)
    rowwise = row_by_row(open_store(other))
    try:
        for store in (sqlite, bulk):
            first = store.import_records(records(), batch_size=7)
            again = store.import_records(records(), batch_size=7)
            assert (first.added, first.skipped, again.added, again.skipped) == (27, 1, 0, 28)
        # The same records through the generic row-by-row path, on PostgreSQL.
        rowwise.import_records(records(), batch_size=7)
        expected = stored(sqlite)
        # PostgreSQL cannot hold U+0000: it is kept as U+FFFD, on every write path alike.
        expected = [tuple(v.replace("\x00", "\ufffd") if isinstance(v, str) else v for v in row) for row in expected]
        assert stored(bulk) == expected == stored(rowwise)
        assert dict(stored_reply for stored_reply in ((r[1], r[9]) for r in stored(bulk) if r[0] == A))["later"] == "fwd"
        assert dict((r[1], r[9]) for r in stored(bulk) if r[0] == A)["fwd"] is None  # pointed ahead: left empty, as before
        assert search_index(bulk) == search_index(rowwise)
        assert [hit.text for hit in bulk.search(A, "quarterly report", k=3)] == [hit.text for hit in rowwise.search(A, "quarterly report", k=3)]
    finally:
        for store in (sqlite, bulk, rowwise):
            store.close()
        postgres_server.drop_database(other)


def test_a_migrated_database_has_the_search_index_row_by_row_writes_give(postgres_store_url, postgres_server, tmp_path):
    from scopehub.memory.postgres.copy import copy_store

    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r.model_dump()) + "\n" for r in records()[:23]))
    with open_store(tmp_path / "old.db") as old:
        old.import_records(read_chatlog(str(log)))
        with open_store(postgres_store_url) as new:
            report = copy_store(old, new, source_name="old.db", batch_size=5)
            assert report.ok
            other = postgres_server.new_database(migrated=True)
            try:
                with row_by_row(open_store(other)) as rowwise:
                    rowwise.import_records(read_chatlog(str(log)))
                    assert stored(new) == stored(rowwise)
                    assert search_index(new) == search_index(rowwise)
            finally:
                postgres_server.drop_database(other)
