"""The PostgreSQL store: the same interface as the SQLite one, for several workers.

Select it with ``HUB_DB=postgresql://user:password@host/dbname`` (install
``scopehub[postgres]``). psycopg 3 with a connection pool; one transaction per
``with store.transaction()`` on a connection of its own, nested blocks in savepoints.

Messages, calls and usage are the SQLite store's methods (their SQL runs on both); the
record functions run unchanged through :class:`~._conn.PgConnection`. What differs is
here: connections, erasure (with VACUUM), moving a scope, and the search entry point.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import psycopg

from .._chatlog import ImportReport, LogRecord
from .._dialect import Dialect
from .._model import validate_scope
from .._schema import ensure_scope
from .._store import Store
from .._store_admin import SCOPED_TABLES, move_numbered_rows
from ..errors import StoreError
from ._bulk import import_batch
from ._conn import NumberLoader, PgConnection
from ._pool import Pool
from ._schema import migrate
from ._url import normalise_url, redact_url
from .search import SEARCH_TABLES

__all__ = ["POSTGRES", "PostgresStore", "redact_url"]

POSTGRES = Dialect("postgresql", (psycopg.errors.UniqueViolation,))

# Kept by erase (task and reminder numbers are never reused) or not scope data at all.
_NOT_ERASED = ("scope_counters", "schema_version")


# How long a statement waits for a lock on a table or row before it fails (SQLSTATE 55P03),
# like SQLite's busy timeout: a table another session holds locked gives one clear line
# ("try again"), never a command that hangs. The scope's writer lock is exempt (_schema._v7).
LOCK_TIMEOUT = 10.0


def _configure(raw: psycopg.Connection, lock_timeout: float = LOCK_TIMEOUT) -> None:
    raw.adapters.register_loader("numeric", NumberLoader)
    # Parameters are quoted into the text (client-side binding), so no two texts repeat and
    # none is worth preparing; without this psycopg would count every text in its LRU.
    raw.prepare_threshold = None
    if lock_timeout > 0:  # 0: the server's own setting (PostgreSQL's default waits forever)
        raw.execute(f"SET lock_timeout = {max(1, round(lock_timeout * 1000))}")


def _connect_kwargs() -> dict[str, Any]:
    # Client-side binding: parameters are quoted into the SQL text by psycopg, so the
    # record functions' untyped placeholders (coalesce(?, x), ? IS NULL) need no casts.
    return {"autocommit": True, "cursor_factory": psycopg.ClientCursor}


def _top_level(conn: PgConnection) -> Iterator[PgConnection]:
    """A transaction on ``conn``: BEGIN queued with its first statements, COMMIT sending the rest."""
    conn.depth = 1
    conn.defer("BEGIN")
    try:
        yield conn
    except BaseException:
        conn.depth = 0
        sent = not (conn.queue and conn.queue[0] == "BEGIN")
        conn.queue.clear()  # what was never sent never ran: nothing of it to undo
        if sent:
            with suppress(psycopg.Error):  # a broken connection rolls back by itself; the pool drops it
                conn.raw.execute("ROLLBACK")
        raise
    conn.depth = 0
    if conn.queue == ["BEGIN"]:
        conn.queue.clear()  # the block ran no statement
        return
    conn.defer("COMMIT")
    try:
        conn.flush()
    except BaseException:
        # A statement sent with COMMIT failed (a block that read no result): the rest of the
        # text did not run, so the transaction is still open, aborted. Roll it back, or the
        # session's next statement on this connection would fail too.
        conn.queue.clear()
        with suppress(psycopg.Error):
            if conn.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.raw.execute("ROLLBACK")
        raise


def _savepoint(conn: PgConnection) -> Iterator[PgConnection]:
    """A nested block in a SAVEPOINT, queued like BEGIN; RELEASE sends what the block queued."""
    name = f"nested_{conn.depth}"
    start = f"SAVEPOINT {name}"
    mark = len(conn.queue)
    conn.defer(start)
    conn.depth += 1

    def unsent() -> bool:
        return len(conn.queue) > mark and conn.queue[mark] == start

    try:
        yield conn
    except BaseException:
        conn.depth -= 1
        if unsent():
            del conn.queue[mark:]  # the savepoint and what ran inside were never sent
        else:
            conn.queue.clear()
            conn.raw.execute(f"ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}")
        raise
    conn.depth -= 1
    if unsent() and len(conn.queue) == mark + 1:
        del conn.queue[mark:]  # nothing ran inside
        return
    # When a block ends its statements have run, nested or not: code may rely on a write
    # being on the server once its block is done (its id drawn, its lock held).
    conn.defer(f"RELEASE SAVEPOINT {name}")
    try:
        conn.flush()
    except BaseException:
        # A statement sent with RELEASE failed (a block that read no result): the rest of
        # the text did not run, so the outer transaction is aborted. Undo this block only.
        conn.queue.clear()
        with suppress(psycopg.Error):
            conn.raw.execute(f"ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}")
        raise


class PostgresStore(Store):
    """The hub's memory on PostgreSQL; safe for many threads and many processes.

    Guarantees, as on SQLite but across processes: within a scope, message, event and
    channel message ids become visible in increasing order (see ``_schema.py``), so
    ``id > cursor`` never skips a row committed late; a write transaction of a scope
    runs alone in that scope (``memory._schema.lock_scope``), so read-then-write steps
    such as a digest's version check stay atomic; ``(scope, ext_id)`` is unique, so a
    transport update stored by two workers is stored once.
    """

    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        max_size: int = 10,
        timeout: float = 30.0,
        erase_vacuum: str | None = None,
        lock_timeout: float | None = None,
    ) -> None:
        url = normalise_url(url)  # a password with @ / : # % works as typed (see _url.py)
        # path is for people (prompts, logs): the password never shows.
        self.path = redact_url(url)
        # lock_timeout: seconds a statement waits for a locked table or row (LOCK_TIMEOUT;
        # 0 leaves the server's setting). The hub passes HUB_PG_LOCK_TIMEOUT.
        # How erase() vacuums: "plain" (default) or "full"; see erase(). The hub passes HUB_PG_ERASE_VACUUM.
        self.erase_vacuum = (erase_vacuum or "plain").strip().lower()
        if self.erase_vacuum not in ("plain", "full"):
            raise StoreError(f"the vacuum after an erase (HUB_PG_ERASE_VACUUM) is 'plain' or 'full', not {erase_vacuum!r}")
        self._local = threading.local()
        self._changed: set[str] = set()  # tables with dead row versions since the last flush_deleted()
        try:
            # One plain connection first: its error says what is wrong (refused, bad
            # password, no such database), where a pool would only time out.
            with psycopg.connect(url, connect_timeout=max(2, int(timeout)), **_connect_kwargs()) as raw:
                migrate(raw)
        except psycopg.Error as exc:
            raise StoreError(f"cannot use PostgreSQL at {self.path}: {str(exc).strip()}") from exc
        # No round trip per checkout, failing fast while the server is down (see _pool.py).
        self._pool = Pool(
            url,
            max_size=max_size,
            wait_timeout=timeout,
            kwargs=_connect_kwargs(),
            configure=functools.partial(_configure, lock_timeout=LOCK_TIMEOUT if lock_timeout is None else lock_timeout),
            redacted=self.path,
        )
        with self._pool.connection():
            pass  # one connection open and ready before the first message

    # -- plumbing -----------------------------------------------------------------
    @property
    def conn(self) -> Any:
        raise AttributeError("PostgresStore has no single connection: use store.transaction() or store.query()")

    @contextmanager
    def session(self) -> Iterator[None]:
        """Hold one pooled connection on this thread for the block: every store call in it
        (queries, transactions, nested ones) uses that connection, outside a transaction
        between calls. A turn's stage runs in one session: one checkout, not one per call.
        Re-entrant; never ``await`` inside (the connection belongs to this thread).
        """
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self._pool.connection() as raw:
            self._local.conn = PgConnection(raw, self._changed)
            try:
                yield
            finally:
                self._local.conn = None

    @contextmanager
    def transaction(self) -> Iterator[PgConnection]:
        """One transaction on a pooled connection; rolled back on error. Re-entrant.

        A nested ``with store.transaction()`` on the same thread runs in a SAVEPOINT of
        the outer one (an error inside undoes only the nested block), exactly as on
        SQLite. Inside a :meth:`session` it runs on the session's connection. Other
        threads get connections of their own. Never ``await`` inside.

        ``BEGIN`` and ``SAVEPOINT`` travel with the block's first statement (see
        :class:`PgConnection`); a block that ran no statement sends nothing at all.
        """
        held: PgConnection | None = getattr(self._local, "conn", None)
        if held is not None:
            if held.depth:
                yield from _savepoint(held)
            else:
                yield from _top_level(held)
            return
        with self._pool.connection() as raw:
            conn = PgConnection(raw, self._changed)
            self._local.conn = conn
            try:
                yield from _top_level(conn)
            finally:
                self._local.conn = None

    @contextmanager
    def _reading(self) -> Iterator[PgConnection]:
        """The connection a read goes to: this thread's session or transaction, if any, else a pooled one."""
        held: PgConnection | None = getattr(self._local, "conn", None)
        if held is not None:
            yield held
            return
        with self._pool.connection() as raw:
            yield PgConnection(raw, self._changed)

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]:
        """Run a read query and return all rows (inside this thread's session or transaction, if any)."""
        with self._reading() as conn:
            return conn.execute(sql, params).fetchall()

    def query_batch(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple]]:
        """Several read queries in one round trip (one query text), in order; each one's rows."""
        with self._reading() as conn:
            return conn.read_batch(statements)

    @property
    def unavailable_for(self) -> float | None:
        """Seconds since the server was found unreachable (requests fail fast meanwhile); None while it answers."""
        return self._pool.down_for

    def _import_batch(self, batch: list[LogRecord], report: ImportReport) -> None:
        """One batch in one statement (COPY), its search index in one go (see ``_bulk.py``)."""
        with self.transaction() as conn:
            added, scopes = import_batch(conn, batch)
        report.scopes.update(scopes)
        report.added += added
        report.skipped += len(batch) - added

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
        known = [t for t in SCOPED_TABLES if t in found]
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
        """VACUUM ``tables`` so deleted rows leave their pages; by default the tables this
        store deleted or updated rows in since the last call (a forgotten fact, an edited
        message: their old versions are dead tuples until VACUUM).

        ``full`` rewrites the tables (VACUUM FULL, an exclusive lock per table). VACUUM
        cannot run inside a transaction: it runs on its own autocommit connection.
        """
        if tables is None:
            names = sorted(self._changed)
            self._changed.clear()
        else:
            names = list(tables)
            self._changed.difference_update(names)
        if {"messages", "vault"} & set(names):  # their triggers rewrote the search tables' rows
            names += [t for t in SEARCH_TABLES if t not in names]
        if not names:
            return
        with self._pool.connection() as raw:
            raw.execute(("VACUUM FULL " if full else "VACUUM ") + ", ".join(f'"{name}"' for name in names))

    def scrub(self) -> None:
        """Vacuum every scoped table (what erase does for the tables it touched)."""
        self.flush_deleted(self.scoped_tables())

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
            move_numbered_rows(conn, old, new)
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
