"""Where a scope's documents lie in the search index (rowid ranges), and the connection to read them."""

from __future__ import annotations

import sqlite3
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass
from ._search_base import _SCOPE_SPAN, _VAULT_OFFSET

# -- connection plumbing ------------------------------------------------------------------------


def _resolve(source: Any) -> tuple[sqlite3.Connection, Any]:
    """The connection and lock of a Store, a sqlite_utils.Database or a bare connection."""
    if isinstance(source, sqlite3.Connection):
        return source, nullcontext()
    lock = getattr(source, "_lock", None)
    conn = getattr(source, "conn", None)
    if not isinstance(conn, sqlite3.Connection):
        raise TypeError(
            f"expected a Store, a sqlite_utils.Database or a sqlite3.Connection, not {type(source).__name__}"
        )
    return conn, lock if lock is not None else nullcontext()


@dataclass(frozen=True, slots=True)
class _Ranges:
    """FTS rowid ranges (inclusive) of one scope's searchable documents."""

    base: int
    parts: tuple[tuple[int, int], ...]
    docs: int = 0  # the whole scope's documents (BM25's N)


def _scope_ranges(conn: sqlite3.Connection, scope: str, before_id: int | None) -> _Ranges | None:
    row = conn.execute("SELECT num, docs FROM search_scopes WHERE scope = ?", (scope,)).fetchone()
    if row is None:
        return None
    base, docs = int(row[0]) * _SCOPE_SPAN, int(row[1])
    vault = (base + _VAULT_OFFSET, base + _SCOPE_SPAN - 1)
    if before_id is None:
        return _Ranges(base, ((base, base + _SCOPE_SPAN - 1),), docs)
    cap = min(max(int(before_id), 0), _VAULT_OFFSET)
    if cap <= 1:  # no message qualifies; vault documents still do
        return _Ranges(base, (vault,), docs)
    return _Ranges(base, ((base, base + cap - 1), vault), docs)


# -- the query pipeline ----------------------------------------------------------------------------


def _count_capped(conn: sqlite3.Connection, expr: str, ranges: _Ranges, cap: int) -> int:
    total = 0
    for lo, hi in ranges.parts:
        total += conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM search_fts WHERE search_fts MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?)",
            (expr, lo, hi, cap + 1 - total),
        ).fetchone()[0]
        if total > cap:
            break
    return total
