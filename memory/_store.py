"""The SQLite store: one connection, WAL mode, short explicit transactions.

Every write commits before it returns, so a message is durable before any LLM call.
The interface stays narrow (append, window, route, calls, erase...) so another
backend can serve several workers later without touching the hub. Its parts by what
they do: the call records in _store_calls.py (CallLog), a scope erased or moved and the
file's upkeep in _store_admin.py (ScopeAdmin), both base classes of :class:`Store`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ._chatlog import ImportReport, LogRecord
from ._dialect import SQLITE, Dialect
from ._model import Message, NewMessage, validate_scope
from ._schema import SCHEMA_VERSION, ensure_scope, migrate
from ._store_admin import ScopeAdmin
from ._store_calls import CallLog, returned_id
from .errors import DuplicateMessage, InvalidRecord, StoreError

__all__ = ["Store"]

_MESSAGE_COLUMNS = "id, scope, role, text, ts, agent, also_sees, via, sender, chat, reply_to, ext_id, needs"


def _row_to_message(row: Sequence[Any]) -> Message:
    return Message(
        id=row[0],
        scope=row[1],
        role=row[2],
        text=row[3],
        ts=row[4],
        agent=row[5],
        also_sees=tuple(json.loads(row[6])) if row[6] and row[6] != "[]" else (),
        via=row[7],
        sender=row[8],
        chat=row[9],
        reply_to=row[10],
        ext_id=row[11],
        needs=tuple(json.loads(row[12])) if row[12] and row[12] != "[]" else (),
    )


class Store(CallLog, ScopeAdmin):
    """The hub's memory: messages and routes, facts, vault, tasks, reminders, token records.

    Thread-safe for use from one event loop plus worker threads: all access goes through
    one lock, which also makes this process the single writer.

    The message, call and usage methods are written in SQL both backends accept (see
    :mod:`._dialect`); :class:`~scopehub.memory.postgres.PostgresStore` reuses them and
    replaces only the plumbing (connections, transactions, erasure, scope moves).
    """

    dialect: Dialect = SQLITE

    def __init__(self, path: str | Path = ":memory:", *, busy_timeout_ms: int = 10_000) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=busy_timeout_ms / 1000)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from exc
        self._lock = threading.RLock()
        self._depth = 0  # nesting of transaction() on the thread holding the lock
        self._conn = conn
        self._db: Any = None
        deadline = time.monotonic() + busy_timeout_ms / 1000
        while True:
            try:
                self._prepare(conn, busy_timeout_ms)
                break
            except sqlite3.OperationalError as exc:
                # Switching a brand-new file to WAL while another process does the same can
                # report "locked" without waiting for the busy timeout: wait and try again.
                if "locked" in str(exc) and time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                conn.close()
                raise StoreError(f"cannot use database {self.path}: {exc}") from exc
            except sqlite3.DatabaseError as exc:
                conn.close()
                raise StoreError(f"cannot use database {self.path}: {exc}") from exc

    def _prepare(self, conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        if self.path != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        # Erased text must not linger in free pages of the file.
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("PRAGMA foreign_keys = OFF")
        # Only a database behind (or ahead of) this release needs migrate(), and sqlite-utils
        # with it: importing it is a fifth of a start.
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            migrate(self.db)

    # -- plumbing -----------------------------------------------------------------
    @property
    def db(self) -> Any:
        """The connection as a ``sqlite_utils.Database`` (migrations, maintenance), made on first use."""
        if self._db is None:
            import sqlite_utils

            self._db = sqlite_utils.Database(self._conn)
        return self._db

    @property
    def conn(self) -> sqlite3.Connection:
        return self._conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One short write transaction; rolled back on error. Re-entrant.

        A nested ``with store.transaction()`` on the thread that holds the outer one runs
        in a SAVEPOINT of it: an error inside undoes only the nested block, and nothing
        is committed before the outer block ends. So a tool's row and its event compose
        (``with store.transaction(): add_task(...); emit_event(...)`` keeps both or
        neither). Other threads wait on the store's lock until the outer block ends.
        Never ``await`` inside a transaction: another coroutine of the same thread would
        re-enter it as if it were nested.
        """
        with self._lock:
            conn = self.conn
            if self._depth:
                yield from self._savepoint(conn)
                return
            conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
            finally:
                self._depth = 0

    def _savepoint(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        name = f"nested_{self._depth}"
        conn.execute(f"SAVEPOINT {name}")
        self._depth += 1
        try:
            yield conn
        except BaseException:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        else:
            conn.execute(f"RELEASE {name}")
        finally:
            self._depth -= 1

    @contextmanager
    def session(self) -> Iterator[None]:
        """A block of store calls from one thread (a stage of a turn). SQLite has one
        connection for everything, so there is nothing to hold; PostgreSQL holds one
        pooled connection for the block (see ``PostgresStore.session``)."""
        yield

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]:
        """Run a read query and return all rows."""
        with self._lock:
            return self.conn.execute(sql, params).fetchall()

    def query_batch(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple]]:
        """Run several read queries, in order; each one's rows. PostgreSQL sends them in one
        round trip (one query text): for reads that do not depend on each other."""
        with self._lock:
            return [self.conn.execute(sql, params).fetchall() for sql, params in statements]

    def close(self) -> None:
        with self._lock, suppress(sqlite3.Error):
            self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- messages -------------------------------------------------------------------
    def append(self, message: NewMessage) -> Message:
        """Store a message and commit; returns it with its id."""
        scope = validate_scope(message.scope)
        if message.role not in ("user", "agent"):
            raise InvalidRecord(f"role must be 'user' or 'agent', not {message.role!r}")
        if not isinstance(message.text, str):
            raise InvalidRecord("text must be a string")
        ts = time.time() if message.ts is None else float(message.ts)
        try:
            with self.transaction() as conn:
                ensure_scope(conn, scope, time.time())
                inserted = conn.execute(
                    "INSERT INTO messages(scope, ext_id, chat, sender, role, text, ts, reply_to, agent, also_sees, via, needs)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (
                        scope,
                        message.ext_id,
                        message.chat,
                        message.sender,
                        message.role,
                        message.text,
                        ts,
                        message.reply_to,
                        message.agent,
                        json.dumps(list(message.also_sees)),
                        message.via,
                        json.dumps(list(message.needs)),
                    ),
                )
                taken = returned_id(self.dialect, inserted)
            new_id = taken()
        except self.dialect.integrity_errors as exc:
            raise DuplicateMessage(f"message {message.ext_id!r} is already stored in {scope}") from exc
        return Message(
            id=new_id,
            scope=scope,
            role=message.role,
            text=message.text,
            ts=ts,
            agent=message.agent,
            also_sees=tuple(message.also_sees),
            via=message.via,
            sender=message.sender,
            chat=message.chat,
            reply_to=message.reply_to,
            ext_id=message.ext_id,
            needs=tuple(message.needs),
        )

    def set_route(self, message_id: int, agent: str, also_sees: Sequence[str], via: str) -> None:
        """Tag a stored message with its route."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE messages SET agent = ?, also_sees = ?, via = ? WHERE id = ?",
                (agent, json.dumps(list(also_sees)), via, message_id),
            )

    def set_ext_id(self, message_id: int, ext_id: str) -> None:
        """Record the transport's id of a stored message (e.g. the Telegram id of a sent reply)."""
        with self.transaction() as conn:
            conn.execute("UPDATE messages SET ext_id = ? WHERE id = ?", (ext_id, message_id))

    def edit_text(self, scope: str, message_id: int, text: str) -> bool:
        """Replace a stored message's text (the person edited it); its route stays. False when unknown.

        The search index follows through its triggers; the next messages, which were
        indexed with this one's text as their context, are re-indexed too, so the old
        words are really gone from search.
        """
        from ._search_base import _CONTEXT_TURNS

        if not isinstance(text, str):
            raise InvalidRecord("text must be a string")
        with self.transaction() as conn:
            if not conn.execute("UPDATE messages SET text = ? WHERE scope = ? AND id = ?", (text, scope, message_id)).rowcount:
                return False
            # Rewriting the same text fires the update trigger, which re-reads the neighbours.
            conn.execute(
                "UPDATE messages SET text = text WHERE id IN"
                " (SELECT id FROM messages WHERE scope = ? AND id > ? ORDER BY id LIMIT ?)",
                (scope, message_id, _CONTEXT_TURNS),
            )
        return True

    def is_answered(self, message_id: int) -> bool:
        """Whether the message got its answer: a stored agent reply, or a failed agent call's apology.

        A failed call of the hub's own (the LLM router's, the extractor's) answers nothing."""
        return self.answered_of_rows(self.query(*self.is_answered_query(message_id)))

    @staticmethod
    def is_answered_query(message_id: int) -> tuple[str, tuple[Any, ...]]:
        """The read of :meth:`is_answered`, for a batch of reads; :meth:`answered_of_rows` after."""
        return (
            "SELECT EXISTS(SELECT 1 FROM messages WHERE reply_to = ? AND role = 'agent')"
            " OR EXISTS(SELECT 1 FROM calls WHERE message_id = ? AND ok = 0 AND coalesce(via, '') NOT IN ('router', 'extractor'))",
            (message_id, message_id),
        )

    @staticmethod
    def answered_of_rows(rows: Sequence[Sequence[Any]]) -> bool:
        """What :meth:`is_answered` says, from the rows of :meth:`is_answered_query`."""
        return bool(rows[0][0])

    def get(self, scope: str, message_id: int) -> Message | None:
        """One message of ``scope`` by id; an id of another scope is as if it did not exist."""
        rows = self.query(*self.get_query(scope, message_id))
        return _row_to_message(rows[0]) if rows else None

    @staticmethod
    def get_query(scope: str, message_id: int) -> tuple[str, tuple[Any, ...]]:
        """The read of :meth:`get`, for a batch of reads (:meth:`query_batch`); :meth:`message_of_row` after."""
        return f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = ? AND id = ?", (scope, message_id)

    @staticmethod
    def message_of_row(row: Sequence[Any]) -> Message:
        """The message of a row read by one of the ``*_query`` reads."""
        return _row_to_message(row)

    def find_ext(self, scope: str, ext_id: str) -> Message | None:
        """A message by its external id (a chat-log or Telegram id) within a scope."""
        rows = self.query(*self.find_ext_query(scope, ext_id))
        return _row_to_message(rows[0]) if rows else None

    @staticmethod
    def find_ext_query(scope: str, ext_id: str) -> tuple[str, tuple[Any, ...]]:
        """The read of :meth:`find_ext`, for a batch of reads; :meth:`message_of_row` after."""
        return f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = ? AND ext_id = ?", (scope, ext_id)

    def window(self, scope: str, size: int, *, up_to: int | None = None, after: int = 0) -> list[Message]:
        """The scope's last ``size`` messages in time order (up to and including id ``up_to``;
        with ``after``, only those of them after that id)."""
        if size <= 0:
            return []
        return self.window_of_rows(self.query(*self.window_query(scope, size, up_to=up_to, after=after)))

    @staticmethod
    def window_query(scope: str, size: int, *, up_to: int | None = None, after: int = 0) -> tuple[str, tuple[Any, ...]]:
        """The read of :meth:`window` (``size`` above 0), for a batch of reads; :meth:`window_of_rows` after."""
        sql, params = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = ?", [scope]
        if up_to is not None:
            sql, params = sql + " AND id <= ?", [*params, up_to]
        if after:
            sql, params = sql + " AND id > ?", [*params, after]
        return sql + " ORDER BY id DESC LIMIT ?", (*params, size)

    @staticmethod
    def window_of_rows(rows: Sequence[Sequence[Any]]) -> list[Message]:
        """The messages of :meth:`window`, in time order, from the rows of :meth:`window_query`."""
        return [_row_to_message(row) for row in reversed(rows)]

    def messages(self, scope: str, *, after: int = 0, limit: int | None = None) -> list[Message]:
        """The scope's messages in time order, from id ``after`` on."""
        return [_row_to_message(row) for row in self.query(*self.messages_query(scope, after=after, limit=limit))]

    @staticmethod
    def messages_query(scope: str, *, after: int = 0, limit: int | None = None) -> tuple[str, tuple[Any, ...]]:
        """The read of :meth:`messages`, for a batch of reads; :meth:`message_of_row` for each row after."""
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = ? AND id > ? ORDER BY id"
        params: tuple[Any, ...] = (scope, after)
        if limit is not None:
            sql += " LIMIT ?"
            params = (*params, limit)
        return sql, params

    def latest(self, scope: str, *, role: str | None = None) -> Message | None:
        """The scope's newest message (of ``role`` when given; chat commands are then skipped)."""
        if role is None:
            window = self.window(scope, 1)
            return window[0] if window else None
        rows = self.query(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = ? AND role = ? AND (via IS NULL OR via != 'command')"
            " ORDER BY id DESC LIMIT 1",
            (scope, role),
        )
        return _row_to_message(rows[0]) if rows else None

    def count_messages(self, scope: str | None = None) -> int:
        if scope is None:
            return self.query("SELECT count(*) FROM messages")[0][0]
        return self.query("SELECT count(*) FROM messages WHERE scope = ?", (scope,))[0][0]

    def scopes(self) -> list[str]:
        """Every scope that has data."""
        return [row[0] for row in self.query("SELECT scope FROM scopes ORDER BY scope")]

    # -- import ---------------------------------------------------------------------
    def import_records(
        self,
        records: Iterable[LogRecord],
        *,
        default_scope: str | None = None,
        batch_size: int = 2000,
        report: ImportReport | None = None,
    ) -> ImportReport:
        """Import chat-log records, idempotent by (scope, id).

        Batches commit one at a time, so a killed import keeps whole batches only and a
        re-run skips what is there and adds the rest.
        """
        report = report if report is not None else ImportReport()
        if default_scope is not None:
            validate_scope(default_scope)
        batch: list[LogRecord] = []
        for record in records:
            report.read += 1
            scope = record.scope or default_scope
            where = record.line if record.line is not None else report.read
            if scope is None:
                report.invalid.append((where, f"message {record.id!r} has no scope and no --scope was given"))
                continue
            try:
                validate_scope(scope)
            except StoreError as exc:
                report.invalid.append((where, str(exc)))
                continue
            batch.append(record if record.scope else record.model_copy(update={"scope": scope}))
            if len(batch) >= batch_size:
                self._import_batch(batch, report)
                batch = []
        if batch:
            self._import_batch(batch, report)
        return report

    def _import_batch(self, batch: list[LogRecord], report: ImportReport) -> None:
        with self.transaction() as conn:
            for scope in {record.scope for record in batch}:
                ensure_scope(conn, scope, time.time())
                report.scopes.add(scope)
            added = 0
            for record in batch:
                added += conn.execute(
                    "INSERT INTO messages(scope, ext_id, chat, sender, role, text, ts, reply_to, agent, also_sees, via, needs)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?,"
                    " (SELECT id FROM messages WHERE scope = ? AND ext_id = ?), ?, ?, ?, ?)"
                    " ON CONFLICT DO NOTHING",
                    (
                        record.scope,
                        record.id,
                        record.chat,
                        record.sender,
                        record.role,
                        record.text,
                        record.ts,
                        record.scope,
                        record.reply_to,
                        record.agent,
                        json.dumps(list(record.also_sees)),
                        "import" if record.agent else None,
                        json.dumps(list(record.needs)),
                    ),
                ).rowcount  # 0 when (scope, id) is already there
        report.added += added
        report.skipped += len(batch) - added

    # -- archive search ---------------------------------------------------------------
    def search(
        self,
        scope: str,
        query: str,
        k: int = 10,
        *,
        method: str = "hybrid",
        before_id: int | None = None,
        half_life_days: float | None = 30.0,
        now: float | None = None,
        embedder: Any = None,
    ) -> list[Any]:
        """Search a scope's archive (messages and vault): a list of ``SearchHit``, best first."""
        from ._search import search_archive

        return search_archive(
            self, scope, query, k, method, before_id=before_id, half_life_days=half_life_days, now=now, embedder=embedder
        )
