"""Store work off the event loop: a small, bounded pool of threads, one store session per step.

The store's interface is synchronous (every record function, tool and the conformance
suite use it as it is). Where its calls wait on the network (PostgreSQL), a step of
store work runs in one of :data:`DB_THREADS` threads, inside one store session (one
pooled connection for the whole step, not one per call), so the event loop keeps serving
other chats meanwhile. On SQLite the work runs where it is: its calls never wait on the
network and this process is the single writer, so a thread hop would only add CPU and
latency. Chosen over psycopg's async API because it leaves the store protocol untouched;
measured with ``agents-hub bench hub --db-threads on|off`` and ``bench workers``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
from collections.abc import Callable
from contextlib import nullcontext, suppress
from typing import Any, TypeVar

__all__ = ["DB_THREADS", "StepThreads", "db_executor", "in_db_thread", "offloads", "use_db_threads"]

_T = TypeVar("_T")

log = logging.getLogger(__name__)

# Threads that run the sync part of turns, for every hub of the process (HUB_DB_THREADS,
# see use_db_threads). The CPU part holds the GIL anyway; the threads overlap database
# round trips, and each holds a pooled connection while it runs a step: the default leaves
# two of PostgreSQL's 10 pooled connections to the calls made on the event loop itself.
# 4 threads against 32 answer slots queued turns behind each other's round trips
# (bench workers, one worker: 32 msg/s); 8 with 64 slots keep the database busy instead.
DB_THREADS = 8

_threads = DB_THREADS
_executor: StepThreads | None = None
_executor_lock = threading.Lock()


class StepThreads:
    """A fixed pool of daemon threads that run store steps for event loops.

    Leaner than ``loop.run_in_executor`` on a ThreadPoolExecutor for steps this small (a
    few statements): the step resolves its caller's asyncio future itself, with one
    ``call_soon_threadsafe``, instead of a concurrent Future (a Condition of its own)
    chained to an asyncio one and a shield over that. About 25 us of CPU less per step on
    this 2-core VM (a micro-benchmark of both, 5,000 steps): a turn takes nine or ten.
    """

    def __init__(self, max_workers: int) -> None:
        self._max_workers = max_workers
        self._queue: queue.SimpleQueue[_Step | None] = queue.SimpleQueue()
        self._started = 0
        self._lock = threading.Lock()

    def start(self, step: _Step) -> None:
        """Queue ``step``; the threads are made on first use."""
        if self._started < self._max_workers:
            with self._lock:
                while self._started < self._max_workers:
                    self._started += 1
                    threading.Thread(target=self._run, name=f"hub-db_{self._started}", daemon=True).start()
        self._queue.put(step)

    def shutdown(self) -> None:
        """Let the threads go once they finish what they run (the queued steps still run)."""
        for _ in range(self._started):
            self._queue.put(None)

    def _run(self) -> None:
        while (step := self._queue.get()) is not None:
            step.run()
            del step  # not kept alive while waiting for the next


class _Step:
    """One call of :func:`in_db_thread`: run in a pool thread, settled on its caller's loop."""

    __slots__ = ("args", "context", "finished", "future", "loop", "work")

    def __init__(self, loop: asyncio.AbstractEventLoop, work: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.work, self.args = work, args
        self.context = contextvars.copy_context()
        self.finished: asyncio.Future[None] | None = None  # awaited by a cancelled caller

    def run(self) -> None:  # in a pool thread
        result, error = None, None
        try:
            result = self.context.run(self.work, *self.args)
        except BaseException as exc:  # handed to the caller
            error = exc
        with suppress(RuntimeError):  # the caller's loop closed meanwhile: nobody waits
            self.loop.call_soon_threadsafe(self._settle, result, error)

    def _settle(self, result: Any, exc: BaseException | None) -> None:  # on the caller's loop
        self.work = self.args = None  # type: ignore[assignment]
        if not self.future.done():
            if exc is not None:
                self.future.set_exception(exc)
            else:
                self.future.set_result(result)
        elif exc is not None:
            log.debug("a store step of a cancelled caller failed: %r", exc)
        if self.finished is not None and not self.finished.done():
            self.finished.set_result(None)

    @property
    def settled(self) -> bool:
        return self.work is None


def use_db_threads(threads: int) -> int:
    """Size the process's thread pool (``0``: the default, :data:`DB_THREADS`); returns the size.

    Called when a hub is built from its settings (HUB_DB_THREADS); a pool already made with
    another size is replaced (its threads finish what they run)."""
    global _threads, _executor
    size = int(threads) if threads and threads > 0 else DB_THREADS
    with _executor_lock:
        if _executor is not None and _threads != size:  # the pool was made with _threads
            _executor.shutdown()
            _executor = None
        _threads = size
    return size


def db_executor() -> StepThreads:
    """The process's bounded thread pool for the store work of turns (made on first use)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = StepThreads(_threads)
        return _executor


def offloads(store: Any) -> bool:
    """Whether store work leaves the event loop: yes for a database over the network
    (PostgreSQL); no for SQLite, where a call never waits on the network and this process
    is the single writer (a thread hop would only add CPU and latency)."""
    return not getattr(getattr(store, "dialect", None), "is_sqlite", True)


async def in_db_thread(store: Any, work: Callable[..., _T], *args: Any, threads: bool | None = None) -> _T:
    """``work(*args)`` inside one store session: in the database thread pool when the store
    :func:`offloads` (or ``threads`` says so), else right here.

    A cancelled caller still waits for the thread to finish its step (milliseconds): a
    thread cannot be stopped, and what the caller holds (a scope's lock) must outlast it.
    """
    if not (threads if threads is not None else offloads(store)):
        return _in_session(store, work, *args)
    step = _Step(asyncio.get_running_loop(), _in_session, (store, work, *args))
    db_executor().start(step)
    try:
        return await step.future
    except asyncio.CancelledError:
        if not step.settled:  # settled runs on this loop: no race with the check
            step.finished = step.loop.create_future()
            await step.finished
        raise


def _in_session(store: Any, work: Callable[..., _T], *args: Any) -> _T:
    session = getattr(store, "session", None)
    with session() if session is not None else nullcontext():
        return work(*args)


