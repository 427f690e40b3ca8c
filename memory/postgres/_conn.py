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
``RETURNING id`` instead (SQLite >= 3.35 accepts it too).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg.adapt import Loader

__all__ = ["NumberLoader", "PgConnection", "PgCursor", "to_pyformat"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
    """

    def __init__(self, raw: psycopg.Connection) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> PgCursor:
        named = isinstance(params, Mapping)
        cursor = self.raw.cursor()
        # Always pass the parameters, even none: psycopg then reads %% as %, as to_pyformat wrote it.
        cursor.execute(to_pyformat(sql, named), params if named else tuple(params))
        return PgCursor(cursor)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> PgCursor:
        cursor = self.raw.cursor()
        cursor.executemany(to_pyformat(sql), list(rows))
        return PgCursor(cursor)
