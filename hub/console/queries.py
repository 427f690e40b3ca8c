"""The console's own reads: the few the store's read functions do not cover.

Everything else comes from the existing functions (``Store.usage``, ``Store.window``,
``current_facts``, ``recent_events``...). The SQL here is kept portable (plain
``SELECT``, ``count``/``sum``/``coalesce``, ``IN``, ``?`` parameters through
``store.query``) so that another backend behind the same ``query`` runs it unchanged:
no ``json_extract``, no date functions, bucketing done in Python.

Every read of scoped data takes the scope; the timeline reads are keyset-paginated
(``id < cursor LIMIT n``) and never load a scope whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from scopehub.memory import MemoryStore

__all__ = [
    "CALL_COLUMNS",
    "call_of",
    "calls_between",
    "overall_totals",
    "route_counts",
    "scope_exists",
    "scopes_after",
    "token_buckets",
    "token_span",
]

# The hub's own model calls (LLM router, fact extractor) have no agent context and no
# full-history counterfactual; Store.usage leaves them out of the saving the same way.
_AGENT_CALLS = "coalesce(via, '') NOT IN ('router', 'extractor')"

CALL_COLUMNS = (
    "id", "scope", "agent", "message_id", "via", "also_sees", "model",
    "persona", "rules", "tools", "facts", "lessons", "awareness", "digest", "history", "message", "total",
    "full_history_tokens", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens",
    "billed_tokens", "cost", "latency_ms", "ok", "ts", "extra",
)  # fmt: skip
_CALL_SELECT = "SELECT " + ", ".join(CALL_COLUMNS) + " FROM calls"


def _call(row: Sequence[Any]) -> dict[str, Any]:
    call = dict(zip(CALL_COLUMNS, row, strict=True))
    call["also_sees"] = tuple(json.loads(call["also_sees"] or "[]"))
    try:
        call["extra"] = json.loads(call["extra"] or "{}")
    except (TypeError, ValueError):
        call["extra"] = {}
    return call


def scope_exists(store: MemoryStore, scope: str) -> bool:
    """Whether the store holds anything of ``scope``."""
    return bool(store.query("SELECT 1 FROM scopes WHERE scope = ?", (scope,)))


def scopes_after(store: MemoryStore, after: str, limit: int) -> list[str]:
    """One page of scope names in order, after ``after`` (keyset: no OFFSET)."""
    return [row[0] for row in store.query("SELECT scope FROM scopes WHERE scope > ? ORDER BY scope LIMIT ?", (after, limit))]


def calls_between(store: MemoryStore, scope: str, first_id: int, last_id: int) -> list[dict[str, Any]]:
    """The scope's calls recorded for messages ``first_id`` to ``last_id`` (one timeline page), oldest first."""
    rows = store.query(
        f"{_CALL_SELECT} WHERE scope = ? AND message_id >= ? AND message_id <= ? ORDER BY id",
        (scope, first_id, last_id),
    )
    return [_call(row) for row in rows]


def call_of(store: MemoryStore, scope: str, call_id: int) -> dict[str, Any] | None:
    """One call of ``scope``; another scope's id is as if it did not exist."""
    rows = store.query(f"{_CALL_SELECT} WHERE scope = ? AND id = ?", (scope, call_id))
    return _call(rows[0]) if rows else None


def token_span(store: MemoryStore, scope: str | None) -> tuple[float, float] | None:
    """The first and last time of the agent calls, of one scope or all (None: no call yet)."""
    where, params = (f"scope = ? AND {_AGENT_CALLS}", (scope,)) if scope is not None else (_AGENT_CALLS, ())
    first, last = store.query(f"SELECT min(ts), max(ts) FROM calls WHERE {where}", params)[0]
    return None if first is None else (float(first), float(last))


def token_buckets(store: MemoryStore, scope: str | None, seconds: int) -> list[tuple[float, int, int, int]]:
    """``(bucket start, calls, tokens sent, full-history tokens)`` per ``seconds``-long bucket, oldest first.

    Integer division of the whole seconds is the one bucketing every SQL dialect does the
    same way (date functions differ); casting rounds a fraction in some and truncates it
    in others, which moves a call at most a second, never out of its bucket's neighbourhood.
    """
    where, params = (f"scope = ? AND {_AGENT_CALLS}", [scope]) if scope is not None else (_AGENT_CALLS, [])
    # GROUP BY 1: the selected expression itself (PostgreSQL would not take a second, equal
    # parameter as the same expression).
    rows = store.query(
        "SELECT CAST(ts AS INTEGER) / ? AS bucket, count(*), coalesce(sum(total), 0), coalesce(sum(full_history_tokens), 0)"
        f" FROM calls WHERE {where} GROUP BY 1 ORDER BY 1",
        [int(seconds), *params],
    )
    return [(float(bucket) * seconds, int(n), int(sent), int(full)) for bucket, n, sent, full in rows]


def route_counts(store: MemoryStore, scope: str | None) -> list[tuple[str, int]]:
    """How the people's messages were routed: ``(via, count)``, most used first."""
    where = "role = 'user'" + (" AND scope = ?" if scope is not None else "")
    rows = store.query(
        f"SELECT coalesce(via, 'not routed'), count(*) FROM messages WHERE {where} GROUP BY coalesce(via, 'not routed')",
        (scope,) if scope is not None else (),
    )
    return sorted(((str(via), int(n)) for via, n in rows), key=lambda item: (-item[1], item[0]))


def overall_totals(store: MemoryStore) -> dict[str, int]:
    """Messages, agent calls, tokens sent and full-history tokens over every scope."""
    messages = store.query("SELECT count(*) FROM messages")[0][0]
    calls, sent, full = store.query(
        f"SELECT count(*), coalesce(sum(total), 0), coalesce(sum(full_history_tokens), 0) FROM calls WHERE {_AGENT_CALLS}"
    )[0]
    return {"messages": int(messages), "calls": int(calls), "tokens_sent": int(sent), "full_history_tokens": int(full)}
