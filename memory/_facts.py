"""Persistent facts per scope: add, supersede, invalidate, list, delete.

A fact that stops being true is invalidated (``invalid_at``), never updated in place; a
fact replaced by a newer one also points at it (``superseded_by``). History stays until
the person deletes the fact or erases the scope (:meth:`Store.erase`). Every function
takes the scope and only reads or writes that scope's rows: an id from another scope
behaves as if it did not exist.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ._model import validate_scope
from ._schema import ensure_scope
from ._store import Store
from .errors import InvalidRecord

__all__ = [
    "FACT_CONFIDENCES",
    "FACT_KINDS",
    "Fact",
    "FactChange",
    "NewFact",
    "add_fact",
    "apply_fact_changes",
    "current_facts",
    "delete_facts",
    "fact_history",
    "facts_by_key",
    "get_fact",
    "invalidate_facts",
]

FACT_KINDS = ("identity", "contact", "preference", "constraint", "relationship", "other")
FACT_CONFIDENCES = ("explicit", "derived")
_COLUMNS = "id, scope, text, kind, key, confidence, source_message, valid_from, invalid_at, superseded_by"


@dataclass(frozen=True, slots=True)
class Fact:
    """One stored fact; current while ``invalid_at`` is ``None``."""

    id: int
    scope: str
    text: str
    kind: str = "other"
    key: str | None = None  # normalised subject.attribute, e.g. "ram.email"
    confidence: str = "derived"  # "explicit" (the person said /remember) or "derived" (extracted)
    source_message: int | None = None
    valid_from: float = 0.0  # unix seconds, UTC
    invalid_at: float | None = None
    superseded_by: int | None = None

    @property
    def is_current(self) -> bool:
        return self.invalid_at is None


@dataclass(frozen=True, slots=True)
class NewFact:
    """A fact about to be stored (the store assigns id and valid_from)."""

    text: str
    kind: str = "other"
    key: str | None = None
    confidence: str = "derived"
    source_message: int | None = None


@dataclass(frozen=True, slots=True)
class FactChange:
    """One step of a batch: add ``add`` (if any), then invalidate ``invalidate``.

    With both, the invalidated facts are superseded by the added one (an update).
    """

    add: NewFact | None = None
    invalidate: tuple[int, ...] = ()


def _row(row: Sequence[Any]) -> Fact:
    return Fact(*row)


def _check(fact: NewFact) -> None:
    if not isinstance(fact.text, str) or not fact.text.strip():
        raise InvalidRecord("a fact needs non-empty text")
    if fact.kind not in FACT_KINDS:
        raise InvalidRecord(f"fact kind must be one of {', '.join(FACT_KINDS)}, not {fact.kind!r}")
    if fact.confidence not in FACT_CONFIDENCES:
        raise InvalidRecord(f"fact confidence must be 'explicit' or 'derived', not {fact.confidence!r}")


def get_fact(store: Store, scope: str, fact_id: int) -> Fact | None:
    """One fact of the scope by id, current or not."""
    rows = store.query(f"SELECT {_COLUMNS} FROM facts WHERE scope = ? AND id = ?", (scope, fact_id))
    return _row(rows[0]) if rows else None


def current_facts(store: Store, scope: str) -> list[Fact]:
    """The scope's current facts, oldest first."""
    rows = store.query(f"SELECT {_COLUMNS} FROM facts WHERE scope = ? AND invalid_at IS NULL ORDER BY id", (scope,))
    return [_row(row) for row in rows]


def fact_history(store: Store, scope: str, key: str | None = None) -> list[Fact]:
    """Every fact of the scope (or of one key) including invalidated ones, oldest first."""
    if key is None:
        rows = store.query(f"SELECT {_COLUMNS} FROM facts WHERE scope = ? ORDER BY id", (scope,))
    else:
        rows = store.query(f"SELECT {_COLUMNS} FROM facts WHERE scope = ? AND key = ? ORDER BY id", (scope, key))
    return [_row(row) for row in rows]


def facts_by_key(store: Store, scope: str, key: str, *, include_invalid: bool = False) -> list[Fact]:
    """The scope's facts with ``key`` (current only unless ``include_invalid``), oldest first."""
    if include_invalid:
        return fact_history(store, scope, key)
    rows = store.query(
        f"SELECT {_COLUMNS} FROM facts WHERE scope = ? AND key = ? AND invalid_at IS NULL ORDER BY id", (scope, key)
    )
    return [_row(row) for row in rows]


def apply_fact_changes(
    store: Store,
    scope: str,
    changes: Iterable[FactChange],
    *,
    now: float | None = None,
    require_message: int | None = None,
) -> list[Fact]:
    """Apply a batch in one transaction; returns the facts added.

    Only current facts of ``scope`` are invalidated. With ``require_message``, nothing is
    written unless that message still exists in the scope: learning that finishes after
    the scope was erased must not bring its facts back.
    """
    validate_scope(scope)
    changes = list(changes)
    for change in changes:
        if change.add is not None:
            _check(change.add)
    ts = time.time() if now is None else float(now)
    added: list[Fact] = []
    with store.transaction() as conn:
        if require_message is not None:
            exists = conn.execute("SELECT 1 FROM messages WHERE id = ? AND scope = ?", (require_message, scope)).fetchone()
            if exists is None:
                return []
        if any(change.add is not None for change in changes):
            ensure_scope(conn, scope, ts)
        for change in changes:
            new_id = None
            if change.add is not None:
                fact = change.add
                new_id = conn.execute(
                    "INSERT INTO facts(scope, text, kind, key, confidence, source_message, valid_from)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (scope, fact.text.strip(), fact.kind, fact.key, fact.confidence, fact.source_message, ts),
                ).fetchone()[0]
                added.append(
                    Fact(new_id, scope, fact.text.strip(), fact.kind, fact.key, fact.confidence, fact.source_message, ts)
                )
            for old_id in change.invalidate:
                conn.execute(
                    "UPDATE facts SET invalid_at = ?, superseded_by = ? WHERE scope = ? AND id = ? AND invalid_at IS NULL",
                    (ts, new_id, scope, old_id),
                )
    return added


def add_fact(store: Store, scope: str, fact: NewFact, *, now: float | None = None) -> Fact:
    """Store one new current fact (no reconciliation: see ``hub.facts`` for that)."""
    return apply_fact_changes(store, scope, [FactChange(add=fact)], now=now)[0]


def invalidate_facts(
    store: Store, scope: str, ids: Iterable[int], *, now: float | None = None, superseded_by: int | None = None
) -> list[Fact]:
    """Mark current facts of the scope as no longer true; returns those that were current."""
    validate_scope(scope)
    ts = time.time() if now is None else float(now)
    changed: list[Fact] = []
    with store.transaction() as conn:
        for fact_id in ids:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM facts WHERE scope = ? AND id = ? AND invalid_at IS NULL", (scope, fact_id)
            ).fetchone()
            if row is None:
                continue
            conn.execute("UPDATE facts SET invalid_at = ?, superseded_by = ? WHERE id = ?", (ts, superseded_by, fact_id))
            old = _row(row)
            changed.append(
                Fact(old.id, old.scope, old.text, old.kind, old.key, old.confidence, old.source_message, old.valid_from, ts, superseded_by)
            )
    return changed


def delete_facts(store: Store, scope: str, ids: Iterable[int], *, with_history: bool = True) -> list[Fact]:
    """Delete facts of the scope for good (and the older versions they superseded); returns them.

    ``secure_delete`` zeroes the rows' bytes in the file; :meth:`Store.scrub` also clears
    the write-ahead log.
    """
    validate_scope(scope)
    deleted: list[Fact] = []
    with store.transaction() as conn:
        pending = list(ids)
        seen: set[int] = set()
        while pending:
            fact_id = pending.pop()
            if fact_id in seen:
                continue
            seen.add(fact_id)
            row = conn.execute(f"SELECT {_COLUMNS} FROM facts WHERE scope = ? AND id = ?", (scope, fact_id)).fetchone()
            if row is None:
                continue
            deleted.append(_row(row))
            if with_history:
                older = conn.execute("SELECT id FROM facts WHERE scope = ? AND superseded_by = ?", (scope, fact_id))
                pending.extend(r[0] for r in older.fetchall())
        for fact in deleted:
            conn.execute("DELETE FROM facts WHERE scope = ? AND id = ?", (scope, fact.id))
    return sorted(deleted, key=lambda fact: fact.id)
