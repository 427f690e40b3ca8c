"""Where a turn's time goes: the CPU and wall time of each stage.

The stages (intake, route, context, run, record; after the reply) are timed only when a
bench asks (``Hub.stage_times``): each sample is the CPU time of the thread that ran the
stage and its wall time (the store work of a stage may run in a database thread, see
:mod:`scopehub.hub.dbwork`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

__all__ = ["STAGES", "StageTimes", "timed"]

STAGES = ("intake", "route", "context", "run", "record", "after_reply")

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
