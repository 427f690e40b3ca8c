"""A thin adapter that lets the record functions' SQL run on a psycopg 3 connection.

The record functions write SQLite-style ``?`` placeholders (and ``:name`` with a dict).
:func:`to_pyformat` turns them into psycopg's ``%s`` / ``%(name)s`` outside string
literals, quoted identifiers and comments, and doubles every literal ``%`` (psycopg
reads ``%`` everywhere in the text). The connections use client-side binding
(``ClientCursor``): parameters are quoted into the text by psycopg, so an untyped
``coalesce(?, note)`` or ``? IS NULL`` needs no casts, as on SQLite.

:class:`PgConnection` offers what the record functions use of a ``sqlite3.Connection``:
``execute`` returning a cursor with ``fetchone``, ``fetchall``, iteration, ``rowcount`` and
``description``, and ``executemany``. There is no ``lastrowid``: the SQL says
``RETURNING id`` instead (SQLite >= 3.35 accepts it too). A NUL character in a text
parameter, which PostgreSQL cannot store, is written as U+FFFD instead of failing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg.adapt import Loader
from psycopg.pq import ExecStatus

__all__ = ["SCOPE_LOCK", "NumberLoader", "PgConnection", "PgCursor", "to_pyformat"]

# The first key of the two-key advisory lock that makes one writer per scope at a time
# (memory._schema.lock_scope) and orders a scope's ids (the hub_ordered_id trigger).
SCOPE_LOCK = 0x5C09

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A statement that leaves old row versions behind (dead tuples until VACUUM), and its table.
_CHANGES = re.compile(r'^\s*(?:DELETE\s+FROM|UPDATE)\s+"?([A-Za-z_][A-Za-z0-9_]*)"?', re.IGNORECASE)


@functools.lru_cache(maxsize=2048)
def to_pyformat(sql: str, named: bool = False) -> str:
    """``sql`` with ``?`` (or ``:name`` when ``named``) as psycopg placeholders.

    Placeholders inside '...' literals, "..." identifiers, ``--`` and ``/* */`` comments
    are left alone; ``::`` casts are never taken for a ``:name``. Every ``%`` becomes
    ``%%``, so ``LIKE 'a%'`` still means what it says.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in ("'", '"'):
            end = i + 1
            while end < n:
                if sql[end] == ch:
                    if end + 1 < n and sql[end + 1] == ch:  # '' inside a literal
                        end += 2
                        continue
                    break
                end += 1
            out.append(sql[i : end + 1].replace("%", "%%"))
            i = end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end].replace("%", "%%"))
            i = end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(sql[i:end].replace("%", "%%"))
            i = end
        elif ch == "%":
            out.append("%%")
            i += 1
        elif ch == "?" and not named:
            out.append("%s")
            i += 1
        elif ch == ":" and sql.startswith("::", i):
            out.append("::")
            i += 2
        elif ch == ":" and named and (match := _NAME.match(sql, i + 1)):
            out.append(f"%({match.group()})s")
            i = match.end()
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _without_nul(value: Any) -> Any:
    # PostgreSQL text cannot hold U+0000 (SQLite can): store the replacement character
    # rather than refuse, and so lose, a message that carried one.
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


def _clean(params: Sequence[Any] | Mapping[str, Any]) -> Sequence[Any] | Mapping[str, Any]:
    if isinstance(params, Mapping):
        return {key: _without_nul(value) for key, value in params.items()}
    return tuple(_without_nul(value) for value in params)


_TUPLES_OK = ExecStatus.TUPLES_OK

class NumberLoader(Loader):
    """``numeric`` results as int when whole, else float, as SQLite returns them.

    ``sum()`` and ``count`` arithmetic over bigint columns yield ``numeric`` on
    PostgreSQL; the hub expects plain numbers (JSON output, int() comparisons).
    """

    def load(self, data: Any) -> int | float:
        text = bytes(data).decode()
        try:
            return int(text)
        except ValueError:
            return float(text)


class PgCursor:
    """The part of ``sqlite3.Cursor`` the record functions use, for one statement of a
    :class:`PgConnection`: sent when its result is first asked for (see there)."""

    def __init__(self, conn: PgConnection, text: str) -> None:
        self._conn = conn
        self.text = text  # the statement with its parameters quoted in
        self._done = False
        self._error: BaseException | None = None
        self._rows: list[tuple] = []
        self._next = 0
        self._rowcount = -1
        self._fields: Any = None  # the result's PGresult, when it has rows: the column names

    def _settle(self, cursor: psycopg.Cursor) -> None:
        # Not cursor.description: psycopg builds a Column object per column each time it is
        # read (a tenth of a turn's CPU on PostgreSQL), and the store reads only the names.
        result = cursor.pgresult
        self._rowcount = cursor.rowcount
        if result is not None and result.status == _TUPLES_OK:
            self._rows = cursor.fetchall()
            self._fields = result
        else:
            self._rows = []
        self._done = True

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._done = True

    def _result(self) -> None:
        if not self._done:
            self._conn.flush()
        if self._error is not None:
            raise self._error

    @property
    def rowcount(self) -> int:
        self._result()
        return self._rowcount

    @property
    def description(self) -> list[tuple[str, int, None, None, None, None, None]] | None:
        """DB-API's description, by name and type oid only (what the store reads); None without rows."""
        self._result()
        fields = self._fields
        if fields is None:
            return None
        encoding = self._conn.encoding
        return [(fields.fname(i).decode(encoding), fields.ftype(i), None, None, None, None, None) for i in range(fields.nfields)]

    @property
    def lastrowid(self) -> int:
        raise AttributeError("lastrowid is not portable: add RETURNING id to the INSERT and fetch it")

    def fetchone(self) -> tuple | None:
        self._result()
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[tuple]:
        self._result()
        rows, self._next = self._rows[self._next :], len(self._rows)
        return rows

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.fetchall())


class PgConnection:
    """A psycopg connection that speaks the record functions' SQL (see the module docstring).

    ``raw`` is the psycopg connection itself, for PostgreSQL-only code (migrations,
    the archive search) that writes ``%s`` placeholders directly.

    Round trips are what a turn waits for, so statements are sent as late as they can be
    and together: :meth:`execute` quotes the parameters in and queues the statement; it
    goes out when its result (rows, ``rowcount``, ``description``) is first asked for, or
    at the end of its ``with store.transaction()`` block (``COMMIT``, or a nested block's
    ``RELEASE``: once a block is done its statements have run), with everything queued
    before it in one query text (several statements in one text, which client-side
    binding allows), in order, in the same transaction.
    ``BEGIN``, ``SAVEPOINT``, ``RELEASE`` and the scope's advisory lock, whose results
    nobody reads, are queued the same way. So a write transaction whose results are not
    read is one round trip, ``append`` two, a claim two. An error surfaces when the
    statement is sent, still inside its ``with store.transaction()`` block (which rolls
    back). Anything that reaches for :attr:`raw` gets the queue sent first.
    """

    def __init__(self, raw: psycopg.Connection, changed: set[str] | None = None) -> None:
        self._raw = raw
        # Tables this connection deleted or updated rows in: the store vacuums them on
        # flush_deleted(), so old versions of forgotten or edited text leave the pages.
        self.changed = changed if changed is not None else set()
        self.queue: list[str | PgCursor] = []  # to send, in order: control statements and pending cursors
        self.depth = 0  # transaction nesting (0: autocommit, between transactions)
        self._quoting = raw.cursor()  # a ClientCursor: mogrify quotes parameters in, client-side
        # The cursor every flush sends its text with: one per PgConnection (a session or a
        # transaction), as a new cursor per round trip cost about a tenth of its client CPU
        # (its adapters copied). Each result is read off it as it comes in (PgCursor._settle).
        self._sending = raw.cursor()
        self.encoding = raw.info.encoding  # of column names in results

    @property
    def raw(self) -> psycopg.Connection:
        self.flush()
        return self._raw

    def defer(self, sql: str) -> None:
        """Queue ``sql`` (complete, no placeholders), a statement whose result nobody reads."""
        self.queue.append(sql)

    def flush(self) -> None:
        """Send everything queued now, in one round trip; each pending statement gets its result."""
        if not self.queue:
            return
        queue, self.queue = self.queue, []
        cursor = self._sending
        try:
            # No parameters: the text is sent as it is (its % signs are no placeholders).
            cursor.execute("; ".join(item if isinstance(item, str) else item.text for item in queue))
        except BaseException as exc:
            for item in queue:
                if isinstance(item, PgCursor):
                    item._fail(exc)
            raise
        for index, item in enumerate(queue):
            if index and not cursor.nextset():
                break
            if isinstance(item, PgCursor):
                item._settle(cursor)

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> PgCursor:
        named = isinstance(params, Mapping)
        if match := _CHANGES.match(sql):
            self.changed.add(match.group(1))
        # Always pass the parameters, even none: psycopg then reads %% as %, as to_pyformat wrote it.
        pending = PgCursor(self, self._quoting.mogrify(to_pyformat(sql, named), _clean(params)))
        self.queue.append(pending)
        if not self.depth:
            self.flush()  # outside a transaction a statement is its own: send it now
        return pending

    def read_batch(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple]]:
        """Several statements sent together with what is queued (one round trip); each one's rows."""
        pending = [PgCursor(self, self._quoting.mogrify(to_pyformat(sql), _clean(params))) for sql, params in statements]
        self.queue.extend(pending)
        self.flush()
        return [cursor.fetchall() for cursor in pending]

    def lock_scope(self, scope: str) -> None:
        """Hold the scope's advisory lock until this transaction ends (see ``memory._schema.lock_scope``)."""
        self.defer(self._quoting.mogrify("SELECT hub_lock_scope(%s)", (scope,)))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> PgCursor:
        self.flush()
        cursor = self._raw.cursor()
        cursor.executemany(to_pyformat(sql), [_clean(row) for row in rows])
        done = PgCursor(self, "")
        done._done, done._rowcount = True, cursor.rowcount
        return done
