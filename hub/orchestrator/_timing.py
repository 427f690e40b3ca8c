"""Where a turn's time goes: the CPU and wall time of each stage, and the database thread pool.

The stages (intake, route, context, run, record; after the reply) are timed only when a
bench asks (``Hub.stage_times``): each sample is the CPU time of the thread that ran the
stage and its wall time. The sync part of a turn runs in a small, bounded pool of threads
(:func:`db_executor`), each stage inside one store session (one pooled connection on
PostgreSQL), so the event loop never waits for the database.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext

__all__ = ["DB_THREADS", "STAGES", "StageTimes", "db_executor"]

STAGES = ("intake", "route", "context", "run", "record", "after_reply")

# Threads that run the sync part of turns, for every hub of the process. A few are enough:
# the CPU part holds the GIL anyway; more threads only overlap more database round trips,
# and each holds a pooled connection while it runs a stage (PostgreSQL's pool has 10).
DB_THREADS = max(2, min(4, (os.cpu_count() or 2) * 2))

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def db_executor() -> ThreadPoolExecutor:
    """The process's bounded thread pool for the store work of turns (made on first use)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=DB_THREADS, thread_name_prefix="hub-db")
        return _executor


class StageTimes:
    """CPU and wall seconds per stage and turn (thread-safe).

    A stage may run in several blocks of one turn (routing before and after the LLM
    router): its blocks add up until :meth:`end_turn` makes them one sample.
    """

    def __init__(self) -> None:
        self.samples: dict[str, list[tuple[float, float]]] = {name: [] for name in STAGES}
        self._turn: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as (part of) stage ``name``: the CPU of this thread, and the wall clock."""
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            yield
        finally:
            spent_cpu, spent_wall = time.thread_time() - cpu, time.perf_counter() - wall
            with self._lock:
                total = self._turn.setdefault(name, [0.0, 0.0])
                total[0] += spent_cpu
                total[1] += spent_wall

    def end_turn(self) -> dict[str, tuple[float, float]]:
        """Close the turn: each stage it ran becomes one sample; returns them."""
        with self._lock:
            turn, self._turn = self._turn, {}
            for name, (cpu, wall) in turn.items():
                self.samples.setdefault(name, []).append((cpu, wall))
        return {name: (cpu, wall) for name, (cpu, wall) in turn.items()}

    def clear(self) -> None:
        with self._lock:
            self._turn = {}
            for values in self.samples.values():
                values.clear()


_UNTIMED = nullcontext()


def timed(times: StageTimes | None, name: str) -> AbstractContextManager[None]:
    """``times.stage(name)``, or nothing at all when no bench is timing."""
    return _UNTIMED if times is None else times.stage(name)
