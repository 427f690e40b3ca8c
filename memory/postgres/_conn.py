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
    """The part of ``sqlite3.Cursor`` the record functions use, over a psycopg cursor."""

    def __init__(self, cursor: psycopg.Cursor) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def lastrowid(self) -> int:
        raise AttributeError("lastrowid is not portable: add RETURNING id to the INSERT and fetch it")

    def fetchone(self) -> tuple | None:
        return self._cursor.fetchone() if self._cursor.description is not None else None

    def fetchall(self) -> list[tuple]:
        return self._cursor.fetchall() if self._cursor.description is not None else []

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.fetchall())


class PgConnection:
    """A psycopg connection that speaks the record functions' SQL (see the module docstring).

    ``raw`` is the psycopg connection itself, for PostgreSQL-only code (migrations,
    the archive search) that writes ``%s`` placeholders directly.

    Statements whose results nobody reads (``BEGIN``, ``SAVEPOINT``, ``RELEASE``, the
    scope's advisory lock) are not sent on their own: they wait in :attr:`prefix` and go
    out in front of the next statement, in the same round trip (several statements in one
    query text, which client-side binding allows). A one-statement transaction is then two
    round trips (the statement, ``COMMIT``) instead of three, ``append`` two instead of
    five. Anything that reaches for :attr:`raw` gets the prefix sent first.
    """

    def __init__(self, raw: psycopg.Connection, changed: set[str] | None = None) -> None:
        self._raw = raw
        # Tables this connection deleted or updated rows in: the store vacuums them on
        # flush_deleted(), so old versions of forgotten or edited text leave the pages.
        self.changed = changed if changed is not None else set()
        self.prefix: list[str] = []  # SQL sent in front of the next statement (see the class docstring)
        self.depth = 0  # transaction nesting (0: autocommit, between transactions)

    @property
    def raw(self) -> psycopg.Connection:
        self.flush()
        return self._raw

    def defer(self, sql: str) -> None:
        """Send ``sql`` (complete, no placeholders) in front of the next statement."""
        self.prefix.append(sql)

    def flush(self) -> None:
        """Send the deferred statements now."""
        if self.prefix:
            text = "; ".join(self.prefix)
            self.prefix.clear()
            self._raw.execute(text)

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> PgCursor:
        named = isinstance(params, Mapping)
        if match := _CHANGES.match(sql):
            self.changed.add(match.group(1))
        cursor = self._raw.cursor()
        query = to_pyformat(sql, named)
        if not self.prefix:
            # Always pass the parameters, even none: psycopg then reads %% as %, as to_pyformat wrote it.
            cursor.execute(query, _clean(params))
            return PgCursor(cursor)
        head = "; ".join(self.prefix).replace("%", "%%")
        self.prefix.clear()
        cursor.execute(f"{head}; {query}", _clean(params))
        while cursor.nextset():  # the deferred statements' results come first
            pass
        return PgCursor(cursor)

    def lock_scope(self, scope: str) -> None:
        """Hold the scope's advisory lock until this transaction ends (see ``memory._schema.lock_scope``)."""
        self.defer(self._raw.cursor().mogrify("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (SCOPE_LOCK, scope)))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> PgCursor:
        self.flush()
        cursor = self._raw.cursor()
        cursor.executemany(to_pyformat(sql), [_clean(row) for row in rows])
        return PgCursor(cursor)
