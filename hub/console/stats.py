"""Figures over many rows for the scopes list and the charts.

The calls' figures come from the :class:`~.tally.Tally` (summed per scope, hour and agent,
kept current); the messages' from a few grouped queries that indexes answer alone.
Percentiles are taken in Python over the latencies of a bucket.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from scopehub.hub.console.tally import HOUR, Tally
from scopehub.memory import MemoryStore

__all__ = [
    "SCOPE_SORTS",
    "AgentTotals",
    "Bucket",
    "ScopeRow",
    "agent_totals",
    "buckets",
    "overall_totals",
    "route_counts",
    "scope_rows",
    "time_span",
]

# The scopes list's orders: a column name -> the row's sort key (largest first but for the name).
SCOPE_SORTS = ("name", "activity", "messages", "calls", "tokens", "cost")


@dataclass(slots=True)
class ScopeRow:
    """One line of the scopes list."""

    scope: str
    messages: int = 0
    last_id: int | None = None
    last: float | None = None
    calls: int = 0
    tokens_sent: int = 0
    full_history_tokens: int = 0
    cost: float = 0.0
    failed: int = 0

    def key(self, sort: str) -> tuple:
        return {
            "name": (self.scope,),
            "activity": (self.last or 0.0, self.scope),
            "messages": (self.messages, self.scope),
            "calls": (self.calls, self.scope),
            "tokens": (self.tokens_sent, self.scope),
            "cost": (self.cost, self.scope),
        }[sort]


def scope_rows(store: MemoryStore, tally: Tally, sort: str = "activity", *, descending: bool | None = None) -> list[ScopeRow]:
    """Every scope with its messages, last activity, agent calls, tokens, cost and failed
    calls, sorted by ``sort`` (newest / largest first, names A to Z, unless ``descending`` says otherwise)."""
    rows = {scope: ScopeRow(scope) for (scope,) in store.query("SELECT scope FROM scopes")}
    # count and max(id) come from the (scope, id) index alone; the last message's time after.
    for scope, count, last_id in store.query("SELECT scope, count(*), max(id) FROM messages GROUP BY scope"):
        if scope in rows:
            rows[scope].messages, rows[scope].last_id = int(count), int(last_id)
    last_ids = [row.last_id for row in rows.values() if row.last_id is not None]
    for start in range(0, len(last_ids), 500):
        chunk = last_ids[start : start + 500]
        for scope, ts in store.query(f"SELECT scope, ts FROM messages WHERE id IN ({', '.join('?' * len(chunk))})", chunk):
            rows[scope].last = float(ts)
    for (scope, _, _), cell in tally.cells.items():
        row = rows.get(scope)
        if row is not None:
            row.calls += cell.calls
            row.tokens_sent += cell.sent
            row.full_history_tokens += cell.full
            row.cost += cell.cost
            row.failed += cell.failed
    wanted = sort if sort in SCOPE_SORTS else "activity"
    reverse = (wanted != "name") if descending is None else descending
    return sorted(rows.values(), key=lambda row: row.key(wanted), reverse=reverse)


def overall_totals(store: MemoryStore, tally: Tally) -> dict[str, int]:
    """Messages, agent calls, tokens sent and full-history tokens over every scope."""
    cells = tally.cells.values()
    return {
        "messages": int(store.query("SELECT count(*) FROM messages")[0][0]),
        "calls": sum(c.calls for c in cells),
        "tokens_sent": sum(c.sent for c in cells),
        "full_history_tokens": sum(c.full for c in cells),
    }


def time_span(tally: Tally, scope: str | None) -> tuple[float, float] | None:
    """The first and last hour of the agent calls, of one scope or all (None: no call yet)."""
    hours = [hour for (_, hour, _), _ in tally.of(scope)]
    return (float(min(hours) * HOUR), float((max(hours) + 1) * HOUR)) if hours else None


@dataclass(slots=True)
class Bucket:
    """The agent calls of one time bucket."""

    start: float
    calls: int = 0
    sent: int = 0
    full: int = 0
    latencies: list[float] = field(default_factory=list)

    @property
    def saving(self) -> float | None:
        """Share of tokens scoping saved in this bucket, in percent (None: nothing sent)."""
        return 100 * (1 - self.sent / self.full) if self.full > 0 else None

    def latency(self, share: float) -> float | None:
        """The ``share`` quantile of the reply latencies (ms), None without any."""
        if not self.latencies:
            return None
        if len(self.latencies) == 1:
            return self.latencies[0]
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[round(share * 100) - 1]


def buckets(tally: Tally, scope: str | None, seconds: int) -> list[Bucket]:
    """The agent calls summed per ``seconds``-long bucket (a whole number of hours), oldest first."""
    found: dict[int, Bucket] = {}
    for (_, hour, _), cell in tally.of(scope):
        start = hour * HOUR // seconds * seconds
        bucket = found.get(start)
        if bucket is None:
            bucket = found[start] = Bucket(float(start))
        bucket.calls += cell.calls
        bucket.sent += cell.sent
        bucket.full += cell.full
        bucket.latencies.extend(cell.latencies)
    return [found[key] for key in sorted(found)]


@dataclass(frozen=True, slots=True)
class AgentTotals:
    """One agent's calls, tokens (sent, and the provider's input and output) and cost."""

    agent: str
    calls: int
    tokens_sent: int
    provider_tokens: int
    cost: float
    failed: int


def agent_totals(tally: Tally, scope: str | None) -> list[AgentTotals]:
    """Per agent, most tokens first."""
    sums: dict[str, list[float]] = {}
    for (_, _, agent), cell in tally.of(scope):
        row = sums.setdefault(agent, [0, 0, 0, 0.0, 0])
        row[0] += cell.calls
        row[1] += cell.sent
        row[2] += cell.provider
        row[3] += cell.cost
        row[4] += cell.failed
    totals = [AgentTotals(a, int(n), int(sent), int(provider), float(cost), int(failed)) for a, (n, sent, provider, cost, failed) in sums.items()]
    return sorted(totals, key=lambda t: (-t.tokens_sent, t.agent))


def route_counts(store: MemoryStore, scope: str | None) -> list[tuple[str, int]]:
    """How the people's messages were routed: ``(via, count)``, most used first."""
    where = "role = 'user'" + (" AND scope = ?" if scope is not None else "")
    # GROUP BY the bare column: the (scope, role, via) index gives the groups in order, no sort.
    rows = store.query(f"SELECT via, count(*) FROM messages WHERE {where} GROUP BY via", (scope,) if scope is not None else ())
    counts = [(str(via) if via is not None else "not routed", int(n)) for via, n in rows]
    return sorted(counts, key=lambda item: (-item[1], item[0]))

