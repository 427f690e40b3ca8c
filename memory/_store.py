"""The SQLite store: one connection, WAL mode, short explicit transactions.

Every write commits before it returns, so a message is durable before any LLM call.
The interface stays narrow (append, window, route, calls, erase...) so another
backend can serve several workers later without touching the hub.
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
from ._model import CallRecord, Message, NewMessage, Usage, validate_scope
from ._redact import MAX_ERROR_CHARS, redact_secrets
from ._schema import SCHEMA_VERSION, ensure_scope, migrate
from .errors import DuplicateMessage, InvalidRecord, StoreError

__all__ = ["Store"]

_MESSAGE_COLUMNS = "id, scope, role, text, ts, agent, also_sees, via, sender, chat, reply_to, ext_id, needs"
_SECTIONS = ("persona", "rules", "tools", "facts", "lessons", "awareness", "digest", "history", "message", "total")
# Tables holding a scope's data, erased together. Search index rows follow through triggers.
_SCOPED_TABLES = (
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


class Store:
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
        with self.transaction() as conn:
            ensure_scope(conn, scope, time.time())
            try:
                new_id = conn.execute(
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
                ).fetchone()[0]
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
        return bool(
            self.query(
                "SELECT EXISTS(SELECT 1 FROM messages WHERE reply_to = ? AND role = 'agent')"
                " OR EXISTS(SELECT 1 FROM calls WHERE message_id = ? AND ok = 0 AND coalesce(via, '') NOT IN ('router', 'extractor'))",
                (message_id, message_id),
            )[0][0]
        )

    def get(self, scope: str, message_id: int) -> Message | None:
        """One message of ``scope`` by id; an id of another scope is as if it did not exist."""
        rows = self.query(f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = ? AND id = ?", (scope, message_id))
        return _row_to_message(rows[0]) if rows else None

    def find_ext(self, scope: str, ext_id: str) -> Message | None:
        """A message by its external id (a chat-log or Telegram id) within a scope."""
        rows = self.query(f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = ? AND ext_id = ?", (scope, ext_id))
        return _row_to_message(rows[0]) if rows else None

    def window(self, scope: str, size: int, *, up_to: int | None = None) -> list[Message]:
        """The scope's last ``size`` messages in time order (up to and including id ``up_to``)."""
        if size <= 0:
            return []
        if up_to is None:
            rows = self.query(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = ? ORDER BY id DESC LIMIT ?", (scope, size)
            )
        else:
            rows = self.query(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = ? AND id <= ? ORDER BY id DESC LIMIT ?",
                (scope, up_to, size),
            )
        return [_row_to_message(row) for row in reversed(rows)]

    def messages(self, scope: str, *, after: int = 0, limit: int | None = None) -> list[Message]:
        """The scope's messages in time order, from id ``after`` on."""
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = ? AND id > ? ORDER BY id"
        params: list[Any] = [scope, after]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_row_to_message(row) for row in self.query(sql, params)]

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

    # -- token accounting -------------------------------------------------------------
    def record_call(self, call: CallRecord) -> int:
        """Record one agent call's token accounting; returns its id.

        A failure's message is stored with credential-shaped text redacted, whoever recorded it."""
        tokens = {name: int(call.tokens.get(name, 0)) for name in _SECTIONS}
        columns = (
            "scope", "agent", "message_id", "via", "also_sees", "model", *_SECTIONS, "full_history_tokens",
            "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens", "billed_tokens", "cost",
            "latency_ms", "ok", "ts", "extra", "error_class", "error_message", "tool_calls",
        )  # fmt: skip
        values = (
            call.scope,
            call.agent,
            call.message_id,
            call.via,
            json.dumps(list(call.also_sees)),
            call.model,
            *(tokens[name] for name in _SECTIONS),
            int(call.full_history_tokens),
            call.prompt_tokens,
            call.completion_tokens,
            call.cached_tokens,
            call.cache_write_tokens,
            call.billed_tokens,
            call.cost,
            call.latency_ms,
            1 if call.ok else 0,
            call.ts if call.ts is not None else time.time(),
            json.dumps(call.extra, default=str),
            call.error_class[:200] if call.error_class else None,
            redact_secrets(call.error_message)[:MAX_ERROR_CHARS] if call.error_message else None,
            len(tool_calls) if isinstance(tool_calls := call.extra.get("tool_calls"), list) else 0,
        )
        with self.transaction() as conn:
            return conn.execute(
                f"INSERT INTO calls({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) RETURNING id", values
            ).fetchone()[0]

    def calls(self, scope: str) -> list[dict[str, Any]]:
        """The scope's recorded agent calls, oldest first."""
        with self._lock:
            cursor = self.conn.execute("SELECT * FROM calls WHERE scope = ? ORDER BY id", (scope,))
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def usage(self, scope: str) -> Usage:
        """Messages, agent calls and tokens of a scope, against full history, with what the
        providers reported: input, cached input, billed-equivalent tokens and cost."""
        row = self.query(
            "SELECT count(*), coalesce(sum(total), 0), coalesce(sum(full_history_tokens), 0),"
            " coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0),"
            " coalesce(sum(cached_tokens), 0), coalesce(sum(cache_write_tokens), 0),"
            " count(prompt_tokens), count(cached_tokens),"
            " coalesce(sum(billed_tokens), 0), sum(CASE WHEN prompt_tokens IS NOT NULL AND billed_tokens IS NULL THEN 1 ELSE 0 END),"
            " coalesce(sum(cost), 0), sum(CASE WHEN prompt_tokens IS NOT NULL AND cost IS NULL THEN 1 ELSE 0 END)"
            " FROM calls WHERE scope = ? AND coalesce(via, '') NOT IN ('router', 'extractor')",
            (scope,),
        )[0]
        # The hub's own model calls (LLM router, fact extractor): no agent's, no full-history
        # counterfactual, but tokens all the same.
        overhead = {
            via: (calls, tokens)
            for via, calls, tokens in self.query(
                "SELECT via, count(*), coalesce(sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)), 0)"
                " FROM calls WHERE scope = ? AND via IN ('router', 'extractor') GROUP BY via",
                (scope,),
            )
        }
        return Usage(
            scope=scope,
            messages=self.count_messages(scope),
            agent_calls=row[0],
            tokens_sent=row[1],
            full_history_tokens=row[2],
            prompt_tokens=row[3],
            completion_tokens=row[4],
            cached_tokens=row[5],
            cache_write_tokens=row[6],
            calls_reporting_usage=row[7],
            calls_reporting_cache=row[8],
            billed_tokens=float(row[9]),
            calls_billed_unknown=row[10] or 0,
            cost=float(row[11]),
            calls_cost_unknown=row[12] or 0,
            router_calls=overhead.get("router", (0, 0))[0],
            router_tokens=overhead.get("router", (0, 0))[1],
            extractor_calls=overhead.get("extractor", (0, 0))[0],
            extractor_tokens=overhead.get("extractor", (0, 0))[1],
        )

    # -- erasure --------------------------------------------------------------------
    def erase(self, scope: str) -> dict[str, int]:
        """Delete everything of a scope and scrub it from the file; returns rows removed per table."""
        validate_scope(scope)
        removed: dict[str, int] = {}
        with self.transaction() as conn:
            for table in _SCOPED_TABLES:
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
            tables = [t for t in _SCOPED_TABLES if t != "scopes"]
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
