"""The store's record of model calls: what each agent call was sent, section by section, and
what the provider reported (tokens, cache, cost, failure), with a scope's totals.

A part of :class:`~scopehub.memory.Store` (its base class), on every backend.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ._model import CallRecord, Usage
from ._redact import MAX_ERROR_CHARS, redact_secrets

__all__ = ["CallLog"]

_SECTIONS = ("persona", "rules", "tools", "facts", "lessons", "awareness", "digest", "history", "message", "total")


def returned_id(dialect: Any, inserted: Any) -> Callable[[], int]:
    """The id an ``INSERT ... RETURNING id`` gives, to be taken once its transaction block is
    done. SQLite must finish the statement before its COMMIT, so it is read now; on
    PostgreSQL it is read after the block, so the INSERT travels with the COMMIT: one round
    trip rather than two."""
    if dialect.is_sqlite:
        new_id = inserted.fetchone()[0]
        return lambda: new_id
    return lambda: inserted.fetchone()[0]


class CallLog:
    """``record_call``, ``calls`` and ``usage`` of the store (it provides ``transaction``, ``query``, ``conn``)."""

    _lock: Any
    conn: Any

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
            new_id = returned_id(self.dialect, conn.execute(f"INSERT INTO calls({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) RETURNING id", values))
        return new_id()

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
