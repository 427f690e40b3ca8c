"""The PostgreSQL store: the same interface as the SQLite one, for several workers.

Select it with ``HUB_DB=postgresql://user:password@host/dbname`` (install
``scopehub[postgres]``). psycopg 3 with a connection pool; one transaction per
``with store.transaction()`` on a connection of its own, nested blocks in savepoints.

Messages, calls and usage are the SQLite store's methods (their SQL runs on both); the
record functions run unchanged through :class:`~._conn.PgConnection`. What differs is
here: connections, erasure (with VACUUM), moving a scope, and the search entry point.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from .._dialect import Dialect
from .._model import validate_scope
from .._schema import ensure_scope
from .._store import _SCOPED_TABLES, Store
from ..errors import StoreError
from ._conn import NumberLoader, PgConnection
from ._schema import migrate

__all__ = ["POSTGRES", "PostgresStore", "redact_url"]

POSTGRES = Dialect("postgresql", (psycopg.errors.UniqueViolation,))

# Kept by erase (task and reminder numbers are never reused) or not scope data at all.
_NOT_ERASED = ("scope_counters", "schema_version")


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (for messages and logs)."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def _configure(raw: psycopg.Connection) -> None:
    raw.adapters.register_loader("numeric", NumberLoader)


def _connect_kwargs() -> dict[str, Any]:
    # Client-side binding: parameters are quoted into the SQL text by psycopg, so the
    # record functions' untyped placeholders (coalesce(?, x), ? IS NULL) need no casts.
    return {"autocommit": True, "cursor_factory": psycopg.ClientCursor}


class PostgresStore(Store):
    """The hub's memory on PostgreSQL; safe for many threads and many processes.

    Guarantees beyond the SQLite store's: within a scope, message, event and channel
    message ids become visible in increasing order (see ``_schema.py``), so ``id >
    cursor`` never skips a row committed late; ``(scope, ext_id)`` is unique, so a
    transport update stored by two workers is stored once.
    """

    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 30.0,
        erase_vacuum: str | None = None,
    ) -> None:
        # path is for people (prompts, logs): the password never shows.
        self.path = redact_url(url)
        # How erase() vacuums: "plain" (default) or "full"; see erase(). HUB_PG_ERASE_VACUUM sets it.
        self.erase_vacuum = (erase_vacuum or os.environ.get("HUB_PG_ERASE_VACUUM") or "plain").strip().lower()
        if self.erase_vacuum not in ("plain", "full"):
            raise StoreError(f"HUB_PG_ERASE_VACUUM must be 'plain' or 'full', not {self.erase_vacuum!r}")
        self._local = threading.local()
        shown = self.path
        try:
            # One plain connection first: its error says what is wrong (refused, bad
            # password, no such database), where a pool would only time out.
            with psycopg.connect(url, connect_timeout=int(timeout), **_connect_kwargs()) as raw:
                migrate(raw)
        except psycopg.Error as exc:
            raise StoreError(f"cannot use PostgreSQL at {shown}: {str(exc).strip()}") from exc
        self._pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs=_connect_kwargs(),
            configure=_configure,
            # A connection broken by a server restart is replaced, not handed out.
            check=ConnectionPool.check_connection,
            timeout=timeout,
            name="scopehub",
            open=False,
        )
        self._pool.open(wait=True, timeout=timeout)

    # -- plumbing -----------------------------------------------------------------
    @property
    def conn(self) -> Any:
        raise AttributeError("PostgresStore has no single connection: use store.transaction() or store.query()")

    @contextmanager
    def transaction(self) -> Iterator[PgConnection]:
        """One transaction on a pooled connection; rolled back on error. Re-entrant.

        A nested ``with store.transaction()`` on the same thread runs in a SAVEPOINT of
        the outer one (an error inside undoes only the nested block), exactly as on
        SQLite. Other threads get connections of their own. Never ``await`` inside.
        """
        held: PgConnection | None = getattr(self._local, "conn", None)
        if held is not None:
            with held.raw.transaction():
                yield held
            return
        with self._pool.connection() as raw:
            conn = PgConnection(raw)
            self._local.conn = conn
            try:
                with raw.transaction():
                    yield conn
            finally:
                self._local.conn = None

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]:
        """Run a read query and return all rows (inside this thread's transaction, if any)."""
        held: PgConnection | None = getattr(self._local, "conn", None)
        if held is not None:
            return held.execute(sql, params).fetchall()
        with self._pool.connection() as raw:
            return PgConnection(raw).execute(sql, params).fetchall()

    def close(self) -> None:
        self._pool.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self.path!r})"

    def calls(self, scope: str) -> list[dict[str, Any]]:
        """The scope's recorded agent calls, oldest first."""
        with self.transaction() as conn:
            cursor = conn.execute("SELECT * FROM calls WHERE scope = ? ORDER BY id", (scope,))
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    # -- tables -----------------------------------------------------------------------
    def scoped_tables(self) -> list[str]:
        """Every table with a ``scope`` column (the search's too), the known ones in erase order."""
        found = {
            row[0]
            for row in self.query(
                "SELECT table_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND column_name = 'scope'"
            )
        }
        known = [t for t in _SCOPED_TABLES if t in found]
        extra = sorted(found - set(known) - set(_NOT_ERASED))
        # scopes last: a concurrent writer re-lists its scope, never the other way round.
        return [t for t in known if t != "scopes"] + extra + (["scopes"] if "scopes" in found else [])

    def _unique_keys(self, table: str) -> list[list[str]]:
        """The column lists of the table's unique indexes that include ``scope``."""
        rows = self.query(
            "SELECT array_agg(a.attname::text ORDER BY k.ord) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indrelid"
            " CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)"
            " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum"
            " WHERE c.relname = ? AND c.relnamespace = current_schema()::regnamespace AND i.indisunique"
            " GROUP BY i.indexrelid",
            (table,),
        )
        return [list(columns) for (columns,) in rows if "scope" in columns]

    # -- erasure ------------------------------------------------------------------------
    def erase(self, scope: str) -> dict[str, int]:
        """Delete every row of the scope in one transaction, then VACUUM the touched tables.

        What PostgreSQL's MVCC leaves: a DELETE only marks rows dead. Until VACUUM they
        stay in the table and index pages: invisible to new queries, still visible to a
        transaction that began before the erase. The plain VACUUM run here right after
        commit removes them from tables and indexes (no dead tuple is left; the space is
        reusable); it cannot remove rows a still-open older transaction may see, and it
        does not overwrite the freed bytes, which stay in the pages' free space until new
        rows reuse it. ``HUB_PG_ERASE_VACUUM=full`` runs ``VACUUM FULL`` instead: each
        touched table is rewritten from its live rows (no byte of the scope left in the
        data files), but it locks that table for every scope while it runs, so it suits
        small databases or a maintenance window. The write-ahead log keeps the rows'
        inserts until its segments are recycled after checkpoints; WAL archives, replicas
        and backups keep what they copied. Task and reminder counters are kept, as on
        SQLite, so numbers are never given twice.
        """
        validate_scope(scope)
        tables = self.scoped_tables()
        removed: dict[str, int] = {}
        with self.transaction() as conn:
            for table in tables:
                removed[table] = conn.execute(f'DELETE FROM "{table}" WHERE scope = ?', (scope,)).rowcount
        self.flush_deleted([t for t, n in removed.items() if n], full=self.erase_vacuum == "full")
        return removed

    def flush_deleted(self, tables: Sequence[str] | None = None, *, full: bool = False) -> None:
        """VACUUM ``tables`` (default: every scoped table) so deleted rows leave their pages.

        ``full`` rewrites the tables (VACUUM FULL, an exclusive lock per table). VACUUM
        cannot run inside a transaction: it runs on its own autocommit connection.
        """
        names = list(tables) if tables is not None else self.scoped_tables()
        if not names:
            return
        with self._pool.connection() as raw:
            raw.execute(("VACUUM FULL " if full else "VACUUM ") + ", ".join(f'"{name}"' for name in names))

    def scrub(self) -> None:
        """Vacuum every scoped table (what erase does for the tables it touched)."""
        self.flush_deleted()

    def move_scope(self, old: str, new: str, *, old_chat: str | None = None, new_chat: str | None = None) -> dict[str, int]:
        """Make everything of scope ``old`` belong to ``new``, in one transaction (see :meth:`Store.move_scope`).

        Rows that would clash with one ``new`` already has under a unique key are dropped:
        the new scope's row wins, as with SQLite's ``UPDATE OR IGNORE``.
        """
        validate_scope(old)
        validate_scope(new)
        if old == new:
            return {}
        tables = [t for t in self.scoped_tables() if t != "scopes"]
        keys = {table: self._unique_keys(table) for table in tables}
        chat_tables = {
            row[0]
            for row in self.query(
                "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'chat'"
            )
        }
        moved: dict[str, int] = {}
        with self.transaction() as conn:
            if not any(conn.execute(f'SELECT 1 FROM "{t}" WHERE scope = ? LIMIT 1', (old,)).fetchone() for t in tables):
                return {}
            ensure_scope(conn, new, time.time())
            for table, kind in (("tasks", "task"), ("reminders", "reminder")):
                counts = dict(
                    conn.execute(
                        "SELECT scope, last FROM scope_counters WHERE kind = ? AND scope IN (?, ?)", (kind, old, new)
                    ).fetchall()
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
            for table in tables:
                for key in keys[table]:
                    same = " AND ".join(f'n."{c}" = o."{c}"' for c in key if c != "scope") or "TRUE"
                    conn.execute(
                        f'DELETE FROM "{table}" AS o WHERE o.scope = ?'
                        f' AND EXISTS (SELECT 1 FROM "{table}" AS n WHERE n.scope = ? AND {same})',
                        (old, new),
                    )
                moved[table] = conn.execute(f'UPDATE "{table}" SET scope = ? WHERE scope = ?', (new, old)).rowcount
                if old_chat is not None and new_chat is not None and table in chat_tables:
                    conn.execute(f'UPDATE "{table}" SET chat = ? WHERE scope = ? AND chat = ?', (new_chat, new, old_chat))
            conn.execute("DELETE FROM scopes WHERE scope = ?", (old,))
        return moved

    # -- archive search ---------------------------------------------------------------
    def search(self, scope: str, query: str, k: int = 10, **options: Any) -> list[Any]:
        """Search a scope's archive (messages and vault): a list of ``SearchHit``, best first."""
        from .search import search_archive

        return search_archive(self, scope, query, k, **options)

    # -- SQLite-only maintenance --------------------------------------------------------
    def journal_mode(self) -> str:
        return "postgresql"

    def integrity_check(self) -> str:
        """'ok' when the server answers (PostgreSQL checks its pages itself)."""
        self.query("SELECT 1")
        return "ok"
