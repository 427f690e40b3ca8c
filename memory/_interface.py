"""The store's interface: what the hub, the transports and the evaluation may ask of memory.

Every backend implements it (SQLite: :class:`~._store.Store`; PostgreSQL for several
workers: :class:`~.postgres.PostgresStore`), and ``tests/memory/test_conformance.py``
runs one suite against each.
Every read of scoped data takes the scope: isolation between customers and groups is the
product's main promise, so there is no "any scope" shortcut. The few functions that
work across scopes say so in their names (``due_reminders``, ``pending_reminders``).

The agents' records (vault, tasks, reminders, facts; events and claims) are free
functions over a store (``add_task(store, scope, ...)``), written against
:meth:`MemoryStore.transaction` and :meth:`MemoryStore.query`, so one transaction can
hold a tool's row and its event. Their SQL is one text for every backend (``?``
placeholders, ``ON CONFLICT``, ``RETURNING id``); the few expressions that differ come
from ``store.dialect`` (:mod:`._dialect`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from ._chatlog import ImportReport, LogRecord
from ._dialect import Dialect
from ._model import CallRecord, Message, NewMessage, Usage

__all__ = ["MemoryStore"]


@runtime_checkable
class MemoryStore(Protocol):
    """The narrow interface of a memory backend."""

    path: str
    dialect: Dialect

    # messages and their routes
    def append(self, message: NewMessage) -> Message: ...
    def set_route(self, message_id: int, agent: str, also_sees: Sequence[str], via: str) -> None: ...
    def set_ext_id(self, message_id: int, ext_id: str) -> None: ...
    def is_answered(self, message_id: int) -> bool: ...
    def get(self, scope: str, message_id: int) -> Message | None: ...
    def find_ext(self, scope: str, ext_id: str) -> Message | None: ...
    def window(self, scope: str, size: int, *, up_to: int | None = None, after: int = 0) -> list[Message]: ...
    def messages(self, scope: str, *, after: int = 0, limit: int | None = None) -> list[Message]: ...
    def latest(self, scope: str) -> Message | None: ...
    def count_messages(self, scope: str | None = None) -> int: ...
    def scopes(self) -> list[str]: ...
    def import_records(
        self,
        records: Iterable[LogRecord],
        *,
        default_scope: str | None = None,
        batch_size: int = 2000,
        report: ImportReport | None = None,
    ) -> ImportReport: ...

    # token accounting
    def record_call(self, call: CallRecord) -> int: ...
    def calls(self, scope: str) -> list[dict[str, Any]]: ...
    def usage(self, scope: str) -> Usage: ...

    # the archive
    def search(self, scope: str, query: str, k: int = 10, **options: Any) -> list[Any]: ...

    # erasure
    def erase(self, scope: str) -> dict[str, int]: ...
    def flush_deleted(self) -> None: ...

    # plumbing for the record functions
    def session(self) -> AbstractContextManager[None]: ...
    def transaction(self) -> AbstractContextManager[Any]: ...
    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]: ...
    def query_batch(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple]]: ...
    def close(self) -> None: ...


