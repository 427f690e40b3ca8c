"""The archive search's SQLite schema: one FTS5 index over every scope's messages and vault, its triggers, per-scope counts.

Tunable constants live in :mod:`._search_base`; ``eval/search_cv.py`` sets them in every search module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils
from ._search_base import _CONTEXT_TURNS, _SCOPE_SPAN, _VAULT_OFFSET

# -- schema ---------------------------------------------------------------------------------


def _key_expr(scope: str, id_expr: str, offset: int = 0) -> str:
    num = f"(SELECT num FROM search_scopes WHERE scope = {scope})"
    return (
        f"{num} * {_SCOPE_SPAN} + {offset} + {id_expr}"
        if offset
        else f"{num} * {_SCOPE_SPAN} + {id_expr}"
    )


def _ctx_expr(scope: str, id_expr: str) -> str:
    return (
        "coalesce((SELECT group_concat(text, ' ') FROM (SELECT text FROM messages"
        f" WHERE scope = {scope} AND id < {id_expr} ORDER BY id DESC LIMIT {_CONTEXT_TURNS})), '')"
    )


def create_search_schema(db: sqlite_utils.Database) -> None:
    """Migration step: the FTS5 index, its triggers, the vector table; indexes existing rows."""
    conn = db.conn
    conn.execute("CREATE TABLE search_scopes (num INTEGER PRIMARY KEY, scope TEXT NOT NULL UNIQUE)")
    conn.execute(
        "CREATE VIRTUAL TABLE search_fts USING fts5(body, ctx,"
        " tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    conn.execute("CREATE VIRTUAL TABLE search_vocab USING fts5vocab(search_fts, 'row')")
    conn.execute(
        "CREATE TABLE search_vectors (doc INTEGER PRIMARY KEY, model TEXT NOT NULL, vec BLOB NOT NULL)"
    )
    msg_new = _key_expr("new.scope", "new.id")
    msg_old = _key_expr("old.scope", "old.id")
    vault_new = _key_expr("new.scope", "new.id", _VAULT_OFFSET)
    vault_old = _key_expr("old.scope", "old.id", _VAULT_OFFSET)
    vault_text = "CASE WHEN new.title = '' THEN new.body ELSE new.title || char(10) || new.body END"
    add_message = (
        "INSERT OR IGNORE INTO search_scopes(scope) VALUES (new.scope);"
        f" INSERT INTO search_fts(rowid, body, ctx) VALUES ({msg_new}, new.text, {_ctx_expr('new.scope', 'new.id')});"
    )
    drop_message = (
        f"DELETE FROM search_fts WHERE rowid = {msg_old};"
        f" DELETE FROM search_vectors WHERE doc = {msg_old};"
    )
    add_vault = (
        "INSERT OR IGNORE INTO search_scopes(scope) VALUES (new.scope);"
        f" INSERT INTO search_fts(rowid, body, ctx) VALUES ({vault_new}, {vault_text}, '');"
    )
    drop_vault = (
        f"DELETE FROM search_fts WHERE rowid = {vault_old};"
        f" DELETE FROM search_vectors WHERE doc = {vault_old};"
    )
    conn.execute(
        f"CREATE TRIGGER search_messages_ai AFTER INSERT ON messages BEGIN {add_message} END"
    )
    conn.execute(
        f"CREATE TRIGGER search_messages_ad AFTER DELETE ON messages BEGIN {drop_message} END"
    )
    conn.execute(
        f"CREATE TRIGGER search_messages_au AFTER UPDATE OF text, scope ON messages BEGIN {drop_message} {add_message} END"
    )
    conn.execute(f"CREATE TRIGGER search_vault_ai AFTER INSERT ON vault BEGIN {add_vault} END")
    conn.execute(f"CREATE TRIGGER search_vault_ad AFTER DELETE ON vault BEGIN {drop_vault} END")
    conn.execute(
        f"CREATE TRIGGER search_vault_au AFTER UPDATE OF title, body, scope ON vault BEGIN {drop_vault} {add_vault} END"
    )
    # Erasing a scope drops its whole range, whether its messages go before or after the
    # scope row: a message deleted later finds no scope number and is already gone.
    lo = f"(SELECT num FROM search_scopes WHERE scope = old.scope) * {_SCOPE_SPAN}"
    conn.execute(
        "CREATE TRIGGER search_scopes_ad AFTER DELETE ON scopes BEGIN"
        f" DELETE FROM search_fts WHERE rowid BETWEEN {lo} AND {lo} + {_SCOPE_SPAN - 1};"
        f" DELETE FROM search_vectors WHERE doc BETWEEN {lo} AND {lo} + {_SCOPE_SPAN - 1};"
        " DELETE FROM search_scopes WHERE scope = old.scope;"
        " END"
    )
    # Rows written before this migration.
    conn.execute(
        "INSERT OR IGNORE INTO search_scopes(scope)"
        " SELECT scope FROM (SELECT DISTINCT scope FROM messages UNION SELECT DISTINCT scope FROM vault) ORDER BY scope"
    )
    conn.execute(
        "INSERT INTO search_fts(rowid, body, ctx)"
        f" SELECT {_key_expr('m.scope', 'm.id')}, m.text, {_ctx_expr('m.scope', 'm.id')} FROM messages m"
    )
    conn.execute(
        "INSERT INTO search_fts(rowid, body, ctx)"
        f" SELECT {_key_expr('v.scope', 'v.id', _VAULT_OFFSET)},"
        " CASE WHEN v.title = '' THEN v.body ELSE v.title || char(10) || v.body END, '' FROM vault v"
    )


def count_search_documents(db: sqlite_utils.Database) -> None:
    """Migration step: ``search_scopes.docs``, each scope's indexed documents (BM25's N,
    so that idf is the scope's own), counted now and kept by triggers from then on."""
    conn = db.conn
    conn.execute("ALTER TABLE search_scopes ADD COLUMN docs INTEGER NOT NULL DEFAULT 0")
    # Separate triggers beside the index's: an upsert, so that whichever fires first, a
    # new scope's row exists and its first document is counted.
    add = "INSERT INTO search_scopes(scope, docs) VALUES (new.scope, 1) ON CONFLICT(scope) DO UPDATE SET docs = docs + 1;"
    drop = "UPDATE search_scopes SET docs = docs - 1 WHERE scope = old.scope;"
    for table in ("messages", "vault"):
        conn.execute(f"CREATE TRIGGER search_count_{table}_ai AFTER INSERT ON {table} BEGIN {add} END")
        conn.execute(f"CREATE TRIGGER search_count_{table}_ad AFTER DELETE ON {table} BEGIN {drop} END")
        conn.execute(
            f"CREATE TRIGGER search_count_{table}_au AFTER UPDATE OF scope ON {table}"
            f" WHEN old.scope IS NOT new.scope BEGIN {drop} {add} END"
        )
    conn.execute(
        "UPDATE search_scopes SET docs = (SELECT count(*) FROM messages m WHERE m.scope = search_scopes.scope)"
        " + (SELECT count(*) FROM vault v WHERE v.scope = search_scopes.scope)"
    )
