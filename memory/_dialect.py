"""The few SQL expressions that differ between the store's backends.

The record functions (``_data``, ``_events``, ``_claims`` ...) write one SQL text for
every backend: ``?`` placeholders, ``ON CONFLICT ... DO NOTHING/UPDATE``, ``RETURNING id``
(SQLite >= 3.35). What cannot be spelt the same way lives here, on ``store.dialect``:
reading a JSON field, the two-argument maximum, and SQLite's planner hints (which
PostgreSQL neither needs nor accepts). Nothing else: no ORM, no query builder.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = ["SQLITE", "Dialect"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """SQL spellings for one backend; ``integrity_errors`` are its unique-key violations."""

    name: str
    integrity_errors: tuple[type[BaseException], ...] = ()

    @property
    def is_sqlite(self) -> bool:
        return self.name == "sqlite"

    def json_text(self, column: str, *path: str) -> str:
        """The JSON text column's field at ``path`` (``extra``, "digest", "version"), as SQL."""
        if self.is_sqlite:
            return f"json_extract({column}, '$.{'.'.join(path)}')"
        return f"({column}::jsonb #>> '{{{','.join(path)}}}')"

    def json_number(self, column: str, *path: str) -> str:
        """Like :meth:`json_text`, as a number (for sums and comparisons)."""
        if self.is_sqlite:
            return self.json_text(column, *path)
        return f"{self.json_text(column, *path)}::double precision"

    def greatest(self, first: str, second: str) -> str:
        """The larger of two values (SQLite's scalar ``max``, PostgreSQL's ``GREATEST``)."""
        return f"max({first}, {second})" if self.is_sqlite else f"GREATEST({first}, {second})"

    def indexed_by(self, table: str, index: str) -> str:
        """``table`` pinned to ``index`` where the planner needs the hint (SQLite only)."""
        return f"{table} INDEXED BY {index}" if self.is_sqlite else table

    def no_index(self, column: str) -> str:
        """``column`` kept out of index selection (SQLite's unary ``+``; PostgreSQL plans fine)."""
        return f"+{column}" if self.is_sqlite else column


SQLITE = Dialect("sqlite", (sqlite3.IntegrityError,))
