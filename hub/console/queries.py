"""The console's own reads of messages and calls: the ones the store's read functions do not cover.

Everything else comes from the existing functions (``Store.usage``, ``Store.window``,
``current_facts``, ``recent_events``...). The SQL here is kept portable (plain
``SELECT``, ``count``/``sum``/``coalesce``, ``IN``, ``?`` parameters through
``store.query``) so that another backend behind the same ``query`` runs it unchanged: no
date functions, bucketing done in Python, JSON only through ``store.dialect``.

Every read of scoped data takes the scope; the timeline reads are keyset-paginated
(``id < cursor LIMIT n``, with the filters as plain column tests) and never load a scope whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from scopehub.memory import MemoryStore, Message

__all__ = [
    "AGENT_CALLS",
    "CALL_COLUMNS",
    "COUNT_CAP",
    "Filters",
    "call_of",
    "calls_of_messages",
    "count_matching",
    "first_at_or_after",
    "message_page",
    "messages_by_id",
    "replies_to",
    "scope_exists",
]

# The hub's own model calls (LLM router, fact extractor) have no agent context and no
# full-history counterfactual; Store.usage leaves them out of the saving the same way.
AGENT_CALLS = "coalesce(via, '') NOT IN ('router', 'extractor')"
COUNT_CAP = 1000

CALL_COLUMNS = (
    "id", "scope", "agent", "message_id", "via", "also_sees", "model",
    "persona", "rules", "tools", "facts", "lessons", "awareness", "digest", "history", "message", "total",
    "full_history_tokens", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens",
    "billed_tokens", "cost", "latency_ms", "ok", "ts", "extra", "error_class", "error_message", "tool_calls",
)  # fmt: skip
_CALL_SELECT = "SELECT " + ", ".join(CALL_COLUMNS) + " FROM calls"


def _call(row: Sequence[Any]) -> dict[str, Any]:
    call = dict(zip(CALL_COLUMNS, row, strict=True))
    call["also_sees"] = tuple(json.loads(call["also_sees"] or "[]"))
    try:
        call["extra"] = json.loads(call["extra"] or "{}")
    except (TypeError, ValueError):
        call["extra"] = {}
    if not isinstance(call["extra"], dict):
        call["extra"] = {}
    return call


def scope_exists(store: MemoryStore, scope: str) -> bool:
    """Whether the store holds anything of ``scope``."""
    return bool(store.query("SELECT 1 FROM scopes WHERE scope = ?", (scope,)))


@dataclass(frozen=True, slots=True)
class Filters:
    """What the timeline shows: messages of one agent, one routing path, with a failed call
    or a tool call, within a time range (``since`` inclusive, ``until`` exclusive)."""

    agent: str | None = None
    via: str | None = None
    failed: bool = False
    tools: bool = False
    since: float | None = None
    until: float | None = None

    @property
    def active(self) -> bool:
        return any((self.agent, self.via, self.failed, self.tools, self.since is not None, self.until is not None))

    def where(self, scope: str) -> tuple[str, list[Any]]:
        """The SQL condition on ``messages`` and its parameters."""
        parts, params = ["scope = ?"], [scope]
        if self.agent:
            parts.append("agent = ?")
            params.append(self.agent)
        if self.via:
            parts.append("via = ?")
            params.append(self.via)
        if self.since is not None:
            parts.append("ts >= ?")
            params.append(self.since)
        if self.until is not None:
            parts.append("ts < ?")
            params.append(self.until)
        # A message "failed" or "used a tool" through one of its calls; replies carry no calls.
        if self.failed:
            parts.append("id IN (SELECT message_id FROM calls WHERE scope = ? AND ok = 0)")
            params.append(scope)
        if self.tools:
            parts.append("id IN (SELECT message_id FROM calls WHERE scope = ? AND tool_calls > 0)")
            params.append(scope)
        return " AND ".join(parts), params


def message_page(
    store: MemoryStore, scope: str, filters: Filters, *, before: int | None = None, after: int | None = None, limit: int = 50
) -> list[int]:
    """Ids of one timeline page, newest first: the newest ``limit`` matching ids below
    ``before``, or the oldest ``limit`` above ``after`` (keyset: no OFFSET, index order)."""
    where, params = filters.where(scope)
    if after is not None:
        rows = store.query(f"SELECT id FROM messages WHERE {where} AND id > ? ORDER BY id LIMIT ?", [*params, after, limit])
        return [int(row[0]) for row in reversed(rows)]
    if before is not None:
        where += " AND id < ?"
        params.append(before)
    return [int(row[0]) for row in store.query(f"SELECT id FROM messages WHERE {where} ORDER BY id DESC LIMIT ?", [*params, limit])]


def count_matching(store: MemoryStore, scope: str, filters: Filters, *, cap: int = COUNT_CAP) -> int:
    """How many of the scope's messages the filters keep, counted up to ``cap`` (a filter
    that keeps most of a long scope is not worth a scan of all of it: "1,000+")."""
    where, params = filters.where(scope)
    return int(store.query(f"SELECT count(*) FROM (SELECT 1 FROM messages WHERE {where} LIMIT ?) AS kept", [*params, cap])[0][0])


def first_at_or_after(store: MemoryStore, scope: str, ts: float, filters: Filters = Filters()) -> int | None:
    """The first matching message written at ``ts`` or later (a jump to a date): one
    (scope, ts) index seek."""
    where, params = filters.where(scope)
    rows = store.query(f"SELECT id FROM messages WHERE {where} AND ts >= ? ORDER BY ts, id LIMIT 1", [*params, ts])
    return int(rows[0][0]) if rows else None


def messages_by_id(store: MemoryStore, scope: str, ids: Iterable[int]) -> list[Message]:
    """The scope's messages with these ids, in the order given (an id of another scope is skipped)."""
    return [m for m in (store.get(scope, i) for i in ids) if m is not None]


def _in(ids: Sequence[int]) -> str:
    return ", ".join("?" * len(ids))


def calls_of_messages(store: MemoryStore, scope: str, message_ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """The calls recorded for each of these messages (one timeline page), oldest first."""
    found: dict[int, list[dict[str, Any]]] = {}
    if not message_ids:
        return found
    # By message id (its index), the scope checked on each row: the scope's index would read all its calls.
    scope_column = store.dialect.no_index("scope")
    rows = store.query(
        f"{_CALL_SELECT} WHERE message_id IN ({_in(message_ids)}) AND {scope_column} = ? ORDER BY id", [*message_ids, scope]
    )
    for row in rows:
        call = _call(row)
        found.setdefault(call["message_id"], []).append(call)
    return found


def replies_to(store: MemoryStore, scope: str, message_ids: Sequence[int]) -> dict[int, int]:
    """message id -> the id of the agent's reply to it, for these messages."""
    if not message_ids:
        return {}
    # The partial reply_to index, not the scope's (which would read every message of the scope).
    rows = store.query(
        f"SELECT reply_to, id FROM messages WHERE reply_to IN ({_in(message_ids)}) AND reply_to IS NOT NULL"
        f" AND {store.dialect.no_index('scope')} = ? AND role = 'agent' ORDER BY id",
        [*message_ids, scope],
    )
    return {int(reply_to): int(reply) for reply_to, reply in rows}


def call_of(store: MemoryStore, scope: str, call_id: int) -> dict[str, Any] | None:
    """One call of ``scope``; another scope's id is as if it did not exist."""
    rows = store.query(f"{_CALL_SELECT} WHERE scope = ? AND id = ?", (scope, call_id))
    return _call(rows[0]) if rows else None
