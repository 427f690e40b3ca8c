"""The agent calls summed per scope, hour and agent, kept up to date as calls are added.

The scopes list and the charts sum every call of a scope (100,000 messages are 50,000
calls): reading them all for every page view costs far more than the page. So this
process keeps the sums per (scope, hour, agent) and each hour's reply latencies, and
before every use asks the store two cheap figures: how many calls there are and the
newest id. Unchanged: the sums are current. Only newer calls (the usual case): those are
read and added. Anything else (a scope erased or moved, a database replaced): all is read
again. Call records are never changed once written, so this is exact, not a cache that
may be stale.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scopehub.memory import MemoryStore

__all__ = ["HOUR", "Cell", "Tallies", "Tally"]

HOUR = 3600
_HUB_VIAS = ("router", "extractor")
_COLUMNS = (
    "id, scope, CAST(ts AS INTEGER) / 3600, agent, via, ok, total, full_history_tokens,"
    " coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0), coalesce(cost, 0), latency_ms"
)


@dataclass(slots=True)
class Cell:
    """The agent calls of one scope, one hour and one agent."""

    calls: int = 0
    sent: int = 0
    full: int = 0
    provider: int = 0
    cost: float = 0.0
    failed: int = 0
    latencies: array = field(default_factory=lambda: array("d"))

    def add(self, ok: int, sent: int, full: int, provider: int, cost: float, latency: float | None) -> None:
        self.calls += 1
        self.sent += int(sent or 0)
        self.full += int(full or 0)
        self.provider += int(provider or 0)
        self.cost += float(cost or 0.0)
        self.failed += 0 if ok else 1
        if latency is not None:
            self.latencies.append(float(latency))


@dataclass
class Tally:
    """Agent calls per (scope, hour, agent), with the figures that say which calls it holds."""

    count: int = 0  # every call row it has seen (the hub's own calls included, not summed)
    max_id: int = 0
    cells: dict[tuple[str, int, str], Cell] = field(default_factory=dict)
    by_scope: dict[str, dict[tuple[str, int, str], Cell]] = field(default_factory=dict)  # the same cells, per scope
    vias: dict[tuple[str, str], int] = field(default_factory=dict)  # (scope, via) -> agent calls

    def add(self, rows: Iterable[Sequence[Any]]) -> None:
        for call_id, scope, hour, agent, via, ok, sent, full, provider, cost, latency in rows:
            self.count += 1
            self.max_id = max(self.max_id, int(call_id))
            if via in _HUB_VIAS:
                continue
            key = (str(scope), int(hour), str(agent))
            cell = self.cells.get(key)
            if cell is None:
                cell = self.cells[key] = self.by_scope.setdefault(key[0], {})[key] = Cell()
            cell.add(ok, sent, full, provider, cost, latency)
            route = (str(scope), str(via or "?"))
            self.vias[route] = self.vias.get(route, 0) + 1

    def of(self, scope: str | None) -> Iterable[tuple[tuple[str, int, str], Cell]]:
        """The cells of one scope, or of all."""
        return self.cells.items() if scope is None else self.by_scope.get(scope, {}).items()


class Tallies:
    """The store's one :class:`Tally`, brought up to date on each use (thread-safe)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self._tally: Tally | None = None
        self._lock = threading.Lock()
        self.reads = 0  # full reads of the calls table, for the tests and the bench

    def current(self) -> Tally:
        with self._lock:
            count, max_id = self.store.query("SELECT count(*), coalesce(max(id), 0) FROM calls")[0]
            count, max_id = int(count), int(max_id)
            tally = self._tally
            if tally is not None and (tally.count, tally.max_id) == (count, max_id):
                return tally
            if tally is not None and max_id > tally.max_id:
                newer = self.store.query(
                    f"SELECT {_COLUMNS} FROM calls WHERE id > ? AND id <= ? ORDER BY id", (tally.max_id, max_id)
                )
                if tally.count + len(newer) == count:  # only additions since: add them
                    tally.add(newer)
                    return tally
            fresh = Tally()
            fresh.add(self.store.query(f"SELECT {_COLUMNS} FROM calls WHERE id <= ? ORDER BY id", (max_id,)))
            self.reads += 1
            self._tally = fresh
            return fresh
